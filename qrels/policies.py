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
``adjudicated``
    The adjudicated label (qrels.adjudication: an organiser or adjudicator settled the pair)
    where one exists, else the campaign's default policy over the verdicts.

Adjudicated and model labels (assessors of those kinds) are not verdicts: every policy but
``adjudicated`` ignores them, and ``adjudicated`` reads only the adjudicated ones. A pair with
no verdict left is resolved as one nobody labelled. (They stay in the sidecar, marked by kind.)

``default_policy(campaign)`` is ``primary`` when the campaign has a primary assignment (someone
owns each topic, overlap assessors only double-check), else ``majority``.

Options shared by every function here:

* ``include_imported`` (default True): count the verdicts of imported sources (earlier qrels).
* ``include_models`` (default False): count the labels of model assessors (an LLM judge's,
  imported with ``import_qrels --kind model`` or made by a model job). Left out unless asked,
  so that default qrels are people's. Adjudicated labels never count as one verdict among
  others.
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

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Literal

from assess.models import Assignment
from campaigns.models import Assessor, Campaign
from pooling.models import Pool
from qrels.copytext import NULL, sortable_timestamp, unescape
from qrels.rows import (
    Conflict,
    JudgmentRow,
    Scope,
    find_conflicts,
    judgment_rows,
    primary_assessors,
    scope,
)

POLICIES = ("primary", "majority", "max", "min", "mean", "first", "refuse", "adjudicated")
UNJUDGED = ("omit", "-1")
Unjudged = Literal["omit", "-1"]
Qrels = dict[str, dict[str, int]]


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


def default_policy(campaign: Campaign) -> str:
    """``primary`` where the campaign assigns topics to primary assessors, else ``majority``."""
    has_primary = Assignment.objects.filter(
        campaign=campaign, mode=Assignment.Mode.PRIMARY
    ).exists()
    return "primary" if has_primary else "majority"


# --- Pairs and policies --------------------------------------------------------------------------

# One verdict: (assessor id, label, first judged at, pseudonym), all from the row (COPY text).
Verdict = tuple[str, int, str, str]


def iter_pairs(
    rows: Iterable[JudgmentRow],
) -> Iterator[tuple[str, str, list[Verdict], list[int], bool]]:
    """Group sorted judgment rows into pairs: (topic id, document id, verdicts (labels >= 0),
    negative labels, pooled). Ids come back unescaped, exactly as stored."""
    topic = doc = None
    verdicts: list[Verdict] = []
    negatives: list[int] = []
    pooled = False
    for row in rows:
        if row.docid != doc or row.topic != topic:
            if topic is not None:
                yield unescape(topic), unescape(doc), verdicts, negatives, pooled
            topic, doc = row.topic, row.docid
            verdicts, negatives, pooled = [], [], False
        if row.pool != NULL:
            pooled = True
        if row.label == NULL:
            continue
        value = int(row.label)
        if value >= 0:
            verdicts.append((row.assessor_id, value, row.first_judged_at, row.pseudonym))
        else:
            negatives.append(value)
    if topic is not None:
        yield unescape(topic), unescape(doc), verdicts, negatives, pooled


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
        adjudicated: Collection[str] = (),
        ignored: Collection[str] = (),
        fallback: str = "majority",
    ):
        """``adjudicated``: ids (as in the rows: text) of the adjudicated-labels assessors;
        ``ignored``: ids of every assessor whose labels are not verdicts (adjudicated, model);
        ``fallback``: the rule of the ``adjudicated`` policy where a pair has no adjudicated
        label."""
        if policy not in POLICIES:
            raise ValueError(f"Unknown policy {policy!r}; use one of {', '.join(POLICIES)}.")
        if policy == "adjudicated" and fallback in ("adjudicated", "refuse"):
            raise ValueError(f"The adjudicated policy cannot fall back on {fallback!r}.")
        self.policy = policy
        self.primary = primary or {}
        self.threshold = threshold
        self.binary = binary
        self.adjudicated = frozenset(adjudicated)
        self.ignored = frozenset(ignored) | self.adjudicated
        self._rule = getattr(self, f"_{fallback if policy == 'adjudicated' else policy}")

    def __call__(self, topic_id: str, verdicts: list[Verdict]) -> int | None:
        """The pair's label, or None when none of ``verdicts`` is a verdict this policy
        weighs (a model's label alone on a pair)."""
        if self.ignored:
            if self.policy == "adjudicated":
                settled = [v for v in verdicts if v[0] in self.adjudicated]
                if settled:
                    return self._binary(settled[0][1])
            verdicts = [v for v in verdicts if v[0] not in self.ignored]
            if not verdicts:
                return None
        label = verdicts[0][1] if len(verdicts) == 1 else self._rule(topic_id, verdicts)
        return self._binary(label)

    def _binary(self, label: int) -> int:
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


