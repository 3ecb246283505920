"""Scoping every campaign lookup to the requesting user.

A campaign the user may not see is a 404, never a 403: outsiders learn nothing, not even that the
slug exists.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest

from campaigns.models import Campaign, Membership

ORGANISER = Membership.Role.ORGANISER
ASSESSOR = Membership.Role.ASSESSOR
ADJUDICATOR = Membership.Role.ADJUDICATOR
# The pages that show every assessor's labels and settle disagreements (agreement, pairs,
# adjudication): organisers and adjudicators, never assessors.
ADJUDICATING = (ORGANISER, ADJUDICATOR)


def get_campaign_for(
    request: HttpRequest, slug: str, *, role: str | tuple[str, ...] | None = ORGANISER
) -> Campaign:
    """The campaign ``slug`` if the user holds ``role`` (one of ``role`` when a tuple) in it
    (any role when ``role`` is None).

    Superusers count as organisers of every campaign."""
    campaign = Campaign.objects.filter(slug=slug).first()
    if campaign is None:
        raise Http404("No such campaign.")
    held = campaign.role_of(request.user)
    allowed = (role,) if isinstance(role, str) else role
    if held is None or (allowed is not None and held not in allowed):
        raise Http404("No such campaign.")
    request.campaign_role = held
    return campaign


def campaigns_for(user) -> dict[str, list[Campaign]]:
    """The user's campaigns by role, for the home page."""
    if not user.is_authenticated:
        return {ORGANISER: [], ASSESSOR: [], ADJUDICATOR: []}
    if user.is_superuser:
        organised = list(Campaign.objects.all())
        judged = list(Campaign.objects.filter(memberships__user=user, memberships__role=ASSESSOR))
        return {ORGANISER: organised, ASSESSOR: judged, ADJUDICATOR: []}
    memberships = Membership.objects.filter(user=user).select_related("campaign")
    result: dict[str, list[Campaign]] = {ORGANISER: [], ASSESSOR: [], ADJUDICATOR: []}
    for membership in memberships:
        result[membership.role].append(membership.campaign)
    return result
