"""A hybrid budget in a live campaign: people judge up to a budget of each topic's pairs, sent
first where a model assessor is least sure; the model's labels, calibrated on their verdicts,
fill the rest.

Setting the budget (:func:`set_budget`)
    The organiser names a model assessor of the campaign and, per topic of a built pool, a share
    (percent) or a count of the pool's pairs the model labelled. The topic is judged through the
    pool's shared queue: each queue entry is marked with the model's stratum of the pair (its
    label, or the tenth of its probability of relevance) and put in the routing's seeded order,
    and every shared-queue assignment of the pool is marked ``hybrid``. A hybrid topic cannot be
    given in primary or overlap mode: those list their documents up front, while the routing
    chooses each pair from the verdicts given so far.

Serving (:func:`claim_order`, read by ``assess.judging`` when it claims a queue document)
    One statement reads, per topic and stratum, the pairs not yet given out and the people's
    binary verdicts on those they judged; ``assess.routing.ranking`` (the simulation's own,
    ``qrels/hybrid.py``) ranks the strata, and the claim takes the first unclaimed entry of the
    best stratum it can. A topic whose budget is given out serves no more routed pairs: the rest
    are not shown to people. Pairs the model did not label cannot be filled, so they are always
    served, before the routed ones; topics without a budget are served in the queue's order.

Filling (:func:`fill`)
    Once a topic's budget is judged, its routed pairs nobody judged get a label from the
    topic's filler assessor (kind ``filled``, one per model): the calibrated binary verdict
    (``assess.routing.fill_verdict``: the people's majority on the topic's judged pairs of the
    stratum, else over all topics of the plan, else the model's own), written as the model's
    own grade when the calibration agrees with it, else as the grade on the verdict's side
    nearest the threshold. Filled labels are marked ``filled`` in the sidecar's source column
    and enter qrels only with ``include_filled`` (``--include-filled``), never by default.

Blinding: the order people are served in carries information about the model (under the
``uncertain`` and ``boundary`` routings, early documents are ones the model is unsure of). The
judging page never shows a pair's stratum, rank, budget or the model's label: nothing in an
assessor's responses comes from this module but which document is next.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.db import connection, transaction
from django.db.models import Case, IntegerField, Q, Value, When
from django.utils import timezone

from assess import routing
from assess.assignments import ensure_queue
from assess.models import Assignment, HybridBudget, HybridPlan, ModelCall, QueueItem
from campaigns.models import Assessor, Judgment, JudgmentRevision, Topic
from pooling.models import Pool, PoolEntry


class HybridError(ValueError):
    """The budget cannot be set or filled as asked (a sentence for the organiser)."""


@dataclass(frozen=True)
class Share:
    """A topic's budget: a percentage of its routed pairs, or a count of them."""

    percent: Decimal | None = None
    count: int | None = None

    @classmethod
    def parse(cls, text: str, *, where: str) -> Share:
        """``30%`` or ``30 %`` (a share), or ``12`` (a count). Raises HybridError naming
        ``where`` (the topic) and what is wrong."""
        raw = text.strip()
        if not raw:
            raise HybridError(f"{where}: the budget is empty; write a count (12) or a share (30%).")
        if raw.endswith("%"):
            try:
                percent = Decimal(raw[:-1].strip())
            except InvalidOperation:
                percent = None
            if percent is None or not percent.is_finite() or not 0 <= percent <= 100:
                raise HybridError(f"{where}: {raw!r} is not a share between 0% and 100%.")
            if percent != percent.quantize(Decimal("0.01")):
                raise HybridError(f"{where}: {raw!r} has more than two decimals.")
            return cls(percent=percent)
        if not raw.isdigit():
            raise HybridError(
                f"{where}: {raw!r} is neither a count (a whole number) nor a share (30%)."
            )
        return cls(count=int(raw))

    def allowed(self, routed: int) -> int:
        if self.count is not None:
            return min(self.count, routed)
        return routing.budget_count(self.percent, routed)

    def __str__(self) -> str:
        return f"{self.count}" if self.count is not None else f"{self.percent.normalize():f}%"


