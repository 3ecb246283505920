"""Reading the judgments behind qrels and sidecars: one query per purpose, rows in qrels order,
the same SQL and the same values on every database.

A :class:`Scope` says which judgments count (``scope()`` checks it against the campaign). The
queries here return typed rows (:class:`JudgmentRow` for resolving labels, :class:`SidecarRow`
for the export's sidecar too), sorted by topic id, document id and assessor, in code-point
order whatever the database's locale.

Every value of a row is text in PostgreSQL's COPY text format, NULL written as the empty
string: text backslash-escaped (:func:`unescape` undoes it), integers in decimal, floats as
PostgreSQL writes them (the shortest text that reads back the same; ``NaN``, ``Infinity``),
booleans ``t``/``f``, timestamps in UTC as ``2025-03-01 09:00:00.25+00`` (the fraction without
trailing zeros). On PostgreSQL the rows stream through ``COPY (SELECT …) TO STDOUT`` and reach
Python as that text already; elsewhere a cursor is read and each value converted to the same
text (``as_*``). So one formatter (:mod:`qrels.sidecar`) and one resolver
(:mod:`qrels.policies`) serve every database, and the bytes of an export do not depend on it.
"""

# The SQL here is assembled from table names (quoted by Django) and fixed fragments; every value
# travels as a query parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from django.db import connection

from assess.models import Assignment
from campaigns.models import Assessor, Campaign, Judgment, Topic
from pooling.models import Pool, PoolEntry
from qrels.copytext import as_flag, as_float, as_int, as_text, as_timestamp

FETCH_ROWS = 4096  # rows per cursor fetch (the portable path)
COPY_ROWS = 4096  # COPY messages joined and split at once (the PostgreSQL path)


def postgresql_fast_path() -> bool:
    """Whether the database is PostgreSQL: the one place ``qrels`` asks (issue 17).

    There, rows stream through ``COPY … TO STDOUT`` (psycopg's ``cursor.copy``) instead of a
    cursor, text sorts with the "C" collation (code-point order: SQLite's default BINARY
    collation compares UTF-8 bytes, which is that order already), and an export can read one
    REPEATABLE READ snapshot (SQLite transactions are serialised anyway). The SQL, the values
    of the rows and everything made from them are the same on every database."""
    return connection.vendor == "postgresql"


