"""An assessor judges an adaptive pool with the keyboard in real Chromium (issue 15): every
document once, the order chosen from the verdicts, and nothing on the page names a run."""

from __future__ import annotations

import pytest

from assess.assignments import assign
from assess.models import AssignmentItem
from campaigns.models import Judgment
from pooling.models import AdaptiveTopic
from tests.factories import make_documents, make_pool, make_run, make_topics
from tests.pooling.test_adjudication import QRELS, RUNS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_assessor_judges_an_adaptive_pool_with_the_keyboard(
    live_server, login, campaign, assessor_a
):
    make_topics(campaign, ["t1"])
    make_documents(campaign, sorted(QRELS))
    for tag, docs in RUNS.items():
        make_run(campaign, f"SECRET-RUN-{tag}", {"t1": [(d, 10.0 - i) for i, d in enumerate(docs)]})
    pool = make_pool(campaign, depth=5, adjudication={"order": "bandit", "burn_in": 0})
    [assignment] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=list(campaign.topics.all()),
        mode="queue",
    )
    relevant = campaign.relevance_threshold
    page = login(assessor_a)
    page.goto(f"{live_server.url}/c/{campaign.slug}/judge/{assignment.token}/")
    served = []
    for _ in range(len(QRELS)):
        page.wait_for_selector("#judge")
        assert "SECRET-RUN" not in page.content()
        token = page.locator("#judge").get_attribute("data-item")
        doc = AssignmentItem.objects.get(token=token).doc_id
        served.append(doc)
        page.keyboard.press(str(relevant * QRELS[doc]))
        page.wait_for_function(
            "token => !document.querySelector('#judge') || "
            "document.querySelector('#judge').dataset.item !== token",
            arg=token,
        )
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")
    assert "SECRET-RUN" not in page.content()
    assert sorted(served) == sorted(QRELS)  # every document once
    stored = dict(Judgment.objects.values_list("doc_id", "label"))
    assert stored == {doc: relevant * label for doc, label in QRELS.items()}
    # The order was chosen run by run, on the organiser's side only.
    assert set(AdaptiveTopic.objects.get(pool=pool).chosen_by) <= set(QRELS)
    assert served[0] == "d1"  # run A's first document: every run ties before any verdict