def model_strata(
    *, model: Assessor, topics: Sequence[Topic], threshold: int, probabilities: bool
) -> dict[tuple[int, str], int]:
    """(topic pk, doc id) -> the model's stratum, for the pairs it labelled (non-negative
    labels; with ``probabilities``, the pairs its calls returned label probabilities for)."""
    if probabilities:
        calls = ModelCall.objects.filter(
            config__assessor=model,
            topic__in=topics,
            status=ModelCall.Status.LABELLED,
            probabilities__isnull=False,
        ).values_list("topic_id", "doc_id", "probabilities")
        strata = {}
        for topic_pk, doc_id, given in calls.iterator(chunk_size=2000):
            if not given:
                continue
            relevant = sum(p for label, p in given.items() if int(label) >= threshold)
            strata[(topic_pk, doc_id)] = routing.stratum(
                min(1.0, max(0.0, relevant)), probabilities=True
            )
        return strata
    labels = Judgment.objects.filter(assessor=model, topic__in=topics, label__gte=0).values_list(
        "topic_id", "doc_id", "label"
    )
    return {
        (topic_pk, doc_id): routing.stratum(label, probabilities=False)
        for topic_pk, doc_id, label in labels.iterator(chunk_size=2000)
    }


@transaction.atomic
def set_budget(
    *,
    pool: Pool,
    model: Assessor,
    budgets: Mapping[Topic, Share],
    route: str = HybridPlan.Routing.UNCERTAIN,
    probabilities: bool = False,
    seed: int | None = None,
    by=None,
) -> HybridPlan:
    """Set (or change) the hybrid budget of ``pool``'s ``budgets`` topics, routed by ``model``.

    Topics of the pool left out of ``budgets`` keep a budget they had. Raises HybridError (and
    changes nothing) when the pool is not built, the assessor is not one of the campaign's
    models (or has no label probabilities when they are asked for), a topic is not in the pool,
    is given in primary or overlap mode, or was already filled."""
    campaign = pool.campaign
    if pool.status != Pool.Status.BUILT:
        raise HybridError(f"Pool v{pool.version} is {pool.get_status_display().lower()}.")
    if model.campaign_id != campaign.pk or model.kind != Assessor.Kind.MODEL:
        raise HybridError(f"{model.name!r} is not a model assessor of {campaign.slug}.")
    if route not in HybridPlan.Routing.values:
        raise HybridError(f"The routing is one of {', '.join(HybridPlan.Routing.values)}.")
    if not budgets:
        raise HybridError("Give a budget to at least one topic.")
    in_pool = set(pool.topics.values_list("pk", flat=True))
    missing = sorted(t.topic_id for t in budgets if t.pk not in in_pool)
    if missing:
        raise HybridError(f"Pool v{pool.version} has no topic {', '.join(missing)}.")
    listed = (
        Assignment.objects.filter(pool=pool, active=True, topics__in=list(budgets))
        .exclude(mode=Assignment.Mode.QUEUE)
        .values_list("topics__topic_id", "assessor__name", "topics__pk")
    )
    wanted = {t.pk for t in budgets}
    clash = sorted({f"{t} ({name})" for t, name, pk in listed if pk in wanted})
    if clash:
        raise HybridError(
            f"Topics given in primary or overlap mode: {', '.join(clash)}. A hybrid budget "
            "chooses each document from the verdicts so far, through the shared queue: end "
            "those assignments first."
        )
    plan = HybridPlan.objects.select_for_update().filter(pool=pool).first()
    if plan is not None:
        filled = sorted(
            b.topic.topic_id
            for b in plan.budgets.filter(topic__in=list(budgets), filled_at__isnull=False)
        )
        if filled:
            raise HybridError(
                f"Topics {', '.join(filled)} were filled already: their budget stays as it was "
                "judged."
            )
    threshold = campaign.relevance_threshold
    topics = sorted(budgets, key=lambda t: (t.position, t.topic_id))
    strata = model_strata(
        model=model, topics=topics, threshold=threshold, probabilities=probabilities
    )
    if not strata:
        what = "label probabilities (logprobs)" if probabilities else "labels"
        raise HybridError(
            f"{model.name!r} has no {what} on these topics: judge the pool with it first."
        )
    if plan is None:
        plan = HybridPlan(pool=pool)
    # Another model (or its probabilities instead of its labels) cuts other strata: a budget not
    # given again with it is dropped, not left routing by the old ones.
    new_strata = plan.pk is not None and (
        plan.model_id != model.pk or plan.probabilities != probabilities
    )
    plan.model = model
    plan.routing = route
    plan.probabilities = probabilities
    plan.threshold = threshold
    plan.seed = seed if seed is not None else (plan.seed or secrets.randbelow(2**31))
    plan.updated_by = by
    plan.save()

    ensure_queue(pool, topics, seed=plan.seed)
    pairs: dict[int, list[str]] = defaultdict(list)
    for topic_pk, doc_id in PoolEntry.objects.filter(
        pool=pool, topic__in=topics, sampled=True
    ).values_list("topic_id", "doc_id"):
        pairs[topic_pk].append(doc_id)
    for topic in topics:
        docs = pairs.get(topic.pk, [])
        routed = [d for d in docs if (topic.pk, d) in strata]
        unrouted = [d for d in docs if (topic.pk, d) not in strata]
        # The routing's seeded order (assess.routing.seeded_order, as the simulation's): routed
        # pairs first in it, the pairs the model did not label after them.
        order = routing.seeded_order(topic.topic_id, routed, seed=plan.seed)
        order += routing.seeded_order(topic.topic_id, unrouted, seed=plan.seed)
        items = list(QueueItem.objects.filter(pool=pool, topic=topic))
        rank = {doc: i for i, doc in enumerate(order)}
        for item in items:
            item.order = rank[item.doc_id]
            item.stratum = strata.get((topic.pk, item.doc_id))
        QueueItem.objects.bulk_update(items, ["order", "stratum"], batch_size=2000)
        share = budgets[topic]
        HybridBudget.objects.update_or_create(
            plan=plan,
            topic=topic,
            defaults={
                "percent": share.percent,
                "count": share.count,
                "routed": len(routed),
                "allowed": share.allowed(len(routed)),
            },
        )
    if new_strata:
        dropped = list(plan.budgets.exclude(topic__in=topics).values_list("topic_id", flat=True))
        QueueItem.objects.filter(pool=pool, topic_id__in=dropped).update(stratum=None)
        plan.budgets.filter(topic_id__in=dropped).delete()
    Assignment.objects.filter(pool=pool, mode=Assignment.Mode.QUEUE).update(hybrid=True)
    return plan


