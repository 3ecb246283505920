"""What the judging screen needs from the assessor-flow pieces, in one call that costs no query.

The judging view (assess/views.py) calls ``screen_context`` with what it has already loaded and
adds the result to its context; the judging template includes the partials that read it:
``assess/_guidelines.html`` (the collapsible guidelines panel), ``assess/_keys.html`` (the keys
list of the dialog), and uses ``document_html`` for every document it shows (the current one and
the prefetched one), so the topic's terms are marked when the campaign asks for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from assess.highlight import highlight_html, topic_terms
from assess.keys import screen_keys
from assess.models import Assignment, AssignmentItem
from campaigns.models import Campaign, Label, Topic


def document_html(body_html: str, *, topic: Topic | None, campaign: Campaign) -> SafeString:
    """A document's sanitised body, ready for the template: with the topic's terms marked
    (``<mark class="term">``) when the campaign highlights terms, unchanged otherwise."""
    # body_html was sanitised with nh3 at import (campaigns/sanitize.py); marking adds only
    # <mark> elements around escaped text (assess/highlight.py).
    if not campaign.highlight_terms or topic is None:
        return mark_safe(body_html)
    terms = topic_terms(topic.title, topic.description)
    return mark_safe(highlight_html(body_html, terms))


def flow_urls(assignment: Assignment, item: AssignmentItem) -> dict[str, str]:
    """The addresses of the flow's actions for the document on screen."""
    slug, token = assignment.campaign.slug, assignment.token
    return {
        "skip_url": reverse("assess:skip", args=[slug, token, item.token]),
        "next_url": reverse("assess:next", args=[slug, token, item.token]),
        "revise_url": reverse("assess:judged", args=[slug, token, item.topic_id]),
        "keys_url": reverse("assess:keys", args=[slug, token]) + f"?item={item.token}",
    }


def screen_context(
    *, assignment: Assignment, item: AssignmentItem, labels: Iterable[Label]
) -> dict[str, object]:
    """Context for the judging template: the flow's URLs, the keys, and the campaign's switches
    (``topic_breaks``, ``highlight_terms``). Reads only objects the view already holds."""
    campaign = assignment.campaign
    keys = screen_keys(campaign=campaign, labels=labels)
    return {
        **flow_urls(assignment, item),
        "screen_keys": keys,
        # The key of each command on this screen ("" when a label took its letter).
        "command_keys": {row.command: row.key for row in keys if row.command != "label"},
        "topic_breaks": campaign.topic_breaks,
        "highlight_terms": campaign.highlight_terms,
    }
