"""Adaptive order in the judging loop: a pool's shared queue served by ``pooling.adjudication``.

A pool built with ``params["adjudication"]`` (see :func:`normalise`) is judged in adaptive order:
when an assessor of a shared-queue assignment asks for a document, the topic's next document is
chosen then, from every judgment made so far, instead of read off the queue's shuffled order.
Primary and overlap assignments keep their own shuffled order (they list their documents up front).

Where the state lives
    The judgments themselves are the evidence: every verdict is a ``JudgmentRevision`` row (append
    only, ids increasing), so the order's state is a fold of the topic's revisions in id order,
    a revision of a label included. Each process keeps the folded :class:`Adjudicator` per pool and
    topic and reads only the revisions newer than the last it folded (and the last RECENT_SECONDS'
    again: ids are given out before their statements commit). The database keeps what the
    judgments do not say: which run's turn chose each document (:class:`AdaptiveTopic`).
    Documents claimed and not yet judged are passed to the order as pending.

How a choice is claimed
    On PostgreSQL (assess.judging._claiming_panel) the statement that finds an assessor has
    nothing open also reads what the order needs (new revisions, pending claims); the order
    chooses here (:func:`choose_from`, nothing locked), and one statement claims the chosen queue
    entry only if it is still unclaimed, records the run's turn (merged into the topic's row)
    and appends the item: two statements, no transaction held open. If another assessor claimed
    that document meanwhile, the claim takes nothing and the order chooses again; after a few
    such races, or on other databases, :func:`choose` chooses under the topic's row lock
    (``SELECT … FOR UPDATE``), one assessor at a time. Either way two assessors never get one
    document: the queue entry's claim is the arbiter.

Blinding: nothing here reaches the assessor but the document chosen; runs, turns and estimates stay
on the organiser's side.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from campaigns.models import Assessor, JudgmentRevision, Topic
from pooling.adjudication import (
    ADAPTIVE_ORDERS,
    CREDITS,
    DEFAULT_TARGET,
    AdjudicationError,
    Adjudicator,
    Choice,
    Estimate,
    TopicReplay,
    replay_topic,
)
from pooling.models import AdaptiveTopic, Pool, PoolEntry, Run

DEFAULT_BURN_IN = 5
CACHE_SIZE = 256


def normalise(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validated adaptive-order options as the pool records them, or None for the static order.
    Raises AdjudicationError with a sentence for the organiser."""
    if not raw or not raw.get("order"):
        return None
    order = raw["order"]
    if order not in ADAPTIVE_ORDERS:
        raise AdjudicationError(f"Adaptive order must be mtf or bandit, not {order!r}.")
    credit = raw.get("credit") or "prefix"
    if credit not in CREDITS:
        raise AdjudicationError(f"Credit must be prefix or pulled, not {credit!r}.")
    burn_in = _whole(raw.get("burn_in", DEFAULT_BURN_IN), "The burn-in depth", minimum=0)
    budget = raw.get("budget")
    budget = None if budget in (None, "") else _whole(budget, "The per-topic budget", minimum=1)
    fraction = raw.get("budget_fraction")
    if fraction not in (None, ""):
        fraction = _fraction(fraction, "The per-topic budget as a fraction of the pool")
    else:
        fraction = None
    target = _fraction(raw.get("target", DEFAULT_TARGET), "The recall target")
    return {
        "order": order,
        "credit": credit,
        "burn_in": burn_in,
        "budget": budget,
        "budget_fraction": fraction,
        "target": target,
    }


