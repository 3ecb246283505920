"""Small helpers every app shares, defined once: the spreadsheet-formula safety rule, the SVG
envelope of the plots, the progress-callback type, natural sort, the median, trec_eval's
ranking order, planner statistics and settings, and the garbage collector's setting for bulk
work. This module is the bottom of the import graph: it imports no app (the standard
library; Django's HTML escaping only inside the one function that builds markup), so any app
may import it, and the run-file parser's worker processes load no Django through it.
"""

from __future__ import annotations

import gc
import re
import statistics
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.utils.safestring import SafeString

# --- Progress ------------------------------------------------------------------------------------

# progress(done, total or None when unknown, message): how a long piece of work tells its job row
# (or a command's stderr) how far it got. It may raise to cancel the work.
ProgressFn = Callable[[int, int | None, str], None]


def no_progress(done: int, total: int | None, message: str) -> None:
    """The progress callback of work that nobody watches."""
    return None


# --- Bulk work ------------------------------------------------------------------------------------

# Young objects (allocated and not yet freed) between two collections of the youngest generation
# during bulk work; CPython's default is 700.
BULK_GC_THRESHOLD = 50_000
_bulk_lock = threading.Lock()
_bulk_depth = 0
_bulk_thresholds: tuple[int, int, int] = (0, 0, 0)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Garbage collection for a loop that makes millions of short-lived objects (an export's
    pass over a million judgments): the objects that exist on entry (the process's modules,
    classes, settings: a web or worker process holds ~90,000) are frozen out of every
    collection until the last such loop ends, and the youngest generation is collected after
    BULK_GC_THRESHOLD young objects instead of 700.

    Measured (issue 17, 1M judgments): the exporting process spent 3.7 s of its 12.8 s of CPU
    in the collector, 2.4 s of them in 23 full collections that each walked the whole process,
    the rest in 2,800 young collections that each walked a block's lists of 90,000 values;
    inside, 0.0-0.3 s. Nothing is collected later than it would have been at exit, and a cycle
    made inside waits at most BULK_GC_THRESHOLD allocations. Nested and concurrent uses share
    the one setting: the last to leave restores the thresholds and unfreezes."""
    global _bulk_depth, _bulk_thresholds
    with _bulk_lock:
        if not _bulk_depth:
            _bulk_thresholds = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(BULK_GC_THRESHOLD, *_bulk_thresholds[1:])
        _bulk_depth += 1
    try:
        yield
    finally:
        with _bulk_lock:
            _bulk_depth -= 1
            if not _bulk_depth:
                gc.set_threshold(*_bulk_thresholds)
                gc.unfreeze()


# --- Spreadsheet-formula safety ----------------------------------------------------------------

# A spreadsheet reads a cell starting with one of these as a formula (or, for tab and carriage
# return, may shift it into one). A leading quote is added to such text cells, and to cells that
# already start with a quote, so that removing one leading quote always restores the value.
RISKY_FIRST = frozenset("=+-@'\t\r")


def neutralise(value: str) -> str:
    """``value`` as a text cell no spreadsheet runs: one ``'`` in front when it starts with
    ``= + - @ '``, a tab or a carriage return. Remove one leading ``'`` to get the value back."""
    return "'" + value if value[:1] in RISKY_FIRST else value


# --- Plots ---------------------------------------------------------------------------------------


def svg_document(
    title: str, description: str, body: Sequence[str], *, ident: str, width: float, height: float
) -> SafeString:
    """An accessible ``<svg>``: its title and description (escaped here) read by screen readers,
    around ``body``, which the caller has built with every text already escaped."""
    from django.utils.html import escape
    from django.utils.safestring import mark_safe

    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:g} {height:g}" '
        f'role="img" aria-label="{escape(title)}" aria-describedby="{ident}-desc" '
        f'class="plot-svg">'
        f'<title id="{ident}-title">{escape(title)}</title>'
        f'<desc id="{ident}-desc">{escape(description)}</desc>'
    )
    return mark_safe(head + "".join(body) + "</svg>")


# --- Orders and statistics -----------------------------------------------------------------------


def natural_key(text: str) -> tuple:
    """Sort key: "2" before "10", and text after numbers; ids stay strings (only the order is
    natural)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text))


def median(values: Iterable[float | None]) -> float | None:
    """The median of the known values, None when there are none."""
    known = [v for v in values if v is not None]
    return float(statistics.median(known)) if known else None


def trec_eval_keys(scores: Iterable[float]) -> list[float]:
    """The scores as trec_eval compares them: rounded to 32-bit floats (trec_eval, and
    pytrec_eval with it, keep a run's scores in C floats; a score beyond a float's range becomes
    infinite there too)."""
    return array("f", scores).tolist()