# --- Serving -------------------------------------------------------------------------------------

# Per topic of the assignment with a budget, and per stratum: routed pairs not yet given out
# (neither judged nor held by a live claim), and the people's binary verdicts (majority of the
# people's current labels, negative labels not verdicts) on the pairs of it they judged. One
# statement, the same SQL on every database; table names from the models, values parameters.
_STATE_SQL = f"""
SELECT q.topic_id, q.stratum, b.allowed, p.routing, p.threshold, p.probabilities,
    SUM(CASE WHEN q.done OR (q.claimed_by_id IS NOT NULL AND q.claimed_at >= %(expired)s)
        THEN 0 ELSE 1 END) AS left_n,
    SUM(CASE WHEN q.done AND 2 * v.relevant > v.votes THEN 1 ELSE 0 END) AS relevant_n,
    SUM(CASE WHEN q.done AND 2 * v.relevant < v.votes THEN 1 ELSE 0 END) AS not_relevant_n,
    COUNT(*) AS total_n
FROM {QueueItem._meta.db_table} q
JOIN {HybridPlan._meta.db_table} p ON p.pool_id = q.pool_id
JOIN {HybridBudget._meta.db_table} b ON b.plan_id = p.id AND b.topic_id = q.topic_id
LEFT JOIN (
    SELECT j.topic_id, j.doc_id, COUNT(*) AS votes,
        SUM(CASE WHEN j.label >= hp.threshold THEN 1 ELSE 0 END) AS relevant
    FROM {Judgment._meta.db_table} j
    JOIN {Assessor._meta.db_table} s ON s.id = j.assessor_id AND s.kind = %(person)s
    JOIN {HybridPlan._meta.db_table} hp ON hp.pool_id = %(pool)s
    WHERE j.campaign_id = %(campaign)s AND j.label >= 0 AND j.topic_id IN (
        SELECT at.topic_id FROM {Assignment.topics.through._meta.db_table} at
        WHERE at.assignment_id = %(assignment)s)
    GROUP BY j.topic_id, j.doc_id
) v ON v.topic_id = q.topic_id AND v.doc_id = q.doc_id
WHERE q.pool_id = %(pool)s AND q.replica = 0 AND q.stratum IS NOT NULL
  AND q.topic_id IN (SELECT at.topic_id FROM {Assignment.topics.through._meta.db_table} at
                     WHERE at.assignment_id = %(assignment)s)
GROUP BY q.topic_id, q.stratum, b.allowed, p.routing, p.threshold, p.probabilities
ORDER BY q.topic_id, q.stratum
"""  # noqa: S608


