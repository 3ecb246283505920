"""The benchmarks' "with and without fresh planner statistics" (issue 17), for PostgreSQL.

A database filled a moment ago has no statistics until ANALYZE runs: the application now runs
it after every bulk write, but autovacuum may be off or late, and the export and evaluate
queries must stay fast without them. ``forget`` puts a benchmark database back in that state
(the statistics deleted, the row-count estimates reset as on a never-analysed table, autovacuum
off for its tables so it does not bring them back mid-measurement); ``analyse`` refreshes them.
Both need a superuser (the benchmarks' throwaway database on a local server). On SQLite,
``set_mode`` empties ``sqlite_stat1`` or runs ANALYZE as the application does.
"""

from __future__ import annotations

MODES = ("none", "fresh")

_TABLES = "relnamespace = 'public'::regnamespace AND relkind IN ('r', 'i', 'm')"


def forget(cursor) -> None:
    cursor.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
    )
    for (table,) in cursor.fetchall():
        cursor.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = off)')
    cursor.execute(
        f"DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class WHERE {_TABLES})"  # noqa: S608 (a constant)
    )
    cursor.execute(f"UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE {_TABLES}")  # noqa: S608


def analyse(cursor) -> None:
    cursor.execute("ANALYZE")


def forget_sqlite(cursor) -> None:
    cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
    if cursor.fetchone():
        cursor.execute("DELETE FROM sqlite_stat1")


def analyse_sqlite(cursor) -> None:
    from pooljudge.common import SQLITE_ANALYSIS_LIMIT

    cursor.execute(f"PRAGMA analysis_limit = {SQLITE_ANALYSIS_LIMIT}")  # as the application
    cursor.execute("ANALYZE")


def set_mode(mode: str) -> None:
    """Put the Django default database in ``mode`` ("none" or "fresh") and commit. SQLite too:
    its statistics table emptied, or ANALYZE as the application runs it."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            (forget_sqlite if mode == "none" else analyse_sqlite)(cursor)
        else:
            (forget if mode == "none" else analyse)(cursor)
    connection.close()  # a new connection plans with what is now in the catalogue
