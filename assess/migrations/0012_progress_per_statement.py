"""The progress counters' INSERT and DELETE triggers on PostgreSQL, per statement instead of per
row (the UPDATE triggers stay per row: the judging loop updates one item at a time).

A row-level trigger upserts the (assignment, topic) counter once per inserted item. Every upsert
of one row leaves a row version that PostgreSQL cannot prune until the transaction ends, and
the next upsert walks them all: inserting n items of one topic took time quadratic in n (8,000
items 1.6 s; an assignment of a 20,000-document topic, or a queue of 20,000 entries, 15 s each).
A statement-level trigger reads the statement's rows (a transition table) and writes each
counter once per statement. SQLite updates a row in place and keeps its row triggers (0006,
0008), which are also the definitions for SQLite here.
"""

import importlib

from django.db import migrations

_items = importlib.import_module("assess.migrations.0006_topic_progress")
_queue = importlib.import_module("assess.migrations.0008_queue_progress")

# --- Assignment items: assess_topicprogress ------------------------------------------------------

ITEMS_POSTGRESQL = [
    _items.POSTGRESQL[0],  # assess_item_progress(), the row-level function the UPDATE trigger runs
    """
CREATE FUNCTION assess_items_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO assess_topicprogress (assignment_id, topic_id, total, judged)
    SELECT assignment_id, topic_id, COUNT(*), COUNT(judgment_id)
    FROM added WHERE NOT withdrawn GROUP BY assignment_id, topic_id
    ON CONFLICT (assignment_id, topic_id) DO UPDATE
    SET total = assess_topicprogress.total + EXCLUDED.total,
        judged = assess_topicprogress.judged + EXCLUDED.judged;
    RETURN NULL;
END $$
""",
    """
CREATE FUNCTION assess_items_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE assess_topicprogress p
    SET total = p.total - r.total, judged = p.judged - r.judged
    FROM (
        SELECT assignment_id, topic_id, COUNT(*) AS total, COUNT(judgment_id) AS judged
        FROM removed WHERE NOT withdrawn GROUP BY assignment_id, topic_id
    ) r
    WHERE p.assignment_id = r.assignment_id AND p.topic_id = r.topic_id;
    RETURN NULL;
END $$
""",
    """
CREATE TRIGGER assess_item_progress_insert AFTER INSERT ON assess_assignmentitem
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION assess_items_added()
""",
    """
CREATE TRIGGER assess_item_progress_delete AFTER DELETE ON assess_assignmentitem
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION assess_items_removed()
""",
    _items.POSTGRESQL[2],  # assess_item_progress_update, per row
]
ITEMS_POSTGRESQL_DROP = [
    "DROP TRIGGER IF EXISTS assess_item_progress_insert ON assess_assignmentitem",
    "DROP TRIGGER IF EXISTS assess_item_progress_delete ON assess_assignmentitem",
    *_items.POSTGRESQL_DROP,
    "DROP FUNCTION IF EXISTS assess_items_added()",
    "DROP FUNCTION IF EXISTS assess_items_removed()",
]

# --- Queue entries: assess_queueprogress ---------------------------------------------------------

# The total is counted in slot 0, an entry that is done in its claimer's slot (0 when none): two
# statements, since both may name slot 0 and one upsert may not touch a row twice.
QUEUE_POSTGRESQL = [
    _queue.POSTGRESQL[0],  # assess_queue_progress(), the row-level function of the UPDATE trigger
    """
CREATE FUNCTION assess_queue_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO assess_queueprogress (pool_id, topic_id, slot, total, done)
    SELECT pool_id, topic_id, 0, COUNT(*), 0 FROM added GROUP BY pool_id, topic_id
    ON CONFLICT (pool_id, topic_id, slot) DO UPDATE
    SET total = assess_queueprogress.total + EXCLUDED.total;
    INSERT INTO assess_queueprogress (pool_id, topic_id, slot, total, done)
    SELECT pool_id, topic_id, COALESCE(claimed_by_id, 0), 0, COUNT(*)
    FROM added WHERE done GROUP BY pool_id, topic_id, COALESCE(claimed_by_id, 0)
    ON CONFLICT (pool_id, topic_id, slot) DO UPDATE
    SET done = assess_queueprogress.done + EXCLUDED.done;
    RETURN NULL;
END $$
""",
    """
CREATE FUNCTION assess_queue_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE assess_queueprogress p SET total = p.total - r.total
    FROM (
        SELECT pool_id, topic_id, COUNT(*) AS total FROM removed GROUP BY pool_id, topic_id
    ) r
    WHERE p.pool_id = r.pool_id AND p.topic_id = r.topic_id AND p.slot = 0;
    UPDATE assess_queueprogress p SET done = p.done - r.done
    FROM (
        SELECT pool_id, topic_id, COALESCE(claimed_by_id, 0) AS slot, COUNT(*) AS done
        FROM removed WHERE done GROUP BY pool_id, topic_id, COALESCE(claimed_by_id, 0)
    ) r
    WHERE p.pool_id = r.pool_id AND p.topic_id = r.topic_id AND p.slot = r.slot;
    RETURN NULL;
END $$
""",
    """
CREATE TRIGGER assess_queue_progress_insert AFTER INSERT ON assess_queueitem
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION assess_queue_added()
""",
    """
CREATE TRIGGER assess_queue_progress_delete AFTER DELETE ON assess_queueitem
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION assess_queue_removed()
""",
    _queue.POSTGRESQL[2],  # assess_queue_progress_update, per row
]
QUEUE_POSTGRESQL_DROP = [
    "DROP TRIGGER IF EXISTS assess_queue_progress_insert ON assess_queueitem",
    "DROP TRIGGER IF EXISTS assess_queue_progress_delete ON assess_queueitem",
    *_queue.POSTGRESQL_DROP,
    "DROP FUNCTION IF EXISTS assess_queue_added()",
    "DROP FUNCTION IF EXISTS assess_queue_removed()",
]

# What assess.counters.ensure_triggers puts back, per table: this migration's definitions on
# PostgreSQL, 0006's and 0008's on SQLite, and their backfills.
TABLES = {
    "assess_topicprogress": {
        "POSTGRESQL": ITEMS_POSTGRESQL,
        "POSTGRESQL_DROP": ITEMS_POSTGRESQL_DROP,
        "SQLITE": _items.SQLITE,
        "SQLITE_DROP": _items.SQLITE_DROP,
        "BACKFILL": _items.BACKFILL,
    },
    "assess_queueprogress": {
        "POSTGRESQL": QUEUE_POSTGRESQL,
        "POSTGRESQL_DROP": QUEUE_POSTGRESQL_DROP,
        "SQLITE": _queue.SQLITE,
        "SQLITE_DROP": _queue.SQLITE_DROP,
        "BACKFILL": _queue.BACKFILL,
    },
}


def per_statement(apps, schema_editor):
    """Swap the row-level triggers for these (the counters are right and stay so: the swap is
    inside the migration's transaction)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in (
        _items.POSTGRESQL_DROP + ITEMS_POSTGRESQL + _queue.POSTGRESQL_DROP + QUEUE_POSTGRESQL
    ):
        schema_editor.execute(statement)


def per_row(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in (
        ITEMS_POSTGRESQL_DROP + _items.POSTGRESQL + QUEUE_POSTGRESQL_DROP + _queue.POSTGRESQL
    ):
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("assess", "0011_gold_items"),
    ]

    operations = [
        migrations.RunPython(per_statement, per_row),
    ]