@dataclass
class TopicRoute:
    allowed: int  # routed pairs people may be sent to
    strata: dict[int, routing.Stratum]
    total: int = 0  # routed pairs

    @property
    def given(self) -> int:
        """Routed pairs given out to people (judged, or claimed)."""
        return self.total - sum(s.left for s in self.strata.values())


def _params(assignment: Assignment, *, expired: datetime) -> dict:
    return {
        "expired": expired,
        "person": Assessor.Kind.PERSON.value,
        "pool": assignment.pool_id,
        "campaign": assignment.campaign_id,
        "assignment": assignment.pk,
    }


def routes(assignment: Assignment, *, expired: datetime) -> tuple[HybridPlan | None, dict]:
    """Topic pk -> :class:`TopicRoute` for the assignment's topics with a budget, and the plan's
    routing, threshold and probabilities (one statement)."""
    with connection.cursor() as cursor:
        cursor.execute(_STATE_SQL, _params(assignment, expired=expired))
        return _routes_from(cursor.fetchall())


def _routes_from(rows) -> tuple[HybridPlan | None, dict[int, TopicRoute]]:
    plan = None
    found: dict[int, TopicRoute] = {}
    for topic_pk, s, allowed, route, threshold, probabilities, left, rel, not_rel, total in rows:
        if plan is None:
            plan = HybridPlan(routing=route, threshold=threshold, probabilities=bool(probabilities))
        entry = found.setdefault(topic_pk, TopicRoute(allowed=allowed, strata={}))
        entry.strata[s] = routing.Stratum(
            left=int(left), relevant=int(rel), not_relevant=int(not_rel)
        )
        entry.total += int(total)
    return plan, found


def claim_order(assignment: Assignment, *, expired: datetime) -> dict[str, list[int]]:
    """What the claim of the next queue document needs: three parallel lists (topic pk,
    stratum, rank) of the strata that may be served now, best rank first. A topic whose budget
    is given out has none (its routed pairs are not served); ranks come from
    ``assess.routing.ranking``."""
    return _order(*routes(assignment, expired=expired))


