"""Bulk writes leave planner statistics behind: a fresh database's first export or evaluation is
planned on real row counts, not on the guesses that made it ten times slower (issue 17)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from campaigns.imports import import_topics
from campaigns.models import Judgment, Topic
from pooling.imports import import_runs
from pooling.models import PoolEntry, RunTopic
from qrels.imports import import_qrels
from tests.factories import make_pool, make_topics
from tests.imports import write

pytestmark = pytest.mark.django_db


def analysed(model) -> bool:
    """Whether the planner has statistics for the model's table."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
            if cursor.fetchone() is None:
                return False
            cursor.execute("SELECT COUNT(*) FROM sqlite_stat1 WHERE tbl = %s", [table])
        else:
            # reltuples is -1 until a table is first analysed (PostgreSQL 14 and later).
            cursor.execute(
                "SELECT COUNT(*) FROM pg_class WHERE relname = %s AND reltuples >= 0", [table]
            )
        return cursor.fetchone()[0] > 0


def forget_statistics() -> None:
    """The tables as never analysed (inside the test's transaction, rolled back after it)."""
    tables = [model._meta.db_table for model in (Topic, RunTopic, Judgment, PoolEntry)]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
            if cursor.fetchone() is not None:
                cursor.execute("DELETE FROM sqlite_stat1")
            return
        try:
            with transaction.atomic():
                cursor.execute(
                    "UPDATE pg_class SET reltuples = -1 WHERE relname = ANY(%s)", [tables]
                )
        except DatabaseError:
            pytest.skip("resetting a table's statistics needs a superuser")


def test_imports_and_pool_builds_analyse_the_tables_they_filled(
    campaign, tmp_path, django_capture_on_commit_callbacks
):
    forget_statistics()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        import_topics(
            campaign=campaign, source=write(tmp_path, "t.tsv", "1\tone\n2\ttwo\n"), name="t.tsv"
        )
    assert callbacks
    assert analysed(Topic)
    assert not analysed(Judgment)
    with django_capture_on_commit_callbacks(execute=True):
        import_runs(
            campaign=campaign,
            sources=[("r.txt", write(tmp_path, "r.txt", "1 Q0 d1 1 2.0 r\n2 Q0 d2 1 1.0 r\n"))],
        )
    assert analysed(RunTopic)
    with django_capture_on_commit_callbacks(execute=True):
        import_qrels(
            campaign=campaign,
            source=write(tmp_path, "q.txt", "1 0 d1 1\n2 0 d2 0\n"),
            name="q.txt",
            assessor="NIST",
        )
    assert analysed(Judgment)
    with django_capture_on_commit_callbacks(execute=True):
        make_pool(campaign, depth=1)
    assert analysed(PoolEntry)


def test_a_refused_import_analyses_nothing(campaign, tmp_path, django_capture_on_commit_callbacks):
    forget_statistics()
    make_topics(campaign, ["1"])
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(Exception, match="9"):
        import_qrels(
            campaign=campaign,
            source=write(tmp_path, "q.txt", "9 0 d1 1\n"),
            name="q.txt",
            assessor="NIST",
        )
    assert not analysed(Judgment)
