"""Adaptive order in the judging loop: a pool's shared queue served by ``pooling.adjudication``.

A pool built with ``params["adjudication"]`` (see :func:`normalise`) is judged in adaptive order:
when an assessor of a shared-queue assignment asks for a document, the topic's next document is
chosen then, from every judgment made so far, instead of read off the queue's shuffled order.
Primary and overlap assignments keep their own shuffled order (they list their documents up front).

Where the state lives
    The judgments themselves are the evidence: every verdict is a ``JudgmentRevision`` row (append
    only, ids increasing), so the order's state is a fold of the topic's revisions in id order,
    a revision of a label included. Each process keeps the folded :class:`Adjudicator` per pool and
    topic and reads only the revisions newer than the last it folded (one query). The database
    keeps what the judgments do not say: which run's turn chose each document
    (:class:`AdaptiveTopic`, locked with ``SELECT … FOR UPDATE`` while a document is chosen, so
    choices on one topic are made one at a time and two assessors never get one document).
    Documents claimed and not yet judged are passed to the order as pending.

Blinding: nothing here reaches the assessor but the document chosen; runs, turns and estimates stay
on the organiser's side.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

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


@dataclass
class _Folded:
    adjudicator: Adjudicator
    last_revision: int = 0


_cache: OrderedDict[tuple, _Folded] = OrderedDict()
# One lock for the process's folded states: a fold and a choice are a few hundred microseconds,
# and threads of one process (tests, a threaded server) must not fold one state twice.
_lock = threading.RLock()


def _key(pool: Pool, topic: Topic) -> tuple:
    # created_at makes a key unique even where a test database reuses primary keys.
    return (pool.pk, pool.created_at, topic.pk)


def _folded(pool: Pool, topic: Topic, chosen_by: dict[str, str]) -> Adjudicator:
    """The topic's adjudicator with every revision so far folded in (call under _lock)."""
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
    revisions = (
        JudgmentRevision.objects.filter(
            pk__gt=entry.last_revision,
            judgment__campaign_id=pool.campaign_id,
            judgment__topic_id=topic.pk,
            judgment__assessor__kind=Assessor.Kind.PERSON,
        )
        .order_by("pk")
        .values_list("pk", "judgment__doc_id", "label")
    )
    adjudicator = entry.adjudicator
    for pk, doc_id, label in revisions:
        if doc_id in adjudicator.index:
            adjudicator.judge(doc_id, label, run=chosen_by.get(doc_id))
        entry.last_revision = pk
    return adjudicator


def choose(*, pool: Pool, topic: Topic, claimed_since: datetime) -> Choice | None:
    """The topic's next document in adaptive order, recorded as chosen (call inside the claim's
    transaction: the topic's row stays locked until it commits). Documents claimed since
    ``claimed_since`` and not yet judged are someone else's."""
    from assess.models import QueueItem

    row, _ = AdaptiveTopic.objects.select_for_update().get_or_create(pool=pool, topic=topic)
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
        candidate = (
            QueueItem.objects.select_for_update(skip_locked=True)
            .filter(pool=pool, topic=topic, doc_id=choice.doc_id, replica=0, done=False)
            .filter(Q(claimed_by__isnull=True) | Q(claimed_at__lt=expired))
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
    and imported; of several verdicts on one pair, the latest), for replaying orders."""
    from campaigns.models import Judgment

    rows = (
        Judgment.objects.filter(campaign_id=pool.campaign_id, topic__in=pool.topics.all())
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