def resolver_for(s: Scope, policy: str, *, binary: bool = False) -> Resolver:
    fallback = default_policy(s.campaign) if policy == "adjudicated" else policy
    primary = primary_assessors(s.campaign, s.pool) if fallback == "primary" else {}
    # Labels in the scope that are not verdicts: the adjudicated ones (a model's are left out of
    # the scope unless asked for, and then they are verdicts).
    others = (
        Assessor.objects.filter(campaign=s.campaign)
        .exclude(kind__in=s.verdict_kinds)
        .order_by()
        .values_list("pk", "kind")
    )
    return Resolver(
        policy,
        primary=primary,
        threshold=s.campaign.relevance_threshold,
        binary=binary,
        adjudicated=[str(pk) for pk, kind in others if kind == Assessor.Kind.ADJUDICATED],
        ignored=[str(pk) for pk, _ in others],
        fallback=fallback,
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
        label = resolver(topic_id, verdicts) if verdicts else None
        if label is not None:
            yield topic_id, doc_id, label
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
    include_models: bool = False,
    include_filled: bool = False,
) -> Iterator[tuple[str, str, int]]:
    """:func:`campaign_qrels` as a stream of (topic id, document id, label) in qrels order.

    Raises PolicyConflict (before yielding anything) under ``refuse``, ValueError for bad
    options."""
    policy = policy or default_policy(campaign)
    check_options(policy, unjudged)
    s = scope(
        campaign=campaign,
        include_imported=include_imported,
        assessors=assessors,
        pool=pool,
        include_models=include_models,
        include_filled=include_filled,
    )
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
    include_models: bool = False,
    include_filled: bool = False,
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
        include_models=include_models,
        include_filled=include_filled,
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
    include_models: bool = False,
    include_filled: bool = False,
) -> dict[str, Qrels]:
    """Each assessor's own qrels, assessor name -> topic id -> document id -> label.

    An assessor's file holds their own current labels (no policy is involved), an imported
    source's negative labels included, as they came. Pooled pairs an assessor never saw are not
    added, whatever ``unjudged``: which pairs were theirs to judge is an assignment question,
    not a qrels one. Assessors without a judgment in the scope are absent."""
    check_options("max", unjudged)
    s = scope(
        campaign=campaign,
        include_imported=include_imported,
        assessors=assessors,
        pool=pool,
        include_models=include_models,
        include_filled=include_filled,
    )
    # Verdicts only: the adjudicated labels settle pairs between assessors, they are nobody's file.
    names = {
        str(pk): name
        for pk, name in Assessor.objects.filter(
            campaign=campaign, kind__in=s.verdict_kinds
        ).values_list("pk", "name")
    }
    threshold = campaign.relevance_threshold
    result: dict[str, Qrels] = {}
    for row in judgment_rows(s):
        if row.assessor_id not in names:
            continue
        label = int(row.label)
        if binary and label >= 0:
            label = 1 if label >= threshold else 0
        qrels = result.setdefault(names[row.assessor_id], {})
        qrels.setdefault(unescape(row.topic), {})[unescape(row.docid)] = label
    return result


__all__ = [
    "POLICIES",
    "UNJUDGED",
    "Conflict",
    "PolicyConflict",
    "Resolver",
    "Scope",
    "campaign_qrels",
    "default_policy",
    "find_conflicts",
    "iter_campaign_qrels",
    "per_assessor_qrels",
    "scope",
]