def _whole(value: Any, what: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise AdjudicationError(f"{what} must be a whole number, not {value!r}.")
    try:
        number = int(value)
    except ValueError:
        raise AdjudicationError(f"{what} must be a whole number, not {value!r}.") from None
    if number < minimum:
        raise AdjudicationError(f"{what} must be at least {minimum}, not {number}.")
    return number


def _fraction(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AdjudicationError(f"{what} must be a number, not {value!r}.") from None
    if not 0 < number <= 1:
        raise AdjudicationError(f"{what} must be above 0 and at most 1, not {number}.")
    return number


def options(pool: Pool) -> dict[str, Any] | None:
    return pool.params.get("adjudication") or None


def describe(opts: dict[str, Any]) -> str:
    name = {"mtf": "move-to-front", "bandit": "bandit (MaxMean)"}[opts["order"]]
    text = f"adaptive order: {name}, burn-in {opts['burn_in']}"
    if opts.get("budget"):
        text += f", budget {opts['budget']} per topic"
    if opts.get("budget_fraction"):
        text += f", budget {opts['budget_fraction']:.0%} of each topic"
    return text


def topic_lists(pool: Pool, topic: Topic) -> dict[str, list[str]]:
    """Each contributing run's ranked list of the topic's pooled documents (best first), runs in
    tag order: read back from the pool's provenance, so the order sees exactly the pool."""
    ranked: dict[int, list[tuple[int, str]]] = defaultdict(list)
    entries = PoolEntry.objects.filter(pool=pool, topic=topic, sampled=True).values_list(
        "doc_id", "provenance"
    )
    for doc_id, provenance in entries:
        for run_id, rank in provenance:
            ranked[int(run_id)].append((rank, doc_id))
    tags = dict(Run.objects.filter(pk__in=ranked).values_list("pk", "tag"))
    return {
        str(run_id): [doc for _rank, doc in sorted(ranked[run_id])]
        for run_id in sorted(ranked, key=lambda pk: (tags.get(pk, ""), pk))
    }


# Revision ids are given out when a verdict's statement runs, and statements commit in any
# order: a reader can see revision n+1 while n is still in flight. Each read therefore also
# returns the revisions written in the last RECENT_SECONDS (judged_at), and the fold remembers
# which of those it holds; one that arrives below the last folded id was in flight, and the
# topic is folded again from its first revision (rare: two verdicts on one topic in the same
# milliseconds, read between their commits).
RECENT_SECONDS = 30


@dataclass
class _Folded:
    adjudicator: Adjudicator
    last_revision: int = 0
    # Revision pk -> time.monotonic() when folded, for the revisions of the recent window.
    recent: dict[int, float] = field(default_factory=dict)


_cache: OrderedDict[tuple, _Folded] = OrderedDict()
# One lock for the process's folded states: a fold and a choice are a few hundred microseconds,
# and threads of one process (tests, a threaded server) must not fold one state twice.
_lock = threading.RLock()


def _key(pool: Pool, topic: Topic) -> tuple:
    # created_at makes a key unique even where a test database reuses primary keys.
    return (pool.pk, pool.created_at, topic.pk)


def _entry(pool: Pool, topic: Topic) -> _Folded:
    """The topic's cached fold, created empty (nothing folded yet) when absent (call under
    _lock)."""
    opts = options(pool)
    if opts is None:
        raise AdjudicationError(f"Pool v{pool.version} is not judged in adaptive order.")
    key = _key(pool, topic)
    entry = _cache.get(key)
    if entry is None:
        lists = topic_lists(pool, topic)
        size = len({doc for docs in lists.values() for doc in docs})
        budget = opts.get("budget")
        if opts.get("budget_fraction"):
            by_fraction = max(1, math.ceil(opts["budget_fraction"] * size))
            budget = min(budget, by_fraction) if budget else by_fraction
        adjudicator = Adjudicator(
            lists,
            order=opts["order"],
            credit=opts["credit"],
            burn_in=opts["burn_in"],
            budget=budget,
            seed=pool.seed or 0,
            relevant_from=pool.campaign.relevance_threshold,
        )
        entry = _cache[key] = _Folded(adjudicator)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    _cache.move_to_end(key)
    return entry


def _fold(entry: _Folded, revisions) -> bool:
    """Fold ``revisions`` ((revision pk, doc id, label, run whose turn chose the document), in pk
    order) into the entry, skipping those it already holds (call under _lock). False when one
    arrived late (below the last folded id, see RECENT_SECONDS): the caller folds again."""
    adjudicator = entry.adjudicator
    now = time.monotonic()
    if len(entry.recent) > 64:
        entry.recent = {pk: t for pk, t in entry.recent.items() if now - t < 2 * RECENT_SECONDS}
    for pk, doc_id, label, run in revisions:
        if pk in entry.recent:
            continue
        if pk <= entry.last_revision:
            return False
        if doc_id in adjudicator.index:
            adjudicator.judge(doc_id, label, run=run)
        entry.last_revision = pk
        entry.recent[pk] = now
    return True


def recent_since() -> datetime:
    """Revisions judged after this are read again by every fold (see RECENT_SECONDS)."""
    return timezone.now() - timedelta(seconds=RECENT_SECONDS)


def _folded(pool: Pool, topic: Topic, chosen_by: dict[str, str]) -> Adjudicator:
    """The topic's adjudicator with every revision so far folded in (call under _lock)."""
    for _ in range(2):
        entry = _entry(pool, topic)
        revisions = (
            JudgmentRevision.objects.filter(
                Q(pk__gt=entry.last_revision) | Q(judged_at__gt=recent_since()),
                judgment__campaign_id=pool.campaign_id,
                judgment__topic_id=topic.pk,
                judgment__assessor__kind=Assessor.Kind.PERSON,
            )
            .order_by("pk")
            .values_list("pk", "judgment__doc_id", "label")
        )
        rows = ((pk, doc, label, chosen_by.get(doc)) for pk, doc, label in revisions)
        if _fold(entry, rows):
            break
        _cache.pop(_key(pool, topic), None)  # a late revision: fold from the first again
    return entry.adjudicator


def folded_marks(pool: Pool) -> dict[int, int]:
    """Topic pk -> the last revision this process has folded, for the pool's cached topics: a
    reader of the judging loop asks the database only for revisions after these (see
    choose_from); a topic missing here is read from its first revision."""
    key = (pool.pk, pool.created_at)
    with _lock:
        return {k[2]: entry.last_revision for k, entry in _cache.items() if k[:2] == key}


def choose_from(
    *,
    pool: Pool,
    topics: Sequence[Topic],
    marks: dict[int, int],
    revisions: dict[int, list[tuple[int, str, int, str | None]]],
    pending: dict[int, set[str]],
) -> tuple[Topic, Choice] | None:
    """The next document of an adaptive pool for an assessor of ``topics`` (in that order), from
    state read by the caller in the statement that found the assessor had nothing open
    (assess.judging.panel_reads): per topic, the revisions after ``marks`` (the caller's
    folded_marks) with the run that chose each document, and the documents claimed and not yet
    judged. Nothing is locked or written: the caller claims the choice with a conditional
    write, and reads again if another assessor took it first. None when every topic is done
    or out of budget."""
    with _lock:
        for topic in topics:
            entry = _entry(pool, topic)
            if entry.last_revision < marks.get(topic.pk, 0) or not _fold(
                entry, sorted(revisions.get(topic.pk, ()))
            ):
                # Evicted and created again since the caller read, or a revision arrived late:
                # fold from the database.
                _cache.pop(_key(pool, topic), None)
                row = AdaptiveTopic.objects.filter(pool=pool, topic=topic).order_by().first()
                _folded(pool, topic, row.chosen_by if row is not None else {})
                entry = _entry(pool, topic)
            choice = entry.adjudicator.next(pending=pending.get(topic.pk, ()))
            if choice is not None:
                return topic, choice
    return None


def choose(*, pool: Pool, topic: Topic, claimed_since: datetime) -> Choice | None:
    """The topic's next document in adaptive order, recorded as chosen (call inside the claim's
    transaction: the topic's row stays locked until it commits). Documents claimed since
    ``claimed_since`` and not yet judged are someone else's."""
    from assess.models import QueueItem

    row, _ = AdaptiveTopic.objects.select_for_update(of=("self",)).get_or_create(
        pool=pool, topic=topic
    )
    pending = QueueItem.objects.filter(
        pool=pool, topic=topic, done=False, claimed_at__gte=claimed_since
    ).values_list("doc_id", flat=True)
    with _lock:
        adjudicator = _folded(pool, topic, row.chosen_by)
        choice = adjudicator.next(pending=set(pending))
    if choice is not None and choice.run is not None:
        row.chosen_by[choice.doc_id] = choice.run
        AdaptiveTopic.objects.filter(pk=row.pk).update(chosen_by=row.chosen_by)
    return choice


def claim_candidate(assignment, *, expired: datetime):
    """The queue entry (replica 0, locked) an adaptive pool serves the assignment next, or None
    when every topic is done or out of budget. Topics are taken in the assignment's topic order."""
    from assess.models import QueueItem

    pool = assignment.pool
    for topic in assignment.topics.order_by("topic_id", "pk"):
        choice = choose(pool=pool, topic=topic, claimed_since=expired)
        if choice is None:
            continue
        # One row at most (unique per pool, topic, document and replica); ordered by pk, never
        # by QueueItem's default ordering, whose joins would lock the pool and campaign too.
        candidate = (
            QueueItem.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(pool=pool, topic=topic, doc_id=choice.doc_id, replica=0, done=False)
            .filter(Q(claimed_by__isnull=True) | Q(claimed_at__lt=expired))
            .order_by("pk")
            .first()
        )
        if candidate is not None:
            return candidate
    return None


@dataclass(frozen=True)
class TopicState:
    topic: Topic
    pool_size: int
    budget: int | None
    estimate: Estimate
    target: float

    @property
    def suggests_stop(self) -> bool:
        return self.estimate.suggests_stop(self.target)


def topic_states(pool: Pool) -> list[TopicState]:
    """Judged / relevant / estimated remaining per topic of an adaptive pool, for the organiser."""
    opts = options(pool)
    if opts is None:
        return []
    chosen = dict(AdaptiveTopic.objects.filter(pool=pool).values_list("topic_id", "chosen_by"))
    result = []
    for topic in pool.topics.order_by("topic_id", "pk"):
        with _lock:
            adjudicator = _folded(pool, topic, chosen.get(topic.pk, {}))
            estimate = adjudicator.estimate()
        result.append(
            TopicState(topic, adjudicator.size, adjudicator.budget, estimate, opts["target"])
        )
    return result


# --- Replays for the organiser ------------------------------------------------------------------


def campaign_labels(pool: Pool) -> dict[str, dict[str, int]]:
    """topic id -> doc id -> label: the campaign's current verdicts on the pool's topics (people's
    and imported, never a model's; of several verdicts on one pair, the latest), for replaying
    orders."""
    from campaigns.models import Judgment

    rows = (
        Judgment.objects.filter(campaign_id=pool.campaign_id, topic__in=pool.topics.all())
        .exclude(assessor__kind__in=(Assessor.Kind.MODEL, Assessor.Kind.FILLED))
        .order_by("judged_at", "pk")
        .values_list("topic__topic_id", "doc_id", "label")
    )
    labels: dict[str, dict[str, int]] = defaultdict(dict)
    for topic_id, doc_id, label in rows:
        labels[topic_id][doc_id] = label
    return dict(labels)


def pool_lists(pool: Pool) -> dict[str, dict[str, list[str]]]:
    """topic id -> run key -> the run's pooled documents, best first, for every topic."""
    return {topic.topic_id: topic_lists(pool, topic) for topic in pool.topics.order_by("topic_id")}


def replay_orders(
    lists: dict[str, dict[str, list[str]]],
    qrels: dict[str, dict[str, int]],
    *,
    orders: Sequence[str],
    judged_only: bool = True,
    relevant_from: int = 1,
    **options: Any,
) -> dict[str, list[TopicReplay]]:
    """Each order replayed over every topic that has labels, by an assessor answering from
    ``qrels``. ``judged_only`` cuts each run's list to the labelled documents (an unlabelled
    document's verdict is unknown); otherwise an unlabelled document counts as not relevant."""
    result: dict[str, list[TopicReplay]] = {}
    topics = [t for t in lists if qrels.get(t)]
    for order in orders:
        replays = []
        for topic_id in topics:
            labels = qrels[topic_id]
            runs = lists[topic_id]
            if judged_only:
                runs = {key: [d for d in ranked if d in labels] for key, ranked in runs.items()}
            replays.append(
                replay_topic(
                    topic_id, runs, labels, order=order, relevant_from=relevant_from, **options
                )
            )
        result[order] = replays
    return result
