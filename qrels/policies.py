"""Turning several assessors' verdicts into one label per (topic, document) pair.

A campaign can hold several current verdicts on one pair (overlap for agreement, a re-judged
collection, imported qrels beside new judgments). A qrels file holds one label per pair, so an
export names a policy, and the policy is recorded with it. Only current verdicts count (the
:class:`~campaigns.models.Judgment` rows; revisions are history).

Negative labels (the rule, stated in the README and in every bundle's README): a negative label
comes only from an imported qrels file (the rubric has none) and is kept as written: it is
exported as it came, by default, in the qrels and the per-assessor files. It is not a grade:
trec_eval reads any label below 0 as "in the pool, not judged" (Cranfield's 225 ``-1`` are read
so too), so no policy weighs it against the verdicts (labels >= 0) of other assessors on the same
pair: those decide the pair's label, and a pair with negative labels only keeps them (the
sources' shared label, -1 where they differ). Pooljudge itself gives the meaning "pooled, not
judged" only to the pairs it pooled and nobody labelled, and writes them only when asked
(``unjudged="-1"``).

The policies (``POLICIES``), over the verdicts (labels >= 0) on one pair:

``primary``
    The verdict of the topic's primary assessor: the assessor of a ``primary`` assignment that
    includes the topic (active assignments before withdrawn ones, then the most recent; with a
    ``pool``, that pool's assignments first). Where no primary assessor exists for the topic, or
    they did not judge the pair, the ``majority`` rule decides among the verdicts there are.
``majority``
    The most frequent label. A tie goes to the **highest** of the tied labels (the more lenient
    verdict, as ``max`` would take; never line or arrival order).
``max`` / ``min``
    The highest / lowest label.
``mean``
    The arithmetic mean rounded **half up** (1 and 2 give 2; 0, 1 and 1 give 1), computed in
    integers as ``(2 * sum + n) // (2 * n)``: not Python's banker's rounding. On a scale with
    gaps (0, 1, 3) the mean can land between the scale's labels (1 and 3 give 2).
``first``
    The verdict judged first: earliest ``first_judged_at``, ties broken by the assessor's
    pseudonym (code-point order).
``refuse``
    The label the assessors agree on; any pair on which they disagree makes the whole request
    fail with :class:`PolicyConflict`, which lists every such pair with each assessor's label.

``default_policy(campaign)`` is ``primary`` when the campaign has a primary assignment (someone
owns each topic, overlap assessors only double-check), else ``majority``.

Options shared by every function here:

* ``include_imported`` (default True): count the verdicts of imported sources (earlier qrels).
* ``assessors``: only these assessors (by name), e.g. to compare two people.
* ``pool``: a :class:`~pooling.models.Pool`. With one, only pairs in that pool are written
  (verdicts on other pairs are left out) and its entries are the pooled pairs; without one,
  every verdict is written and the pooled pairs are the entries of every built pool.
* ``unjudged``: ``"omit"`` (default) leaves pooled pairs nobody labelled out: absence means
  "not judged". ``"-1"`` writes them with label -1, trec_eval's "in the pool, not judged", the
  convention inferred measures (infAP) need; this includes the unsampled entries of a sampled
  pool. Either way, a pair with an imported negative label is written with it (see above).
* ``binary``: after the policy, labels >= ``campaign.relevance_threshold`` become 1 and the
  others 0; negative labels are kept as they are.

Output order is the documented stable order of :func:`qrels.formats.qrels_sort_key`: topic id,
then document id, both in code-point order (the database sorts with the "C" collation, so the
order does not depend on its locale). Everything streams: rows come from the database sorted by
pair and are resolved one pair at a time, as plain strings, never as ORM objects.
"""

# The SQL here is assembled from table names (quoted by Django) and fixed fragments; every value
# travels as a query parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Literal

from django.db import connection

from assess.models import Assignment
from campaigns.models import Assessor, Campaign, Judgment, Topic
from pooling.models import Pool, PoolEntry

POLICIES = ("primary", "majority", "max", "min", "mean", "first", "refuse")
UNJUDGED = ("omit", "-1")
Unjudged = Literal["omit", "-1"]
Qrels = dict[str, dict[str, int]]

