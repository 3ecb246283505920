"""Concurrent submissions through the judging view, on PostgreSQL where requests really race.

Two races an assessor's browser produces: the same form sent several times at once (a double
click, an htmx retry, a flaky network), and two tabs revising the same judgment from the same
version. The first must store one judgment and one revision; the second must let exactly one
revision through, answer the others 409 with a message, and keep every accepted verdict in the
history.
"""

from __future__ import annotations

import re
import threading
from collections import Counter

import pytest
from django.db import connection, connections
from django.test import Client
from django.urls import reverse

from assess.assignments import assign
from assess.judging import next_item
from campaigns.models import Judgment, JudgmentRevision
from tests.conftest import require
from tests.factories import small_campaign

THREADS = 16


@pytest.fixture
def judging(campaign, assessor_a, transactional_db):
    require(connection.vendor == "postgresql", "concurrent requests race only on PostgreSQL")
    pool = small_campaign(campaign, docs=4)
    [assignment] = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=3
    )
    item = next_item(assignment)
    url = reverse("assess:judge", args=[campaign.slug, assignment.token, item.token])
    return assessor_a, url


def _form(client: Client, url: str) -> dict[str, str]:
    html = client.get(url, secure=True).content.decode()
    return dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', html))


def _post_all(user, url: str, forms: list[dict[str, str]]) -> list[int]:
    """POST each form from its own thread and client, all released at once; the status codes."""
    barrier = threading.Barrier(len(forms))
    statuses: list[int] = [0] * len(forms)

    def send(index: int) -> None:
        client = Client()
        client.force_login(user)
        try:
            barrier.wait()
            response = client.post(url, forms[index], secure=True, HTTP_HX_REQUEST="true")
            statuses[index] = response.status_code
            if response.status_code == 409:
                assert "judged in another tab" in response.content.decode()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(forms))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def test_the_same_form_sent_at_once_from_many_threads_records_one_judgment(judging):
    user, url = judging
    client = Client()
    client.force_login(user)
    form = {**_form(client, url), "label": "1"}
    statuses = _post_all(user, url, [form] * THREADS)
    print(f"\ndouble submit: {THREADS} identical posts -> {dict(Counter(statuses))}")
    assert set(statuses) == {200}  # every copy gets the next document, none an error
    assert Judgment.objects.count() == 1
    assert JudgmentRevision.objects.count() == 1


def test_tabs_revising_the_same_version_at_once_let_one_through(judging):
    user, url = judging
    client = Client()
    client.force_login(user)
    client.post(url, {**_form(client, url), "label": "0"}, secure=True)  # version 1
    tabs = [_form(client, url) for _ in range(THREADS)]  # all show version 1
    assert {tab["version"] for tab in tabs} == {"1"}
    forms = [{**tab, "label": str(1 + index % 2)} for index, tab in enumerate(tabs)]
    statuses = _post_all(user, url, forms)
    counts = Counter(statuses)
    print(f"\nstale revision: {THREADS} tabs revising version 1 -> {dict(counts)}")
    assert counts == {200: 1, 409: THREADS - 1}
    winner = forms[statuses.index(200)]["label"]
    judgment = Judgment.objects.get()
    assert (judgment.version, str(judgment.label)) == (2, winner)
    history = list(judgment.revisions.order_by("version").values_list("version", "label"))
    assert history == [(1, 0), (2, int(winner))]  # both accepted verdicts kept, in order