def _order(plan: HybridPlan | None, found: dict[int, TopicRoute]) -> dict[str, list[int]]:
    topics: list[int] = []
    strata: list[int] = []
    ranks: list[int] = []
    for topic_pk, route in found.items():
        if route.given >= route.allowed:
            continue
        ranked = routing.ranking(
            route.strata,
            routing=plan.routing,
            threshold=plan.threshold,
            probabilities=plan.probabilities,
        )
        for s, rank in ranked.items():
            topics.append(topic_pk)
            strata.append(s)
            ranks.append(rank)
    return {"hybrid_topics": topics, "hybrid_strata": strata, "hybrid_ranks": ranks}


# The same state, read by the statement that stores a verdict in a hybrid queue (PostgreSQL,
# assess.judging._submit_in_one_statement), so that the answer's claim needs no read of its own:
# the state as JSON rows, and what the verdict changes: the pair's topic and stratum, whether it
# was judged (its verdict counted) or given out before, the people's votes on it (labels >= 0,
# relevant ones) and this assessor's label, all as the statement found them (its own writes are
# not visible to it). answer_order() folds the new verdict in.
SUBMIT_STATE = f"""
    (SELECT json_agg(json_build_array(st.topic_id, st.stratum, st.allowed, st.routing,
        st.threshold, st.probabilities, st.left_n, st.relevant_n, st.not_relevant_n, st.total_n))
     FROM ({_STATE_SQL}) AS st),
    (SELECT json_build_array(hq.topic_id, hq.stratum, hq.done,
        CASE WHEN hq.done OR (hq.claimed_by_id IS NOT NULL AND hq.claimed_at >= %(expired)s)
            THEN 0 ELSE 1 END,
        (SELECT COUNT(*) FROM {Judgment._meta.db_table} hj
         JOIN {Assessor._meta.db_table} hs ON hs.id = hj.assessor_id AND hs.kind = %(person)s
         WHERE hj.topic_id = hq.topic_id AND hj.doc_id = hq.doc_id AND hj.label >= 0),
        (SELECT COUNT(*) FROM {Judgment._meta.db_table} hj
         JOIN {Assessor._meta.db_table} hs ON hs.id = hj.assessor_id AND hs.kind = %(person)s
         WHERE hj.topic_id = hq.topic_id AND hj.doc_id = hq.doc_id
           AND hj.label >= hp.threshold),
        (SELECT hj.label FROM {Judgment._meta.db_table} hj
         WHERE hj.assessor_id = %(assessor)s AND hj.topic_id = hq.topic_id
           AND hj.doc_id = hq.doc_id))
     FROM {QueueItem._meta.db_table} hq
     JOIN {HybridPlan._meta.db_table} hp ON hp.pool_id = hq.pool_id
     WHERE hq.id = %(hybrid_queue_item)s AND hq.replica = 0)"""  # noqa: S608


def submit_params(assignment: Assignment, *, queue_item: int, expired: datetime) -> dict:
    """The parameters SUBMIT_STATE adds to the verdict's statement."""
    return {**_params(assignment, expired=expired), "hybrid_queue_item": queue_item}


def answer_order(state, pair, *, label: int) -> dict[str, list[int]]:
    """:func:`claim_order` from SUBMIT_STATE's two values, with the verdict just stored
    (``label``) folded in: the pair is judged now, and its verdict is the majority of the
    people's votes with this assessor's earlier label replaced."""
    plan, found = _routes_from(state or [])
    if plan is None or not pair:
        return _order(plan, found)
    topic_pk, s, was_done, was_left, votes, relevant, mine = pair
    route = found.get(topic_pk)
    if route is None or s not in route.strata:
        return _order(plan, found)
    stratum = route.strata[s]
    threshold = plan.threshold
    if was_done:
        before = routing.majority(relevant, votes - relevant)
        if before is not None:
            if before:
                stratum.relevant -= 1
            else:
                stratum.not_relevant -= 1
    stratum.left -= was_left
    if mine is not None and mine >= 0:
        votes -= 1
        relevant -= int(mine >= threshold)
    if label >= 0:
        votes += 1
        relevant += int(label >= threshold)
    after = routing.majority(relevant, votes - relevant)
    if after is not None:
        if after:
            stratum.relevant += 1
        else:
            stratum.not_relevant += 1
    return _order(plan, found)


