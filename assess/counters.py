"""The progress counters' triggers (assess.models.TopicProgress, QueueProgress), checked after
every ``migrate``. SQLite alters a column by rebuilding the table, and a rebuilt table has lost
its triggers; a later migration that adds a column with a default to the items or the queue
would silently stop the counters. After migrating, any missing trigger is put back and the
counters it keeps are recounted from the rows, so they are right whatever ran in between."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.db import connections

# The migration holding each counter table's current triggers: its SQL for both databases and
# its backfill, by table.
_SOURCE = "assess.migrations.0012_progress_per_statement"


def _trigger_names(statements: list[str]) -> list[str]:
    return [s.split("CREATE TRIGGER", 1)[1].split()[0] for s in statements if "CREATE TRIGGER" in s]


def _present(connection, names: list[str]) -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        return {row[0] for row in cursor.fetchall()} & set(names)


def ensure_triggers(*, using: str = "default") -> list[str]:
    """Put back missing counter triggers and recount what they keep; the tables repaired."""
    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql"):
        return []
    tables = set(connection.introspection.table_names())
    repaired = []
    for table, sql in import_module(_SOURCE).TABLES.items():
        if table not in tables:  # migrated backwards, or not yet this far
            continue
        create = sql["SQLITE"] if connection.vendor == "sqlite" else sql["POSTGRESQL"]
        drop = sql["SQLITE_DROP"] if connection.vendor == "sqlite" else sql["POSTGRESQL_DROP"]
        names = _trigger_names(create)
        if _present(connection, names) == set(names):
            continue
        with connection.cursor() as cursor:
            for statement in drop + create:
                cursor.execute(statement)
            cursor.execute(f"DELETE FROM {table}")  # noqa: S608 - a fixed table name
            cursor.execute(sql["BACKFILL"])
        repaired.append(table)
    return repaired


def after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    ensure_triggers(using=using)
