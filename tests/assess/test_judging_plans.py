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
from campaigns.members import add_member
from tests.conftest import _user
from tests.factories import judge, make_pool, small_campaign

pytestmark = pytest.mark.django_db
DOCS = 300  # per topic, two topics: 600 items an assignment, a queue of 600 entries
JUDGED = 200
BALLAST = 20_000
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
    # A bitmap index scan counts index entries, dead row versions included (a counter row
    # updated 200 times in this test's one transaction has as many); the heap scan above it
    # counts the rows it read.
    counted = node["Node Type"] != "Bitmap Index Scan"
    touched = (
        counted
        * loops
        * (
            node.get("Actual Rows", 0)
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Join Filter", 0)
            + node.get("Rows Removed by Index Recheck", 0)
        )
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
    off = ("enable_seqscan", "enable_hashjoin", "enable_mergejoin", "enable_material")
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


def _ballast(campaign, topic) -> None:
    """Another assessor's BALLAST items and judgments and another pool's queue of BALLAST
    entries: the tables as large as a real campaign's, so the planner's cheapest plan is an
    index probe whatever dead space earlier tests left (a small table's size, and so its plan,
    varied with it), and a plan that reads a whole index shows."""
    user = _user("ballast")
    add_member(campaign=campaign, user=user, role="assessor")
    spare_pool = make_pool(campaign, depth=1)
    (other,) = assign(campaign=campaign, pool=spare_pool, user=user, topics=[topic], seed=3)
    rows = {"n": BALLAST, "assignment": other.pk, "assessor": other.assessor_id}
    rows |= {"campaign": campaign.pk, "topic": topic.pk, "pool": spare_pool.pk}
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assess_assignmentitem (doc_id, position, token, withdrawn,"
            " assignment_id, topic_id) SELECT 'ballast-' || g, 100000 + g, 'ballast-' || g,"
            " false, %(assignment)s, %(topic)s FROM generate_series(1, %(n)s) g",
            rows,
        )
        cursor.execute(
            "INSERT INTO campaigns_judgment (doc_id, label, source, judged_at, first_judged_at,"
            " note, unreadable, unsure, version, assessor_id, campaign_id, topic_id, iteration)"
            " SELECT 'ballast-' || g, 0, 'judged', now(), now(), '', false, false, 1,"
            " %(assessor)s, %(campaign)s, %(topic)s, '' FROM generate_series(1, %(n)s) g",
            rows,
        )
        cursor.execute(
            'INSERT INTO assess_queueitem (doc_id, replica, "order", done, pool_id, topic_id)'
            " SELECT 'ballast-' || g, 0, g, false, %(pool)s, %(topic)s"
            " FROM generate_series(1, %(n)s) g",
            rows,
        )


@pytest.fixture
def grown(postgres, campaign, assessor_a, assessor_b):
    """An assignment of 600 items and a shared queue of 600 entries, each a third judged, beside
    the ballast, with fresh statistics. (Statistics taken while a table was empty but not new,
    after rows were deleted, say, make the planner believe it still holds none, and any plan can
    then read it whole until autovacuum analyses it again, 50 rows and at most a minute later;
    bulk writes analyse the tables they fill, pooljudge.common.)"""

    def build():
        pool = small_campaign(campaign, docs=DOCS)
        topics = list(campaign.topics.all())
        (primary,) = assign(campaign=campaign, pool=pool, user=assessor_a, topics=topics, seed=1)
        queue_pool = make_pool(campaign, depth=DOCS)
        (queue,) = assign(
            campaign=campaign, pool=queue_pool, user=assessor_b, topics=topics, mode="queue"
        )
        _ballast(campaign, topics[0])
        for _ in range(JUDGED):
            judge(next_item(primary), 1)
            judge(claim_next(queue), 0)
        _analyze()
        return primary, queue

    return build


def test_a_primary_assignments_reads_are_flat(grown):
    primary, _ = grown()
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
    _, queue = grown()
    last = queue.items.order_by("position").last()
    # Nothing open: the answer claims the next entry of the shared queue in its read.
    panel = _assert_flat(panel_reads, queue, after=last.position, claim=True)
    assert panel.item is not None
    assert panel.item.queue_item_id is not None
    counts = panel.counts[panel.item.topic_id]
    assert counts.judged == JUDGED // 2
    assert counts.total == DOCS