def order_candidates(candidates, order: dict[str, list[int]]):
    """The ORM form of the claim's hybrid order (assess.judging.claim_next): unrouted entries
    first, then routed entries of the strata ``order`` allows, by rank; others left out."""
    allowed = Q(stratum__isnull=True)
    whens = []
    for topic_pk, s, rank in zip(
        order["hybrid_topics"], order["hybrid_strata"], order["hybrid_ranks"], strict=True
    ):
        allowed |= Q(topic_id=topic_pk, stratum=s)
        whens.append(When(topic_id=topic_pk, stratum=s, then=Value(rank)))
    rank = Case(*whens, default=Value(-1), output_field=IntegerField())
    return candidates.filter(allowed).annotate(hybrid_rank=rank).order_by("hybrid_rank")


# --- Filling -------------------------------------------------------------------------------------


@dataclass
class TopicFill:
    topic: str
    judged: int  # routed pairs people judged
    filled: int  # labels written by the filler (new or changed)
    unchanged: int  # filled before with the same label
    flipped: int  # filled pairs whose calibrated verdict differs from the model's own
    unfillable: int  # pairs the model did not label and nobody judged


def filler_for(plan: HybridPlan) -> Assessor:
    """The filled labels' assessor of ``plan``'s model (kind ``filled``), created once."""
    name = f"{plan.model.name} (filled)"
    found = Assessor.objects.filter(campaign=plan.pool.campaign, name=name).first()
    if found is not None:
        if found.kind != Assessor.Kind.FILLED:
            raise HybridError(
                f"{name!r} is an assessor of kind {found.kind}; rename it to fill with "
                f"{plan.model.name!r}."
            )
        return found
    return Assessor.objects.create(
        campaign=plan.pool.campaign,
        name=name,
        kind=Assessor.Kind.FILLED,
        details={"model": plan.model.name},
    )


def _grade(verdict: int, model_label: int, *, threshold: int, scale: list[int]) -> int:
    """The grade written for a calibrated binary verdict: the model's own when it agrees, else
    the grade on the verdict's side nearest the threshold."""
    if int(model_label >= threshold) == verdict:
        return model_label
    if verdict:
        return min(v for v in scale if v >= threshold)
    below = [v for v in scale if 0 <= v < threshold]
    return max(below) if below else 0