# --- Which judgments count -----------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """The judgments and pooled pairs an export or report reads. Build it with :func:`scope`."""

    campaign: Campaign
    include_imported: bool = True
    assessors: frozenset[str] | None = None
    pool: Pool | None = None  # restricts the pairs to this pool
    pools: tuple[Pool, ...] = ()  # the pooled pairs come from these (the pool, or all built)
    assessor_ids: tuple[int, ...] | None = field(default=None, compare=False)
    include_models: bool = False
    include_filled: bool = False

    @property
    def verdict_kinds(self) -> tuple[str, ...]:
        """The kinds of assessor whose labels are verdicts the policies weigh: people always,
        imported sources unless left out, models and a hybrid budget's filled labels
        (assess/hybrid.py) only when asked."""
        kinds = [Assessor.Kind.PERSON.value]
        if self.include_imported:
            kinds.append(Assessor.Kind.IMPORTED.value)
        if self.include_models:
            kinds.append(Assessor.Kind.MODEL.value)
        if self.include_filled:
            kinds.append(Assessor.Kind.FILLED.value)
        return tuple(kinds)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of assessor whose labels are read: the verdicts, and the adjudicated labels,
        which the sidecar lists marked as such and only the ``adjudicated`` policy counts (never
        as one verdict among others)."""
        return (*self.verdict_kinds, Assessor.Kind.ADJUDICATED.value)


def scope(
    *,
    campaign: Campaign,
    include_imported: bool = True,
    assessors: Collection[str] | None = None,
    pool: Pool | None = None,
    include_models: bool = False,
    include_filled: bool = False,
) -> Scope:
    """Check the options against the campaign. Raises ValueError naming an unknown assessor, an
    assessor of a kind the options leave out (a model without ``include_models``), a pool of
    another campaign or a pool that is not built."""
    ids = None
    names = None
    if assessors is not None:
        names = frozenset(assessors)
        known = {
            name: (pk, kind)
            for name, pk, kind in Assessor.objects.filter(
                campaign=campaign, name__in=names
            ).values_list("name", "pk", "kind")
        }
        unknown = sorted(names - known.keys())
        if unknown:
            raise ValueError(f"No assessor named {', '.join(map(repr, unknown))} in this campaign.")
        counted = Scope(
            campaign,
            include_imported,
            include_models=include_models,
            include_filled=include_filled,
        ).kinds
        left_out = sorted(name for name, (_, kind) in known.items() if kind not in counted)
        if left_out:
            raise ValueError(
                ", ".join(f"{name!r} ({known[name][1]})" for name in left_out)
                + " left out by these options: model labels count only when models are "
                "included, filled ones only when filled labels are, imported ones unless they "
                "are left out."
            )
        ids = tuple(sorted(pk for pk, _ in known.values()))
    if pool is not None:
        if pool.campaign_id != campaign.pk:
            raise ValueError(f"Pool {pool} belongs to another campaign.")
        if pool.status != Pool.Status.BUILT:
            raise ValueError(f"Pool v{pool.version} is {pool.get_status_display().lower()}.")
        pools: tuple[Pool, ...] = (pool,)
    else:
        pools = tuple(campaign.pools.built().order_by("version"))
    return Scope(
        campaign, include_imported, names, pool, pools, ids, include_models, include_filled
    )


# --- Rows ----------------------------------------------------------------------------------------


class JudgmentRow(NamedTuple):
    """What resolving a pair's label needs, one current verdict (COPY text, see above)."""

    topic: str
    docid: str
    label: str  # empty: a pooled pair nobody in the scope judged (no judgment behind the row)
    assessor_id: str
    pseudonym: str
    first_judged_at: str
    pool: str  # the latest pool version holding the pair; empty when none does
    assessor: str  # the name the export shows: pseudonym, imported source's name, or login


class SidecarRow(NamedTuple):
    """A :class:`JudgmentRow` (the same first eight fields) with the rest of the judgment, as
    the sidecar writes it (:mod:`qrels.sidecar`)."""

    topic: str
    docid: str
    label: str
    assessor_id: str
    pseudonym: str
    first_judged_at: str
    pool: str
    assessor: str
    source: str  # the assessor's kind: person, model, imported or adjudicated
    iteration: str
    rubric_version: str
    revisions: str
    position: str
    served_at: str
    judged_at: str
    seconds_on_screen: str
    active_seconds: str
    stratum: str
    inclusion_probability: str
    unreadable: str
    unsure: str
    note: str


_JUDGMENT_CONVERTERS = (as_text, as_text, as_int, as_int, as_text, as_timestamp, as_int, as_text)
_SIDECAR_CONVERTERS = (
    *_JUDGMENT_CONVERTERS,
    as_text,  # source
    as_text,  # iteration
    as_int,  # rubric_version
    as_int,  # revisions
    as_int,  # position
    as_timestamp,  # served_at
    as_timestamp,  # judged_at
    as_float,  # seconds_on_screen
    as_float,  # active_seconds
    as_int,  # stratum
    as_float,  # inclusion_probability
    as_flag,  # unreadable
    as_flag,  # unsure
    as_text,  # note
)


# --- Queries -------------------------------------------------------------------------------------


def _t(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _collate(expression: str) -> str:
    return f'{expression} COLLATE "C"' if postgresql_fast_path() else expression


def _placeholders(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values))


def _judgment_filter(s: Scope, j: str, a: str) -> tuple[str, list]:
    """WHERE conditions (joined with AND) selecting the scope's judgments, aliases j and a."""
    sql = [f"{j}.campaign_id = %s"]
    params: list = [s.campaign.pk]
    kinds = s.kinds
    sql.append(f"{a}.kind IN ({_placeholders(kinds)})")
    params.extend(kinds)
    if s.assessor_ids is not None:
        if not s.assessor_ids:
            sql.append("1 = 0")
        else:
            sql.append(f"{j}.assessor_id IN ({_placeholders(s.assessor_ids)})")
            params.extend(s.assessor_ids)
    return " AND ".join(sql), params


