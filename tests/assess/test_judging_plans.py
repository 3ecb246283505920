"""The judging statements read a handful of rows whatever the size of the assignment, the queue
or the assessor's history (issue 13). Each statement the judging loop sends is run first as
EXPLAIN ANALYZE (in a savepoint rolled back, so writes happen once, for real) and every node of
its plan must touch few rows: rows returned plus rows removed by a filter, over all loops.

The audit behind it (bench/judging_cost.py at 1,630 documents a topic): the previous document
was found by walking the assignment backwards from its end to the current position, ~1,750
rows a read; the scope's judgment was found through the assessor's index, every judgment of
theirs a request; a queue claim hashed the whole queue, the assessor's items and judgments and
sorted what was left; queue progress counted the topic's queue. PostgreSQL only (the plans are
its; CI runs them)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from assess.assignments import assign
from assess.judging import claim_next, load_scope, next_item, panel_reads
from tests.factories import judge, make_pool, small_campaign

pytestmark = pytest.mark.django_db
DOCS = 300  # per topic, two topics: 600 items an assignment, a queue of 600 entries
JUDGED = 200
# Rows one plan node may touch. The reads above touched hundreds (growing with the data); the
# flat plans touch a few (small tables such as topics are read whole).
MOST = 30
TABLES = (
    "campaigns_document",
    "campaigns_topic",
    "assess_assignment",
    "assess_assignmentitem",
    "assess_queueitem",
    "campaigns_judgment",
    "campaigns_judgmentrevision",
    "assess_topicprogress",
    "assess_queueprogress",
)


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plans (CI runs them).")


class Plans:
    """An execute wrapper: each statement the judging code sends is first EXPLAIN ANALYZEd."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, dict]] = []

    def __call__(self, execute, sql, params, many, context):
        raw = connection.connection.cursor()
        raw.execute("SAVEPOINT plan_probe")
        raw.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (document,) = raw.fetchone()
        raw.execute("ROLLBACK TO SAVEPOINT plan_probe")
        plan = document[0] if isinstance(document, list) else json.loads(document)[0]
        self.plans.append((sql, plan["Plan"]))
        return execute(sql, params, many, context)


def _widest(node: dict, path: str = "") -> list[tuple[int, str]]:
    loops = node.get("Actual Loops", 1) or 1
    touched = loops * (
        node.get("Actual Rows", 0)
        + node.get("Rows Removed by Filter", 0)
        + node.get("Rows Removed by Join Filter", 0)
        + node.get("Rows Removed by Index Recheck", 0)
    )
    where = f"{path}/{node['Node Type']} {node.get('Index Name') or node.get('Relation Name', '')}"
    found = [(touched, where)]
    for child in node.get("Plans", []):
        found += _widest(child, where)
    return found


def _assert_flat(call, *args, **kwargs):
    plans = Plans()
    # Planned as on a large database. These tables are small enough here that reading one
    # whole (a sequential scan, or an index's whole range hashed or merged against a one-row
    # side) is the planner's cheapest plan; on a campaign's real tables it is an index probe per
    # outer row. With those plans off, a plan that still touches many rows does so by its shape:
    # a walk filtered by a join, a sort of every candidate, a count, an index read whole.
    off = ("enable_seqscan", "enable_hashjoin", "enable_mergejoin")
    with connection.cursor() as cursor:
        for setting in off:
            cursor.execute(f"SET LOCAL {setting} = off")
    with connection.execute_wrapper(plans):
        result = call(*args, **kwargs)
    with connection.cursor() as cursor:
        for setting in off:
            cursor.execute(f"RESET {setting}")
    assert plans.plans, "no statement sent"
    for sql, plan in plans.plans:
        touched, where = max(_widest(plan))
        assert touched <= MOST, f"{touched} rows at {where} in:\n{sql[:400]}"
    return result


def _analyze() -> None:
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"ANALYZE {table}")


@pytest.fixture
def grown(postgres, campaign, assessor_a, assessor_b):
    """An assignment of 600 items and a shared queue of 600 entries, each a third judged, with
    statistics taken before any judgment existed (as after a bulk load, before autovacuum) or
    after (``fresh``)."""

    def build(*, fresh: bool):
        pool = small_campaign(campaign, docs=DOCS)
        topics = list(campaign.topics.all())
        (primary,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=1)
        queue_pool = make_pool(campaign, depth=DOCS)
        (queue,) = assign(
            campaign=campaign, pool=queue_pool, user=assessor_b, topics=topics, mode="queue"
        )
        if not fresh:
            _analyze()
        for _ in range(JUDGED):
            judge(next_item(primary), 1)
            judge(claim_next(queue), 0)
        if fresh:
            _analyze()
        return primary, queue

    return build


@pytest.mark.parametrize("fresh", [False, True], ids=["stale-statistics", "fresh-statistics"])
def test_a_primary_assignments_reads_are_flat(grown, fresh):
    primary, _ = grown(fresh=fresh)
    assessor = primary.assessor
    item = next_item(primary)
    # The scope of a request for a judged item (its judgment joined) and for an open one.
    judged = primary.items.filter(judgment__isnull=False).order_by("position").last()
    for target in (judged, item):
        scope = _assert_flat(
            load_scope,
            user_id=assessor.user_id,
            slug=primary.campaign.slug,
            token=primary.token,
            item_token=target.token,
        )
        assert scope is not None
        assert scope.pk == target.pk
    # The judging page (the item, its previous and next documents, progress) ...
    panel = _assert_flat(panel_reads, primary, item=item)
    assert panel.previous is not None
    assert panel.upcoming is not None
    # ... and a verdict's answer: the document the page moved on to, by its token.
    upcoming = panel.upcoming
    panel = _assert_flat(panel_reads, primary, shown=upcoming.token, also_topic=item.topic)
    assert panel.item.pk == upcoming.pk
    assert panel.previous is not None


def test_a_queue_claim_and_its_progress_are_flat(grown):
    _, queue = grown(fresh=True)
    last = queue.items.order_by("position").last()
    # Nothing open: the answer claims the next entry of the shared queue in its read.
    panel = _assert_flat(panel_reads, queue, after=last.position, claim=True)
    assert panel.item is not None
    assert panel.item.queue_item_id is not None
    counts = panel.counts[panel.item.topic_id]
    assert counts.judged == JUDGED // 2
    assert counts.total == DOCS