@transaction.atomic
def fill(*, pool: Pool, topics: Sequence[Topic] | None = None, by=None) -> list[TopicFill]:
    """Fill the budget topics (all of the plan's, or ``topics``) whose budget is judged: every
    routed pair no person judged gets the calibrated label of the plan's filler assessor.
    Raises HybridError, nothing written, naming the topics whose budget is not judged yet."""
    plan = HybridPlan.objects.select_for_update().filter(pool=pool).first()
    if plan is None:
        raise HybridError(f"Pool v{pool.version} has no hybrid budget.")
    budgets = list(plan.budgets.select_related("topic").order_by("topic__position"))
    if topics is not None:
        wanted = {t.pk for t in topics}
        unknown = sorted(t.topic_id for t in topics if t.pk not in {b.topic_id for b in budgets})
        if unknown:
            raise HybridError(f"Topics {', '.join(unknown)} have no hybrid budget in this pool.")
        budgets = [b for b in budgets if b.topic_id in wanted]
    threshold = plan.threshold
    campaign = pool.campaign
    items = QueueItem.objects.filter(pool=pool, replica=0, topic__in=[b.topic for b in budgets])
    person_votes: dict[tuple[int, str], list[int]] = defaultdict(list)
    for topic_pk, doc_id, label in Judgment.objects.filter(
        campaign=campaign,
        topic__in=[b.topic for b in budgets],
        assessor__kind=Assessor.Kind.PERSON,
        label__gte=0,
    ).values_list("topic_id", "doc_id", "label"):
        person_votes[(topic_pk, doc_id)].append(int(label >= threshold))
    by_topic: dict[int, list[tuple[str, int | None, bool]]] = defaultdict(list)
    for topic_pk, doc_id, s, done in items.values_list("topic_id", "doc_id", "stratum", "done"):
        by_topic[topic_pk].append((doc_id, s, done))
    not_ready = []
    counts: dict[int, dict[int, list[int]]] = {}
    for budget in budgets:
        per_stratum: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        judged = 0
        for doc_id, s, done in by_topic[budget.topic_id]:
            votes = person_votes.get((budget.topic_id, doc_id))
            if s is None or not done or not votes:
                continue
            judged += 1
            verdict = routing.majority(sum(votes), len(votes) - sum(votes))
            if verdict is not None:
                per_stratum[s][1 - verdict] += 1
        counts[budget.topic_id] = per_stratum
        if judged < budget.allowed:
            not_ready.append(f"{budget.topic.topic_id} ({judged} of {budget.allowed} judged)")
    if not_ready:
        raise HybridError(
            "The budget is not judged yet for topics " + ", ".join(not_ready) + ": nothing filled."
        )
    # The majority over all of the plan's topics, for a stratum a topic's people did not judge.
    everywhere: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    all_budgets = budgets if topics is None else list(plan.budgets.all())
    if topics is not None:
        for other in all_budgets:
            if other.topic_id not in counts:
                counts[other.topic_id] = _judged_counts(plan, other.topic_id, threshold)
    for per_stratum in counts.values():
        for s, (relevant, not_relevant) in per_stratum.items():
            everywhere[s][0] += relevant
            everywhere[s][1] += not_relevant
    model_labels = {
        (topic_pk, doc_id): label
        for topic_pk, doc_id, label in Judgment.objects.filter(
            assessor=plan.model, topic__in=[b.topic for b in budgets], label__gte=0
        ).values_list("topic_id", "doc_id", "label")
    }
    rubric = campaign.current_rubric()
    scale = sorted(rubric.labels.values_list("value", flat=True)) if rubric else [0, 1]
    filler = filler_for(plan)
    current = {
        (topic_pk, doc_id): (pk, label, version)
        for pk, topic_pk, doc_id, label, version in Judgment.objects.filter(
            assessor=filler
        ).values_list("pk", "topic_id", "doc_id", "label", "version")
    }
    now = timezone.now()
    new: list[Judgment] = []
    revised: list[tuple[int, int, int]] = []
    report = []
    for budget in budgets:
        topic_pk = budget.topic_id
        result = TopicFill(budget.topic.topic_id, 0, 0, 0, 0, 0)
        for doc_id, s, _done in by_topic[topic_pk]:
            if person_votes.get((topic_pk, doc_id)):
                result.judged += s is not None
                continue
            if s is None or (topic_pk, doc_id) not in model_labels:
                result.unfillable += 1
                continue
            verdict = routing.fill_verdict(
                s,
                topic=tuple(counts[topic_pk].get(s, (0, 0))),
                everywhere=tuple(everywhere.get(s, (0, 0))),
                threshold=threshold,
                probabilities=plan.probabilities,
            )
            own = routing.model_verdict(s, threshold=threshold, probabilities=plan.probabilities)
            result.flipped += verdict != own
            label = _grade(
                verdict, model_labels[(topic_pk, doc_id)], threshold=threshold, scale=scale
            )
            known = current.get((topic_pk, doc_id))
            if known is None:
                new.append(
                    Judgment(
                        campaign=campaign,
                        topic_id=topic_pk,
                        doc_id=doc_id,
                        assessor=filler,
                        label=label,
                        rubric_version=rubric,
                        source=Judgment.Source.FILLED,
                        judged_at=now,
                        first_judged_at=now,
                    )
                )
                result.filled += 1
            elif known[1] == label:
                result.unchanged += 1
            else:
                revised.append((known[0], label, known[2] + 1))
                result.filled += 1
        report.append(result)
    Judgment.objects.bulk_create(new, batch_size=2000)
    for pk, label, version in revised:
        Judgment.objects.filter(pk=pk).update(label=label, version=version, judged_at=now)
    JudgmentRevision.objects.bulk_create(
        [
            JudgmentRevision(
                judgment=j, version=1, label=j.label, rubric_version=rubric, judged_at=now, by=by
            )
            for j in new
        ]
        + [
            JudgmentRevision(
                judgment_id=pk, version=v, label=label, rubric_version=rubric, judged_at=now, by=by
            )
            for pk, label, v in revised
        ],
        batch_size=2000,
    )
    HybridBudget.objects.filter(pk__in=[b.pk for b in budgets]).update(filled_at=now)
    return report