def _pool_join(s: Scope, j: str) -> tuple[str, list, dict[str, str]]:
    """(JOIN clause, params, column expressions) attaching to each judgment its entry in the
    scope's pools: the latest pool version holding the pair. An inner join restricts the rows
    to the pool when the scope has one. The expressions are ``pool`` (the version),
    ``stratum`` and ``inclusion_probability``."""
    if not s.pools:
        return "", [], {"pool": "NULL", "stratum": "NULL", "inclusion_probability": "NULL"}
    entry = _t(PoolEntry)
    kind = "JOIN" if s.pool is not None else "LEFT JOIN"
    columns = {"stratum": "pe.stratum", "inclusion_probability": "pe.inclusion_probability"}
    if len(s.pools) == 1:
        (pool,) = s.pools
        clause = (
            f" {kind} {entry} pe ON pe.pool_id = %s AND pe.topic_id = {j}.topic_id "
            f"AND pe.doc_id = {j}.doc_id"
        )
        columns["pool"] = f"CASE WHEN pe.id IS NULL THEN NULL ELSE {int(pool.version)} END"
        return clause, [pool.pk], columns
    ids = [pool.pk for pool in s.pools]
    clause = (
        f" {kind} (SELECT e.topic_id, e.doc_id, e.stratum, e.inclusion_probability, "
        "p.version, ROW_NUMBER() OVER (PARTITION BY e.topic_id, e.doc_id "
        "ORDER BY p.version DESC) AS rn "
        f"FROM {entry} e JOIN {_t(Pool)} p ON p.id = e.pool_id "
        f"WHERE e.pool_id IN ({_placeholders(ids)})) pe "
        f"ON pe.rn = 1 AND pe.topic_id = {j}.topic_id AND pe.doc_id = {j}.doc_id"
    )
    columns["pool"] = "pe.version"
    return clause, ids, columns


def _sidecar_columns(c: dict[str, str]) -> list[str]:
    """The expressions of SidecarRow's fields after the first eight. ``source`` is the kind of
    the assessor (person, model, imported, adjudicated): who a label came from decides how to
    use it, and the kind never changes (Judgment.source only says how the row was written)."""
    return [
        "a.kind",
        "j.iteration",
        c["rubric_version"],
        "j.version",
        "j.position",
        "j.served_at",
        "j.judged_at",
        "j.seconds_on_screen",
        "j.active_seconds",
        c["stratum"],
        c["inclusion_probability"],
        "j.unreadable",
        "j.unsure",
        "j.note",
    ]