def trec_eval_order(ranking: Mapping[str, float], depth: int | None = None) -> list[str]:
    """Document ids in trec_eval's order: score descending compared as trec_eval compares it
    (:func:`trec_eval_keys`), ties by document id descending: the order pytrec_eval evaluates
    and pools are cut in. (:func:`pooling.formats.trec_eval_order` is the same order on a
    parsed file's aligned lists.)

    With ``depth``, only the first ``depth`` of them, found without sorting the whole ranking.
    """
    if depth is not None and depth <= 0:
        return []
    docs = list(ranking)
    keys = trec_eval_keys(ranking.values())
    if depth is None or len(docs) <= depth:
        candidates: Iterable[int] = range(len(docs))
    else:
        ordered = sorted(keys)
        floor = ordered[-depth]
        if ordered[-depth - 1] < floor and min(keys[:depth]) >= floor:
            # Runs usually arrive best first (the mapping keeps stored order): when exactly
            # `depth` keys reach the floor and the first `depth` entries all do, those are
            # the top `depth`, in whatever order.
            candidates = range(depth)
        else:
            # Every document at or above the floor: ties across the boundary are all kept, and
            # the sort below (on a handful) breaks them by document id.
            candidates = [i for i, key in enumerate(keys) if key >= floor]
    top = sorted(candidates, key=lambda i: (keys[i], docs[i]), reverse=True)
    return [docs[i] for i in top[:depth]]


# --- Planner statistics --------------------------------------------------------------------------

# SQLite's ANALYZE reads every index in full unless told to sample; a few hundred rows per index
# give the planner the same choices (SQLite's own advice for PRAGMA optimize).
SQLITE_ANALYSIS_LIMIT = 1000


def refresh_planner_statistics(*models: type) -> None:
    """After a bulk write: ANALYZE the models' tables once the transaction commits (at once
    outside one), so the next query is planned on the new row counts.

    A fresh table has no statistics: SQLite then guesses a million rows per table and PostgreSQL
    plans on whatever autovacuum last saw (nothing, if it is off or has not come round yet), and
    both pick nested loops that took an export from 6 s to 64 s (issue 17). After the commit, so
    that concurrent imports do not queue on ANALYZE's table lock; a failure is logged, never the
    import's."""
    from django.db import connection, transaction

    tables = sorted({model._meta.db_table for model in models})

    def analyze() -> None:
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute(f"PRAGMA analysis_limit = {SQLITE_ANALYSIS_LIMIT}")
            for table in tables:
                cursor.execute(f"ANALYZE {quote(table)}")

    transaction.on_commit(analyze, robust=True)


def analyse_stale_tables(*models: type) -> list[str]:
    """Before a bulk read (an export): ANALYZE those of the models' tables that autovacuum
    would have analysed by now, had it been on and on time: never analysed, or changed since
    the last ANALYZE by more than ``autovacuum_analyze_threshold`` + ``…_scale_factor`` x
    their rows. Returns the tables analysed.

    Judgments arrive one at a time, so no bulk write refreshes their statistics
    (:func:`refresh_planner_statistics`); without them PostgreSQL plans a million-row export
    as if the tables were empty (one process, the sort spilled to disk): 7.6 s to its first
    row instead of 3.4 s, where analysing the four tables took 0.7 s (issue 17). Inside a
    transaction the statistics are the transaction's own until it commits, and ANALYZE's
    lock (which only another ANALYZE, VACUUM or an index build waits for, never a read or a
    write) is held until then. PostgreSQL only: SQLite's plans for these reads were as fast
    without statistics as with them (the README's export figures)."""
    from django.db import connection

    if connection.vendor != "postgresql" or not models:
        return []
    tables = sorted({model._meta.db_table for model in models})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c "
            "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
            "WHERE c.relname = ANY(%s) AND c.relnamespace = to_regnamespace(current_schema()) "
            "AND (c.reltuples < 0 OR COALESCE(s.n_mod_since_analyze, 0) > "
            "current_setting('autovacuum_analyze_threshold')::float8 "
            "+ current_setting('autovacuum_analyze_scale_factor')::float8 * c.reltuples) "
            "ORDER BY c.relname",
            [tables],
        )
        stale = [name for (name,) in cursor.fetchall()]
        quote = connection.ops.quote_name
        for table in stale:
            cursor.execute(f"ANALYZE {quote(table)}")
    return stale


@contextmanager
def planner_settings(**settings: str) -> Iterator[None]:
    """PostgreSQL settings for the statements run inside, restored afterwards (within a
    transaction; elsewhere nothing changes). The one place app code steers PostgreSQL's planner.

    The sidecar query uses ``work_mem = 128MB`` to sort in memory rather than on disk, and
    ``enable_nestloop = off`` so that the pool entries are joined by hash before the sort:
    the parallel workers then format the rows, where a nested loop after the sort would leave
    all of it to one process (measured: the COPY takes about half as long)."""
    from django.db import DatabaseError, connection

    if connection.vendor != "postgresql" or not connection.in_atomic_block:
        yield
        return
    with connection.cursor() as cursor:
        before = {}
        for name, value in settings.items():
            cursor.execute("SELECT current_setting(%s)", [name])
            before[name] = cursor.fetchone()[0]
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                for name, value in before.items():
                    cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
        except DatabaseError:
            pass  # the transaction failed: rolling it back restores the settings anyway
