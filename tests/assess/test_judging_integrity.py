"""The judgment POST cannot be abused or leave "was it saved?" open (issue 13, audit (1)-(3)):
a submission id is bound to its (assessor, item); a POST for an item taken away since the page
was shown is refused; a database failure gets an answer the page can show, and the retry with the
same submission id is idempotent."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.db import OperationalError
from django.urls import reverse

from assess.assignments import assign, reassign
from assess.judging import next_item
from assess.models import AssignmentItem
from campaigns.models import Judgment, JudgmentRevision
from tests.factories import small_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def primary(campaign, assessor_a):
    pool = small_campaign(campaign, docs=4)
    (assignment,) = assign(
        campaign=campaign, pool=pool, user=assessor_a, topics=list(campaign.topics.all()), seed=3
    )
    return assignment


def _url(assignment, item) -> str:
    return reverse("assess:judge", args=[assignment.campaign.slug, assignment.token, item.token])


def _form(client, assignment, item) -> dict[str, str]:
    html = client.get(_url(assignment, item)).content.decode()
    return dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', html))


def test_a_submission_id_reused_on_another_item_is_refused_and_stores_nothing(
    client, assessor_a, primary
):
    client.force_login(assessor_a)
    x = next_item(primary)
    form_x = _form(client, primary, x)
    assert client.post(_url(primary, x), {**form_x, "label": "1"}).status_code == 302
    y = next_item(primary)
    assert y.pk != x.pk
    # Y's own form, but X's submission id: the replay of the audit.
    form_y = {**_form(client, primary, y), "submission": form_x["submission"]}
    response = client.post(_url(primary, y), {**form_y, "label": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "already used for another document" in response.content.decode()
    y.refresh_from_db()
    assert y.judgment_id is None
    assert Judgment.objects.count() == 1
    assert JudgmentRevision.objects.count() == 1
    assert not Judgment.objects.filter(topic=y.topic, doc_id=y.doc_id).exists() or (
        (y.topic_id, y.doc_id) == (x.topic_id, x.doc_id)
    )


def test_a_post_for_a_topic_moved_to_someone_else_is_refused_and_stores_nothing(
    client, assessor_a, assessor_b, primary
):
    client.force_login(assessor_a)
    item = next_item(primary)
    form = _form(client, primary, item)  # the old tab
    reassign(assignment=primary, topics=[item.topic], to_user=assessor_b)
    response = client.post(_url(primary, item), {**form, "label": "2"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 409
    assert "moved to another assessor" in response.content.decode()
    assert not Judgment.objects.exists()
    assert not JudgmentRevision.objects.exists()
    # Without JavaScript too.
    response = client.post(_url(primary, item), {**form, "label": "2"})
    assert response.status_code == 409
    assert not Judgment.objects.exists()


def test_a_database_failure_answers_with_a_message_and_the_retry_is_idempotent(
    client, assessor_a, primary
):
    client.force_login(assessor_a)
    item = next_item(primary)
    form = {**_form(client, primary, item), "label": "2"}
    # The verdict is committed, then the connection dies before the answer is built.
    with mock.patch("assess.views.panel_reads", side_effect=OperationalError("server closed")):
        failed = client.post(_url(primary, item), form, HTTP_HX_REQUEST="true")
    assert failed.status_code == 503
    assert "not confirmed" in failed.content.decode()
    assert failed["Retry-After"]
    # The page retries with the same submission id: the stored verdict, once.
    retried = client.post(_url(primary, item), form, HTTP_HX_REQUEST="true")
    assert retried.status_code == 200
    assert JudgmentRevision.objects.count() == 1
    assert AssignmentItem.objects.get(pk=item.pk).judgment.label == 2


def test_a_failure_before_anything_is_stored_answers_with_a_message(client, assessor_a, primary):
    client.force_login(assessor_a)
    item = next_item(primary)
    form = {**_form(client, primary, item), "label": "1"}
    with mock.patch("assess.views.submit", side_effect=OperationalError("terminating connection")):
        failed = client.post(_url(primary, item), form)
    assert failed.status_code == 503
    assert "not confirmed" in failed.content.decode()
    assert not JudgmentRevision.objects.exists()
    assert client.post(_url(primary, item), form).status_code == 302
    assert JudgmentRevision.objects.count() == 1