def judgment_rows_sql(
    s: Scope,
    *,
    usernames: bool = False,
    pooled_unjudged: bool = False,
    sidecar: bool = False,
) -> tuple[str, list]:
    """The query behind :func:`judgment_rows` (or, with ``sidecar``, :func:`sidecar_rows`): the
    scope's judgments sorted by topic id, document id and assessor; with ``pooled_unjudged``,
    also one row per pooled pair nobody in the scope judged, with NULL in every other column.

    People are named by pseudonym, other assessors (imported sources, models) by their name
    (they are files and programs, not people); with ``usernames``, everyone by name."""
    judgment, topic, assessor = _t(Judgment), _t(Topic), _t(Assessor)
    where, where_params = _judgment_filter(s, "j", "a")
    join, join_params, columns = _pool_join(s, "j")
    if usernames:
        display = "a.name"
    else:
        person = Assessor.Kind.PERSON.value  # a constant of the code, not user input
        display = f"(CASE WHEN a.kind = '{person}' THEN a.pseudonym ELSE a.name END)"
    # A campaign has a handful of rubric versions: their numbers as constants, not a join.
    numbers = list(s.campaign.rubric_versions.values_list("pk", "number"))
    columns["rubric_version"] = (
        "CASE j.rubric_version_id "
        + " ".join(f"WHEN {int(pk)} THEN {int(number)}" for pk, number in numbers)
        + " END"
        if numbers
        else "NULL"
    )
    extras = _sidecar_columns(columns) if sidecar else []
    select = ", ".join(
        [
            f"{_collate('t.topic_id')} AS topic",
            f"{_collate('j.doc_id')} AS docid",
            "j.label AS label",
            "j.assessor_id AS assessor_id",
            "a.pseudonym AS pseudonym",
            "j.first_judged_at AS first_judged_at",
            f"{columns['pool']} AS pool",
            f"{_collate(display)} AS assessor",
            *(f"{expression} AS extra{i}" for i, expression in enumerate(extras)),
        ]
    )
    select = (
        f"SELECT {select} FROM {judgment} j JOIN {topic} t ON t.id = j.topic_id "
        f"JOIN {assessor} a ON a.id = j.assessor_id "
        f"{join} WHERE {where}"
    )
    params = join_params + where_params
    if pooled_unjudged and s.pools:
        entry = _t(PoolEntry)
        ids = [pool.pk for pool in s.pools]
        inner_where, inner_params = _judgment_filter(s, "j2", "a2")
        if len(s.pools) == 1:
            version, version_params = str(int(s.pools[0].version)), []
        else:
            version = (
                f"(SELECT MAX(p.version) FROM {entry} e2 JOIN {_t(Pool)} p ON p.id = e2.pool_id "
                "WHERE e2.topic_id = pe.topic_id AND e2.doc_id = pe.doc_id "
                f"AND e2.pool_id IN ({_placeholders(ids)}))"
            )
            version_params = ids
        after = ", ".join(["NULL"] * (1 + len(extras)))  # assessor and the sidecar columns
        select += (
            f" UNION ALL SELECT {_collate('t.topic_id')}, {_collate('pe.doc_id')}, "
            f"NULL, NULL, NULL, NULL, {version}, {after} "
            f"FROM (SELECT DISTINCT topic_id, doc_id FROM {entry} "
            f"WHERE pool_id IN ({_placeholders(ids)})) pe "
            f"JOIN {topic} t ON t.id = pe.topic_id WHERE NOT EXISTS (SELECT 1 FROM {judgment} j2 "
            f"JOIN {assessor} a2 ON a2.id = j2.assessor_id WHERE j2.topic_id = pe.topic_id "
            f"AND j2.doc_id = pe.doc_id AND {inner_where})"
        )
        params += version_params + ids + inner_params
    sql = f"SELECT * FROM ({select}) judgment_rows ORDER BY topic, docid, assessor"
    return sql, params


def judgment_rows(
    s: Scope, *, usernames: bool = False, pooled_unjudged: bool = False
) -> Iterator[JudgmentRow]:
    """The scope's current verdicts as :class:`JudgmentRow`, in qrels order (see
    :func:`judgment_rows_sql`). Memory stays bounded."""
    sql, params = judgment_rows_sql(s, usernames=usernames, pooled_unjudged=pooled_unjudged)
    for batch in read_batches(sql, params, JudgmentRow, _JUDGMENT_CONVERTERS):
        yield from batch


def sidecar_row_batches(
    s: Scope,
    *,
    usernames: bool = False,
    pooled_unjudged: bool = False,
    use_copy: bool | None = None,
) -> Iterator[list[SidecarRow]]:
    """The scope's judgments as :class:`SidecarRow`, a few thousand at a time, in qrels order
    (see :func:`judgment_rows_sql`). ``use_copy=False`` reads through a cursor on PostgreSQL
    too (to compare the two ways)."""
    sql, params = judgment_rows_sql(
        s, usernames=usernames, pooled_unjudged=pooled_unjudged, sidecar=True
    )
    return read_batches(sql, params, SidecarRow, _SIDECAR_CONVERTERS, use_copy=use_copy)