def _judged_counts(plan: HybridPlan, topic_pk: int, threshold: int) -> dict[int, list[int]]:
    """Stratum -> [relevant, not relevant] of the people's verdicts on a topic's judged routed
    pairs (for the majority over every topic when only some are filled)."""
    votes: dict[str, list[int]] = defaultdict(list)
    for doc_id, label in Judgment.objects.filter(
        topic_id=topic_pk, assessor__kind=Assessor.Kind.PERSON, label__gte=0
    ).values_list("doc_id", "label"):
        votes[doc_id].append(int(label >= threshold))
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for doc_id, s in QueueItem.objects.filter(
        pool=plan.pool, topic_id=topic_pk, replica=0, done=True, stratum__isnull=False
    ).values_list("doc_id", "stratum"):
        given = votes.get(doc_id)
        verdict = routing.majority(sum(given), len(given) - sum(given)) if given else None
        if verdict is not None:
            counts[s][1 - verdict] += 1
    return counts


# --- The organiser's view of it -----------------------------------------------------------------


@dataclass
class BudgetRow:
    topic: Topic
    budget: HybridBudget | None
    pairs: int  # the pool's pairs of the topic
    judged: int  # routed pairs people judged
    filled: int  # pairs with a filled label

    @property
    def ready(self) -> bool:
        return self.budget is not None and self.judged >= self.budget.allowed

    @property
    def share(self) -> str:
        if self.budget is None:
            return ""
        return str(Share(percent=self.budget.percent, count=self.budget.count))


def budget_rows(pool: Pool) -> list[BudgetRow]:
    """Per topic of the pool: its budget (if any), routed pairs judged, filled labels."""
    plan = HybridPlan.objects.filter(pool=pool).select_related("model").first()
    budgets = {b.topic_id: b for b in plan.budgets.all()} if plan else {}
    pairs = defaultdict(int)
    for topic_pk in PoolEntry.objects.filter(pool=pool, sampled=True).values_list(
        "topic_id", flat=True
    ):
        pairs[topic_pk] += 1
    judged = defaultdict(int)
    for topic_pk in QueueItem.objects.filter(
        pool=pool, replica=0, done=True, stratum__isnull=False
    ).values_list("topic_id", flat=True):
        judged[topic_pk] += 1
    filled = defaultdict(int)
    if plan is not None:
        for topic_pk in Judgment.objects.filter(
            assessor__campaign=pool.campaign,
            assessor__kind=Assessor.Kind.FILLED,
            assessor__name=f"{plan.model.name} (filled)",
        ).values_list("topic_id", flat=True):
            filled[topic_pk] += 1
    return [
        BudgetRow(t, budgets.get(t.pk), pairs[t.pk], judged[t.pk], filled[t.pk])
        for t in pool.topics.order_by("position", "topic_id")
    ]