# Rows arrive as text in PostgreSQL's COPY text format with NULL written as an empty string
# (COPY … WITH (NULL '')); the SQLite path produces the same strings. The text columns read here
# are never NULL in a judgment row, so nothing is lost.
NULL = ""
FETCH_ROWS = 20_000
COPY_ESCAPES = str.maketrans(
    {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
)
_UNESCAPES = {"\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class PolicyConflict(Exception):
    """The ``refuse`` policy met pairs its assessors disagree on; ``conflicts`` lists them all
    (topic id, document id, and each assessor's label by assessor name), in qrels order."""

    def __init__(self, conflicts: list[Conflict]):
        self.conflicts = conflicts
        count = len(conflicts)
        super().__init__(
            f"{count:,} pair{'s' if count != 1 else ''} with disagreeing assessors "
            f"(policy refuse), e.g. {conflicts[0]}"
            if conflicts
            else "no conflicts"
        )

    def lines(self, limit: int | None = None) -> list[str]:
        shown = self.conflicts if limit is None else self.conflicts[:limit]
        return [str(conflict) for conflict in shown]


@dataclass(frozen=True)
class Conflict:
    topic_id: str
    doc_id: str
    labels: dict[str, int]  # assessor name -> label

    def __str__(self) -> str:
        given = ", ".join(f"{name}={label}" for name, label in self.labels.items())
        return f"topic {self.topic_id} document {self.doc_id}: {given}"


def default_policy(campaign: Campaign) -> str:
    """``primary`` where the campaign assigns topics to primary assessors, else ``majority``."""
    has_primary = Assignment.objects.filter(
        campaign=campaign, mode=Assignment.Mode.PRIMARY
    ).exists()
    return "primary" if has_primary else "majority"


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


def scope(
    *,
    campaign: Campaign,
    include_imported: bool = True,
    assessors: Collection[str] | None = None,
    pool: Pool | None = None,
) -> Scope:
    """Check the options against the campaign. Raises ValueError naming an unknown assessor, a
    pool of another campaign or a pool that is not built."""
    ids = None
    names = None
    if assessors is not None:
        names = frozenset(assessors)
        known = dict(
            Assessor.objects.filter(campaign=campaign, name__in=names).values_list("name", "pk")
        )
        unknown = sorted(names - known.keys())
        if unknown:
            raise ValueError(f"No assessor named {', '.join(map(repr, unknown))} in this campaign.")
        ids = tuple(sorted(known.values()))
    if pool is not None:
        if pool.campaign_id != campaign.pk:
            raise ValueError(f"Pool {pool} belongs to another campaign.")
        if pool.status != Pool.Status.BUILT:
            raise ValueError(f"Pool v{pool.version} is {pool.get_status_display().lower()}.")
        pools: tuple[Pool, ...] = (pool,)
    else:
        pools = tuple(campaign.pools.filter(status=Pool.Status.BUILT).order_by("version"))
    return Scope(campaign, include_imported, names, pool, pools, ids)


def _t(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _collate(expression: str) -> str:
    # Code-point order whatever the database's locale: "C" on PostgreSQL; SQLite compares text
    # with memcmp, which on UTF-8 is code-point order already.
    return f'{expression} COLLATE "C"' if connection.vendor == "postgresql" else expression


def timestamp_sql(expression: str) -> str:
    """SQL for a timestamp column as UTC ISO 8601 text with Z, the fraction of a second
    without trailing zeros (``2025-03-01T09:00:00.25Z``, ``2025-03-01T09:00:00Z``), as
    PostgreSQL writes it cheaply; on SQLite the raw text is converted by
    :func:`as_timestamp`."""
    if connection.vendor == "postgresql":
        return f"(replace(({expression} AT TIME ZONE 'UTC')::text, ' ', 'T') || 'Z')"
    return expression


def _judgment_filter(s: Scope, j: str, a: str) -> tuple[str, list]:
    """WHERE conditions (joined with AND) selecting the scope's judgments, aliases j and a."""
    sql = [f"{j}.campaign_id = %s"]
    params: list = [s.campaign.pk]
    if not s.include_imported:
        sql.append(f"{a}.kind = %s")
        params.append(Assessor.Kind.PERSON.value)
    if s.assessor_ids is not None:
        if not s.assessor_ids:
            sql.append("1 = 0")
        else:
            sql.append(f"{j}.assessor_id IN ({', '.join(['%s'] * len(s.assessor_ids))})")
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


def _placeholders(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values))


# Columns of a judgment row, in order: what resolving a pair needs. Every value is a string in
# PostgreSQL's COPY text format (NULL is empty, text is backslash-escaped, timestamps are those
# of timestamp_sql), whichever the database.
ROW_COLUMNS = (
    "topic",
    "docid",
    "label",
    "assessor_id",
    "pseudonym",
    "first_judged_at",
    "pool",
    "assessor",
)
TOPIC, DOC, LABEL, ASSESSOR_ID, PSEUDONYM, FIRST_AT, POOL, ASSESSOR = range(8)
# Extra columns get these expressions: j (judgment), t (topic), a (assessor), and the keys of
# this dict for computed ones (assessor, pool, stratum, inclusion_probability, rubric_version).
ExtraColumns = Callable[[dict[str, str]], list[str]]


def judgment_rows_sql(
    s: Scope,
    *,
    usernames: bool = False,
    pooled_unjudged: bool = False,
    extra: ExtraColumns | None = None,
) -> tuple[str, list]:
    """The query behind :func:`judgment_rows`: the scope's judgments (ROW_COLUMNS, then the
    ``extra`` columns), sorted by topic id, document id and assessor; with
    ``pooled_unjudged``, also one row per pooled pair nobody in the scope judged, with NULL in
    every other column.

    Assessors are named by pseudonym, imported sources by their name (they are files, not
    people); with ``usernames``, everyone by name."""
    judgment, topic, assessor = _t(Judgment), _t(Topic), _t(Assessor)
    where, where_params = _judgment_filter(s, "j", "a")
    join, join_params, columns = _pool_join(s, "j")
    if usernames:
        display = "a.name"
    else:
        imported = Assessor.Kind.IMPORTED.value  # a constant of the code, not user input
        display = f"(CASE WHEN a.kind = '{imported}' THEN a.name ELSE a.pseudonym END)"
    columns["assessor"] = display
    # A campaign has a handful of rubric versions: their numbers as constants, not a join (a
    # join would keep the database from formatting rows in its parallel workers).
    numbers = list(s.campaign.rubric_versions.values_list("pk", "number"))
    columns["rubric_version"] = (
        "CASE j.rubric_version_id "
        + " ".join(f"WHEN {int(pk)} THEN {int(number)}" for pk, number in numbers)
        + " END"
        if numbers
        else "NULL"
    )
    extras = extra(columns) if extra is not None else []
    select = ", ".join(
        [
            f"{_collate('t.topic_id')} AS topic",
            f"{_collate('j.doc_id')} AS docid",
            "j.label AS label",
            "j.assessor_id AS assessor_id",
            "a.pseudonym AS pseudonym",
            f"{timestamp_sql('j.first_judged_at')} AS first_judged_at",
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
        after = ", ".join(["NULL"] * (1 + len(extras)))  # assessor and the extra columns
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
) -> Iterator[list[str]]:
    """Stream the rows of :func:`judgment_rows_sql` (ROW_COLUMNS) as lists of COPY-text
    strings, in qrels order. Memory stays bounded."""
    sql, params = judgment_rows_sql(s, usernames=usernames, pooled_unjudged=pooled_unjudged)
    return stream_rows(sql, params, converters=ROW_CONVERTERS)


def stream_rows(
    sql: str,
    params: Sequence,
    *,
    converters: Sequence,
    maxsplit: int = -1,
    use_copy: bool | None = None,
) -> Iterator[list[str]]:
    """The rows of ``sql`` one by one; see :func:`stream_batches`."""
    for batch in stream_batches(
        sql, params, converters=converters, maxsplit=maxsplit, use_copy=use_copy
    ):
        yield from batch


def stream_batches(
    sql: str,
    params: Sequence,
    *,
    converters: Sequence,
    maxsplit: int = -1,
    use_copy: bool | None = None,
) -> Iterator[list[list[str]]]:
    """The rows of ``sql``, a few thousand at a time, as lists of strings in PostgreSQL's
    COPY text format.

    On PostgreSQL the rows arrive through ``COPY … TO STDOUT``: the database formats every
    value and nothing is parsed into Python objects (each line is split on tabs, at most
    ``maxsplit`` times). Elsewhere a cursor is read in batches and each value turned into the
    same text by ``converters`` (one per column); ``use_copy=False`` takes that path on
    PostgreSQL too."""
    if use_copy is None:
        use_copy = connection.vendor == "postgresql"
    if use_copy:
        rest = b""
        for block in copy_bytes(sql, params):
            if rest:
                block = rest + block
            end = block.rfind(b"\n")
            if end < 0:
                rest = block
                continue
            rest = block[end + 1 :]
            yield [line.split("\t", maxsplit) for line in block[:end].decode().split("\n")]
        if rest:
            yield [line.split("\t", maxsplit) for line in rest.decode().split("\n")]
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(FETCH_ROWS):
            yield [
                [convert(value) for convert, value in zip(converters, row, strict=True)]
                for row in batch
            ]


def copy_bytes(sql: str, params: Sequence, *, rows: int = 4096) -> Iterator[bytes]:
    """The output of ``COPY (sql) TO STDOUT (NULL '')`` on PostgreSQL, ``rows`` lines a block.

    The server sends one message per row; psycopg's ``Copy`` iteration costs a few
    microseconds per message, more than formatting the row. So the messages libpq has already
    received are taken straight from the connection's documented low-level ``pgconn``, and
    ``Copy.read()`` is called only to wait for more; the end of the COPY is completed here
    exactly as psycopg would (its final result read and checked)."""
    from psycopg import DatabaseError
    from psycopg.pq import ExecStatus

    connection.ensure_connection()
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY ({sql}) TO STDOUT (NULL '')", params) as copy,
    ):
        pgconn = cursor.cursor.connection.pgconn
        get = pgconn.get_copy_data
        parts: list[bytes] = []
        while True:
            size, data = get(1)  # non-blocking: 0 means nothing buffered yet
            if size > 0:
                parts.append(bytes(data))
                if len(parts) >= rows:
                    yield b"".join(parts)
                    parts = []
                continue
            if size == 0:
                data = copy.read()  # waits; empty once the COPY is over and finished
                if not data:
                    break
                parts.append(bytes(data))
                continue
            # -1: the COPY is over and this loop took its end: read its result.
            while (result := pgconn.get_result()) is not None:
                if result.status != ExecStatus.COMMAND_OK:
                    raise DatabaseError((result.error_message or b"COPY failed").decode())
            break
        if parts:
            yield b"".join(parts)


def pg_float(value: float) -> str:
    """A float as PostgreSQL writes it: the shortest text that reads back to the same value,
    without a trailing ``.0``; NaN and Infinity spelled its way."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def as_timestamp(value) -> str:
    """A timestamp read through a cursor (SQLite's stored text, or a datetime) as the text of
    :func:`timestamp_sql`."""
    if value is None:
        return NULL
    if not isinstance(value, str):  # a datetime (PostgreSQL, or a SQLite converter)
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        value = str(value)
    elif value.endswith("Z"):  # already written by timestamp_sql
        return value
    text = value[:26].replace(" ", "T")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + "Z"


def sortable_timestamp(text: str) -> str:
    """An ISO timestamp of :func:`timestamp_sql` with all six fraction digits, so that text
    order is time order."""
    text = text.removesuffix("Z")
    if "." not in text:
        return text + ".000000"
    return text.ljust(26, "0")


def as_text(value) -> str:
    return NULL if value is None else str(value).translate(COPY_ESCAPES)


def as_float(value) -> str:
    return NULL if value is None else pg_float(float(value))


def as_flag(value) -> str:
    """A boolean as 1 or 0 (PostgreSQL: ``column::int``)."""
    return NULL if value is None else ("1" if value else "0")


def as_int(value) -> str:
    return NULL if value is None else str(value)


ROW_CONVERTERS = (as_text, as_text, as_int, as_int, as_text, as_timestamp, as_int, as_text)


def unescape(text: str) -> str:
    """Undo COPY-text escaping (``\\\\ \\t \\n \\r \\b \\f \\v``)."""
    if "\\" not in text:
        return text
    out = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append(_UNESCAPES.get(following, following))
        else:
            out.append(char)
    return "".join(out)


# --- Pairs and policies --------------------------------------------------------------------------

# One verdict: (assessor id, label, first judged at, pseudonym), all from the row.
Verdict = tuple[str, int, str, str]


def iter_pairs(
    rows: Iterable[list[str]],
) -> Iterator[tuple[str, str, list[Verdict], list[int], bool]]:
    """Group sorted judgment rows into pairs: (topic id, document id, verdicts (labels >= 0),
    negative labels, pooled). Ids come back unescaped, exactly as stored."""
    topic = doc = None
    verdicts: list[Verdict] = []
    negatives: list[int] = []
    pooled = False
    for f in rows:
        if f[DOC] != doc or f[TOPIC] != topic:
            if topic is not None:
                yield unescape(topic), unescape(doc), verdicts, negatives, pooled
            topic, doc = f[TOPIC], f[DOC]
            verdicts, negatives, pooled = [], [], False
        if f[POOL] != NULL:
            pooled = True
        label = f[LABEL]
        if label == NULL:
            continue
        value = int(label)
        if value >= 0:
            verdicts.append((f[ASSESSOR_ID], value, f[FIRST_AT], f[PSEUDONYM]))
        else:
            negatives.append(value)
    if topic is not None:
        yield unescape(topic), unescape(doc), verdicts, negatives, pooled


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


def _majority(verdicts: list[Verdict]) -> int:
    counts = Counter(v[1] for v in verdicts)
    top = max(counts.values())
    return max(label for label, count in counts.items() if count == top)


class Resolver:
    """One label for one pair's verdicts under ``policy`` (see the module docstring)."""

    def __init__(
        self,
        policy: str,
        *,
        primary: Mapping[str, Sequence[str]] | None = None,
        threshold: int = 1,
        binary: bool = False,
    ):
        if policy not in POLICIES:
            raise ValueError(f"Unknown policy {policy!r}; use one of {', '.join(POLICIES)}.")
        self.policy = policy
        self.primary = primary or {}
        self.threshold = threshold
        self.binary = binary
        self._rule = getattr(self, f"_{policy}")

    def __call__(self, topic_id: str, verdicts: list[Verdict]) -> int:
        label = verdicts[0][1] if len(verdicts) == 1 else self._rule(topic_id, verdicts)
        if self.binary:
            return 1 if label >= self.threshold else 0
        return label

    def _primary(self, topic_id: str, verdicts: list[Verdict]) -> int:
        owners = self.primary.get(topic_id)
        if owners:
            by_assessor = {v[0]: v[1] for v in verdicts}
            for owner in owners:
                if owner in by_assessor:
                    return by_assessor[owner]
        return _majority(verdicts)

    def _majority(self, topic_id: str, verdicts: list[Verdict]) -> int:
        return _majority(verdicts)

    def _max(self, topic_id: str, verdicts: list[Verdict]) -> int:
        return max(v[1] for v in verdicts)

    def _min(self, topic_id: str, verdicts: list[Verdict]) -> int:
        return min(v[1] for v in verdicts)

    def _mean(self, topic_id: str, verdicts: list[Verdict]) -> int:
        n = len(verdicts)
        return (2 * sum(v[1] for v in verdicts) + n) // (2 * n)

    def _first(self, topic_id: str, verdicts: list[Verdict]) -> int:
        return min(verdicts, key=lambda v: (sortable_timestamp(v[2]), v[3]))[1]

    def _refuse(self, topic_id: str, verdicts: list[Verdict]) -> int:
        labels = {v[1] for v in verdicts}
        if len(labels) > 1:
            # find_conflicts ran first; this only happens if a verdict changed in between.
            raise PolicyConflict([Conflict(topic_id, "?", {v[3]: v[1] for v in verdicts})])
        return verdicts[0][1]


def unjudged_label(negatives: list[int]) -> int:
    """The label of a pair without a verdict: the sources' own negative label when they agree
    on one, else -1 (also for a pooled pair nobody labelled)."""
    if negatives and len(set(negatives)) == 1:
        return negatives[0]
    return -1


def find_conflicts(s: Scope) -> list[Conflict]:
    """Every pair in the scope whose verdicts disagree, with each assessor's label (by name)."""
    judgment, topic, assessor = _t(Judgment), _t(Topic), _t(Assessor)
    where, params = _judgment_filter(s, "j", "a")
    inner_where, inner_params = _judgment_filter(s, "j2", "a2")
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


def resolver_for(s: Scope, policy: str, *, binary: bool = False) -> Resolver:
    primary = primary_assessors(s.campaign, s.pool) if policy == "primary" else {}
    return Resolver(
        policy, primary=primary, threshold=s.campaign.relevance_threshold, binary=binary
    )


def resolve_pairs(
    pairs: Iterable[tuple[str, str, list[Verdict], list[int], bool]],
    resolver: Resolver,
    *,
    unjudged: Unjudged = "omit",
) -> Iterator[tuple[str, str, int]]:
    """(topic id, document id, label) for each pair that gets a line, in the pairs' order: the
    policy's label where there are verdicts, else the imported negative label, else (pooled
    pairs nobody labelled) -1 when ``unjudged`` is "-1"."""
    write_unjudged = unjudged == "-1"
    for topic_id, doc_id, verdicts, negatives, pooled in pairs:
        if verdicts:
            yield topic_id, doc_id, resolver(topic_id, verdicts)
        elif negatives or (write_unjudged and pooled):
            yield topic_id, doc_id, unjudged_label(negatives)


def check_options(policy: str, unjudged: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"Unknown policy {policy!r}; use one of {', '.join(POLICIES)}.")
    if unjudged not in UNJUDGED:
        raise ValueError(f"unjudged is 'omit' or '-1', not {unjudged!r}.")


def iter_campaign_qrels(
    *,
    campaign: Campaign,
    policy: str | None = None,
    include_imported: bool = True,
    assessors: Collection[str] | None = None,
    unjudged: Unjudged = "omit",
    pool: Pool | None = None,
    binary: bool = False,
) -> Iterator[tuple[str, str, int]]:
    """:func:`campaign_qrels` as a stream of (topic id, document id, label) in qrels order.

    Raises PolicyConflict (before yielding anything) under ``refuse``, ValueError for bad
    options."""
    policy = policy or default_policy(campaign)
    check_options(policy, unjudged)
    s = scope(campaign=campaign, include_imported=include_imported, assessors=assessors, pool=pool)
    if policy == "refuse":
        conflicts = find_conflicts(s)
        if conflicts:
            raise PolicyConflict(conflicts)
    rows = judgment_rows(s, pooled_unjudged=unjudged == "-1")
    yield from resolve_pairs(
        iter_pairs(rows), resolver_for(s, policy, binary=binary), unjudged=unjudged
    )


def campaign_qrels(
    *,
    campaign: Campaign,
    policy: str | None = None,
    include_imported: bool = True,
    assessors: Collection[str] | None = None,
    unjudged: Unjudged = "omit",
    pool: Pool | None = None,
    binary: bool = False,
) -> Qrels:
    """The campaign's qrels, topic id -> document id -> label, one label per pair resolved by
    ``policy`` (default: :func:`default_policy`). See the module docstring for every rule.

    Raises PolicyConflict under ``refuse`` when assessors disagree, ValueError for an unknown
    policy, assessor or pool."""
    qrels: Qrels = {}
    for topic_id, doc_id, label in iter_campaign_qrels(
        campaign=campaign,
        policy=policy,
        include_imported=include_imported,
        assessors=assessors,
        unjudged=unjudged,
        pool=pool,
        binary=binary,
    ):
        qrels.setdefault(topic_id, {})[doc_id] = label
    return qrels


def per_assessor_qrels(
    *,
    campaign: Campaign,
    include_imported: bool = True,
    assessors: Collection[str] | None = None,
    unjudged: Unjudged = "omit",
    pool: Pool | None = None,
    binary: bool = False,
) -> dict[str, Qrels]:
    """Each assessor's own qrels, assessor name -> topic id -> document id -> label.

    An assessor's file holds their own current labels (no policy is involved), an imported
    source's negative labels included, as they came. Pooled pairs an assessor never saw are not
    added, whatever ``unjudged``: which pairs were theirs to judge is an assignment question,
    not a qrels one. Assessors without a judgment in the scope are absent."""
    check_options("max", unjudged)
    s = scope(campaign=campaign, include_imported=include_imported, assessors=assessors, pool=pool)
    names = {
        str(pk): name
        for pk, name in Assessor.objects.filter(campaign=campaign).values_list("pk", "name")
    }
    threshold = campaign.relevance_threshold
    result: dict[str, Qrels] = {}
    for f in judgment_rows(s):
        label = int(f[LABEL])
        if binary and label >= 0:
            label = 1 if label >= threshold else 0
        qrels = result.setdefault(names[f[ASSESSOR_ID]], {})
        qrels.setdefault(unescape(f[TOPIC]), {})[unescape(f[DOC])] = label
    return result