def sidecar_row_blocks(
    s: Scope,
    *,
    usernames: bool = False,
    pooled_unjudged: bool = False,
    use_copy: bool | None = None,
) -> Iterator[bytes]:
    """The rows of :func:`sidecar_row_batches` as blocks of COPY text (see :func:`read_blocks`),
    what the export streams: each block is parsed once for the qrels and formatted once for the
    sidecar, possibly in another process (:mod:`qrels.sidecar`)."""
    sql, params = judgment_rows_sql(
        s, usernames=usernames, pooled_unjudged=pooled_unjudged, sidecar=True
    )
    return read_blocks(sql, params, _SIDECAR_CONVERTERS, use_copy=use_copy)


def read_blocks(
    sql: str,
    params: Sequence,
    converters: Sequence[Callable[[object], str]],
    *,
    use_copy: bool | None = None,
) -> Iterator[bytes]:
    """The rows of ``sql`` as UTF-8 blocks of COPY text, a few thousand whole lines each (every
    line ends with a newline; a row's values are separated by tabs).

    On PostgreSQL through ``COPY (sql) TO STDOUT``: the server writes each value as text and
    its messages (one line each) are joined, nothing is parsed. Elsewhere (or with
    ``use_copy=False``) a cursor is read and ``converters`` (one per column) make the same
    text."""
    if use_copy is None:
        use_copy = postgresql_fast_path()
    if use_copy:
        yield from _copy_blocks(sql, params)
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(FETCH_ROWS):
            lines = [
                "\t".join(
                    [convert(value) for convert, value in zip(converters, values, strict=True)]
                )
                for values in batch
            ]
            lines.append("")
            yield "\n".join(lines).encode()


def read_batches(
    sql: str,
    params: Sequence,
    row: Callable[..., tuple] | type[tuple],
    converters: Sequence[Callable[[object], str]],
    *,
    use_copy: bool | None = None,
) -> Iterator[list]:
    """The rows of ``sql`` (:func:`read_blocks`) as ``row`` tuples of COPY text, a few thousand
    at a time."""
    make = partial(tuple.__new__, row)  # what row._make does, one call less per row
    for block in read_blocks(sql, params, converters, use_copy=use_copy):
        yield [make(line.split("\t")) for line in block.decode()[:-1].split("\n")]


def _copy_blocks(sql: str, params: Sequence) -> Iterator[bytes]:
    """PostgreSQL's fast path: one COPY, its messages (one line each, :func:`_copy_messages`)
    joined ``COPY_ROWS`` at a time."""
    connection.ensure_connection()
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY ({sql}) TO STDOUT (NULL '')", params) as copy,
    ):
        parts: list = []
        append = parts.append
        for data in _copy_messages(copy, cursor.cursor.connection.pgconn):
            append(data)
            if len(parts) >= COPY_ROWS:
                yield b"".join(parts)
                parts.clear()
        if parts:
            yield b"".join(parts)


def _copy_messages(copy, pgconn) -> Iterator[memoryview]:
    """The messages of a ``COPY … TO STDOUT`` as psycopg's ``Copy`` iterator gives them, at a
    third of its cost: each message libpq already holds is taken from it directly (psycopg's
    ``Copy.read`` drives a generator and a wait per message, about 1.1 µs, most of reading a
    row). When libpq holds none, ``Copy.read`` waits for the socket (and meets the end, when it
    comes then); when libpq has met the end, the command's result is read here, as ``read``
    would have (its ``finish`` then has nothing left to do)."""
    from psycopg import DatabaseError
    from psycopg.pq import ExecStatus

    take = pgconn.get_copy_data
    while True:
        size, data = take(1)  # 1: never wait; 0 when nothing is buffered, -1 at the end
        if size > 0:
            yield data
        elif size == 0:
            data = copy.read()
            if not data:
                return
            yield data
        else:
            while (result := pgconn.get_result()) is not None:
                if result.status != ExecStatus.COMMAND_OK:
                    message = result.error_message.decode(errors="replace")
                    raise DatabaseError(f"The export's COPY failed: {message}")
            return


# --- Other reads ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conflict:
    topic_id: str
    doc_id: str
    labels: dict[str, int]  # assessor name -> label

    def __str__(self) -> str:
        given = ", ".join(f"{name}={label}" for name, label in self.labels.items())
        return f"topic {self.topic_id} document {self.doc_id}: {given}"


def find_conflicts(s: Scope) -> list[Conflict]:
    """Every pair in the scope whose verdicts disagree, with each assessor's label (by name).
    Adjudicated labels are not verdicts: they neither conflict nor settle one (nor are models'
    labels, unless the scope includes models)."""
    judgment, topic, assessor = _t(Judgment), _t(Topic), _t(Assessor)
    where, params = _judgment_filter(s, "j", "a")
    inner_where, inner_params = _judgment_filter(s, "j2", "a2")
    verdicts = s.verdict_kinds
    kinds = _placeholders(verdicts)
    where += f" AND a.kind IN ({kinds})"
    params = [*params, *verdicts]
    inner_where += f" AND a2.kind IN ({kinds})"
    inner_params = [*inner_params, *verdicts]
    in_pool = ""
    pool_params: list = []
    if s.pool is not None:
        in_pool = (
            f" AND EXISTS (SELECT 1 FROM {_t(PoolEntry)} pe WHERE pe.pool_id = %s "
            "AND pe.topic_id = j.topic_id AND pe.doc_id = j.doc_id)"
        )
        pool_params = [s.pool.pk]
    sql = (
        f"SELECT {_collate('t.topic_id')} AS topic, {_collate('j.doc_id')} AS doc, "
        f"a.name AS name, j.label FROM {judgment} j JOIN {topic} t ON t.id = j.topic_id "
        f"JOIN {assessor} a ON a.id = j.assessor_id WHERE {where} AND j.label >= 0{in_pool} "
        f"AND EXISTS (SELECT 1 FROM {judgment} j2 JOIN {assessor} a2 ON a2.id = j2.assessor_id "
        f"WHERE j2.topic_id = j.topic_id AND j2.doc_id = j.doc_id AND j2.label >= 0 "
        f"AND j2.label <> j.label AND {inner_where}) "
        f"ORDER BY topic, doc, {_collate('a.name')}"
    )
    conflicts: list[Conflict] = []
    with connection.cursor() as cursor:
        cursor.execute(sql, params + pool_params + inner_params)
        for topic_id, doc_id, name, label in cursor.fetchall():
            if conflicts and (conflicts[-1].topic_id, conflicts[-1].doc_id) == (topic_id, doc_id):
                conflicts[-1].labels[name] = label
            else:
                conflicts.append(Conflict(topic_id, doc_id, {name: label}))
    return conflicts


def primary_assessors(campaign: Campaign, pool: Pool | None = None) -> dict[str, list[str]]:
    """topic id -> ids (as strings) of the topic's primary assessors, preferred first: active
    assignments before withdrawn ones, ``pool``'s assignments first, then the most recent."""
    rows = (
        Assignment.objects.filter(campaign=campaign, mode=Assignment.Mode.PRIMARY)
        .values_list("topics__topic_id", "assessor_id", "active", "pool_id", "created_at", "pk")
        .order_by()
    )
    ranked: dict[str, list[tuple]] = {}
    for topic_id, assessor_id, active, pool_id, created_at, pk in rows:
        if topic_id is None:
            continue
        preferred = pool is not None and pool_id == pool.pk
        key = (not active, not preferred, -created_at.timestamp(), -pk)
        ranked.setdefault(topic_id, []).append((key, str(assessor_id)))
    result = {}
    for topic_id, entries in ranked.items():
        ordered: list[str] = []
        for _, assessor_id in sorted(entries):
            if assessor_id not in ordered:
                ordered.append(assessor_id)
        result[topic_id] = ordered
    return result


def use_snapshot() -> None:
    """On PostgreSQL, make the current transaction REPEATABLE READ when it has not run a
    statement yet, so that every file of a bundle reads the same snapshot of the judgments
    (verdicts saved while an export runs land in the next one). Elsewhere, or once the
    transaction has started, it does nothing: SQLite transactions are serialised anyway."""
    if not postgresql_fast_path() or not connection.in_atomic_block:
        return
    connection.ensure_connection()
    from psycopg.pq import TransactionStatus

    if connection.connection.info.transaction_status == TransactionStatus.IDLE:
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
