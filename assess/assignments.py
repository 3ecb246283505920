"""Giving out the work: primary, shared-queue and overlap assignments, and moving work later.

Presentation order is a seeded shuffle per assessor, never pool, rank or run order: documents of
one topic in a shuffled order, topics one after another (or interleaved when asked). The seed and
the assessor both enter the shuffle, so two assessors of one topic see different orders and the
same call gives the same order again.
"""

from __future__ import annotations

import math
import random
import secrets
from collections import defaultdict
from collections.abc import Sequence

from django.db import transaction
from django.db.models import Max

from assess import gold, repeats
from assess.models import Assignment, AssignmentItem, HybridBudget, HybridPlan, QueueItem
from campaigns.models import Assessor, Campaign, Judgment, Membership, Topic
from pooling.models import Pool, PoolEntry


class AssignmentError(ValueError):
    """The assignment cannot be made as asked (a sentence for the organiser)."""


def _rng(*parts: object) -> random.Random:
    # A string seed is hashed with SHA-512 by random.Random: stable across processes and versions.
    return random.Random(":".join(str(part) for part in parts))


def pool_pairs(pool: Pool, topics: Sequence[Topic]) -> dict[int, list[str]]:
    """Topic pk -> the pool's documents to judge for it (sampled entries only), sorted."""
    pairs: dict[int, list[str]] = defaultdict(list)
    rows = (
        PoolEntry.objects.filter(pool=pool, topic__in=topics, sampled=True)
        .order_by("topic_id", "doc_id")
        .values_list("topic_id", "doc_id")
    )
    for topic_pk, doc_id in rows.iterator(chunk_size=5000):
        pairs[topic_pk].append(doc_id)
    return pairs


def presentation_order(
    pairs: dict[int, list[str]],
    topics: Sequence[Topic],
    *,
    seed: int,
    assessor: Assessor,
    interleave: bool,
) -> list[tuple[int, str]]:
    """The assessor's order over (topic pk, doc id) pairs."""
    if interleave:
        everything = [(t.pk, doc) for t in topics for doc in pairs.get(t.pk, [])]
        _rng(seed, assessor.pk, "all").shuffle(everything)
        return everything
    order: list[tuple[int, str]] = []
    for topic in topics:
        docs = list(pairs.get(topic.pk, []))
        _rng(seed, assessor.pk, topic.topic_id).shuffle(docs)
        order.extend((topic.pk, doc) for doc in docs)
    return order


def _assessor_for(campaign: Campaign, user) -> Assessor:
    role = campaign.role_of(user)
    if role != Membership.Role.ASSESSOR:
        raise AssignmentError(f"{user.get_username()} is not an assessor of {campaign.slug}.")
    return Assessor.objects.for_user(campaign, user)


def _check(campaign: Campaign, pool: Pool, topics: Sequence[Topic]) -> None:
    if pool.campaign_id != campaign.pk:
        raise AssignmentError("That pool belongs to another campaign.")
    if pool.status != Pool.Status.BUILT:
        state = pool.get_status_display().lower()
        raise AssignmentError(f"Pool v{pool.version} is {state}, not built.")
    if not topics:
        raise AssignmentError("Choose at least one topic.")
    foreign = [t.topic_id for t in topics if t.campaign_id != campaign.pk]
    if foreign:
        raise AssignmentError(f"Topics {', '.join(foreign)} are not in this campaign.")
    in_pool = set(pool.topics.values_list("pk", flat=True))
    missing = [t.topic_id for t in topics if t.pk not in in_pool]
    if missing:
        raise AssignmentError(f"Pool v{pool.version} has no topic {', '.join(missing)}.")


def _append_items(assignment: Assignment, order: list[tuple[int, str]]) -> int:
    """Add pairs at the end of the assessor's order, skipping pairs they already hold here, and
    link pairs the assessor already judged to that judgment (a judged document stays judged).
    Planted repeats and gold items (assess/repeats.py, assess/gold.py) are mixed in as the
    assignment asks. Returns how many of the pairs given were added."""
    held = set(assignment.items.values_list("topic_id", "doc_id"))
    _promote_gold_checks(assignment, order)
    start = assignment.items.aggregate(last=Max("position"))["last"] or 0
    earlier = Judgment.objects.filter(
        assessor=assignment.assessor, topic_id__in={t for t, _ in order}
    ).values_list("topic_id", "doc_id", "pk")
    judged = {(t, d): pk for t, d, pk in earlier}
    new = []
    for pair in order:
        if pair not in held:
            held.add(pair)
            new.append(pair)
    if assignment.repeat_rate:
        rng = _rng(assignment.seed, assignment.assessor_id, "repeats", start)
        planted = repeats.plant(new, rate=assignment.repeat_rate, rng=rng, judged=set(judged))
    else:
        planted = [(topic_pk, doc_id, False) for topic_pk, doc_id in new]
    mixed = _mix_gold(assignment, planted, new=new, held=held, start=start)
    items, again = [], []
    for topic_pk, doc_id, is_repeat, gold_pk, gold_only in mixed:
        start += 1
        item = AssignmentItem(
            assignment=assignment,
            topic_id=topic_pk,
            doc_id=doc_id,
            position=start,
            judgment_id=None if is_repeat or gold_only else judged.get((topic_pk, doc_id)),
            gold_id=gold_pk,
            gold_only=gold_only,
        )
        (again if is_repeat else items).append(item)
    AssignmentItem.objects.bulk_create(items, batch_size=2000)
    repeats.link_repeats(assignment, again)
    AssignmentItem.objects.bulk_create(again, batch_size=2000)
    return len(new)


def _promote_gold_checks(assignment: Assignment, order: list[tuple[int, str]]) -> None:
    """A gold-only check whose pair is now given as work, and is not judged yet, becomes that
    work (an ordinary gold item, its verdict a judgment). One already judged stays a check: its
    verdict was kept apart, and the pair is not served twice in one order."""
    checks = assignment.items.filter(
        gold_only=True, judgment__isnull=True, topic_id__in={t for t, _ in order}
    ).values_list("pk", "topic_id", "doc_id")
    wanted = set(order)
    promote = [pk for pk, t, d in checks if (t, d) in wanted]
    if promote:
        AssignmentItem.objects.filter(pk__in=promote).update(gold_only=False)


def _mix_gold(
    assignment: Assignment,
    planted: list[tuple[int, str, bool]],
    *,
    new: list[tuple[int, str]],
    held: set[tuple[int, str]],
    start: int,
) -> list[tuple[int, str, bool, int | None, bool]]:
    """``planted`` with the assignment's gold items mixed in (assess/gold.py)."""
    if assignment.gold_source_id is None or not new:
        return [(t, d, again, None, False) for t, d, again in planted]
    fresh = set(new)
    found = gold.candidates(assignment, {t for t, _ in new})
    # A pair the assignment already holds is not added again as a check.
    found = {pair: pk for pair, pk in found.items() if pair in fresh or pair not in held}
    rng = _rng(assignment.seed, assignment.assessor_id, "gold", start)
    k = gold.how_many(assignment, given=len(new))
    return gold.mix(planted, gold=found, k=k, rng=rng)


def ensure_queue(pool: Pool, topics: Sequence[Topic], *, seed: int) -> None:
    """Create the shared queue of each topic once (replica 0), in one seeded shuffled order."""
    pairs = pool_pairs(pool, topics)
    for topic in topics:
        if QueueItem.objects.filter(pool=pool, topic=topic, replica=0).exists():
            continue
        docs = list(pairs.get(topic.pk, []))
        _rng(seed, "queue", topic.topic_id).shuffle(docs)
        QueueItem.objects.bulk_create(
            [QueueItem(pool=pool, topic=topic, doc_id=doc, order=i) for i, doc in enumerate(docs)],
            batch_size=2000,
        )


def overlap_size(documents: int, fraction: float) -> int:
    """How many of a topic's ``documents`` an overlap of ``fraction`` doubles (rounded up)."""
    if fraction >= 1:
        return documents
    return min(documents, math.ceil(round(fraction * documents, 9)))


def _overlap_sample(docs: list[str], fraction: float, *, seed: int, topic: Topic) -> list[str]:
    if fraction >= 1:
        return list(docs)
    k = overlap_size(len(docs), fraction)
    return sorted(_rng(seed, "overlap", topic.topic_id).sample(sorted(docs), k))


@transaction.atomic
def assign(
    *,
    campaign: Campaign,
    pool: Pool,
    user,
    topics: Sequence[Topic],
    mode: str = Assignment.Mode.PRIMARY,
    seed: int | None = None,
    interleave: bool = False,
    overlap: float | None = None,
    overlap_topics: Sequence[Topic] | None = None,
    partner=None,
    by=None,
    repeat_rate: float = 0.0,
    gold_source: Assessor | None = None,
    gold_rate: float = 0.0,
    gold_count: int | None = None,
) -> list[Assignment]:
    """Give ``user`` the pool's documents for ``topics``.

    primary: every document, in the user's own order. queue: the user draws from the topics'
    shared queue. With ``overlap`` (a fraction, 1.0 = whole topics) a share of each topic's
    documents is also given for agreement: to ``partner`` in primary mode, or in queue mode as
    extra queue copies that go to a second assessor; ``overlap_topics`` limits the overlap to
    some of the topics. With ``repeat_rate``, that share of each primary or overlap assignment's
    documents comes back later in its order, unannounced (assess/repeats.py). With
    ``gold_source`` (an imported source of the campaign) and ``gold_rate`` (a share of the
    documents given) or ``gold_count`` (a number of pairs), that many of the source's labelled
    pairs are mixed silently into each primary or overlap assignment (assess/gold.py). Returns
    the assignments created."""
    topics = sorted(topics, key=lambda t: (t.position, t.topic_id))
    _check(campaign, pool, topics)
    if mode not in Assignment.Mode.values or mode == Assignment.Mode.OVERLAP:
        raise AssignmentError("The mode is primary or queue (overlap is added with a fraction).")
    try:
        repeats.check_rate(repeat_rate)
    except ValueError as exc:
        raise AssignmentError(str(exc)) from None
    if repeat_rate and mode == Assignment.Mode.QUEUE:
        raise AssignmentError(
            "A shared queue has no planted repeats: its documents are drawn one at a time."
        )
    if overlap is not None and not 0 < overlap <= 1:
        raise AssignmentError("The overlap is a fraction above 0 and at most 1.")
    _check_gold(campaign, mode, gold_source, gold_rate, gold_count)
    budgeted = sorted(
        HybridBudget.objects.filter(plan__pool=pool, topic__in=topics).values_list(
            "topic__topic_id", flat=True
        )
    )
    if budgeted and (mode != Assignment.Mode.QUEUE or overlap is not None):
        raise AssignmentError(
            f"Topics {', '.join(budgeted)} have a hybrid budget: they are judged through the "
            "shared queue, one document at a time as the routing chooses (no primary or overlap "
            "assignment)."
        )
    assessor = _assessor_for(campaign, user)
    seed = seed if seed is not None else secrets.randbelow(2**31)
    created: list[Assignment] = []
    if mode == Assignment.Mode.PRIMARY:
        taken = (
            Assignment.objects.filter(
                pool=pool, mode=Assignment.Mode.PRIMARY, active=True, topics__in=topics
            )
            .exclude(assessor=assessor)
            .values_list("topics__topic_id", "assessor__name")
        )
        clash = sorted({f"{t} ({name})" for t, name in taken if t in {x.topic_id for x in topics}})
        if clash:
            raise AssignmentError(
                f"Topics already have a primary assessor: {', '.join(clash)}. Reassign instead."
            )
    main = Assignment.objects.create(
        campaign=campaign,
        pool=pool,
        assessor=assessor,
        mode=mode,
        seed=seed,
        interleave=interleave,
        repeat_rate=repeat_rate,
        gold_source=gold_source,
        gold_rate=gold_rate,
        gold_count=gold_count,
        created_by=by,
        hybrid=mode == Assignment.Mode.QUEUE and HybridPlan.objects.filter(pool=pool).exists(),
    )
    main.topics.set(topics)
    created.append(main)
    pairs = pool_pairs(pool, topics)
    if mode == Assignment.Mode.PRIMARY:
        _append_items(
            main,
            presentation_order(pairs, topics, seed=seed, assessor=assessor, interleave=interleave),
        )
    else:
        ensure_queue(pool, topics, seed=seed)
    if overlap is not None:
        if overlap_topics is not None:
            wanted = {t.pk for t in overlap_topics}
            if not wanted <= {t.pk for t in topics}:
                raise AssignmentError("Overlap topics must be among the assigned topics.")
            topics = [t for t in topics if t.pk in wanted]
        chosen = {
            t.pk: _overlap_sample(pairs.get(t.pk, []), overlap, seed=seed, topic=t) for t in topics
        }
        if mode == Assignment.Mode.QUEUE:
            for topic in topics:
                for doc in chosen[topic.pk]:
                    first = QueueItem.objects.get(pool=pool, topic=topic, doc_id=doc, replica=0)
                    order = first.order
                    QueueItem.objects.get_or_create(
                        pool=pool, topic=topic, doc_id=doc, replica=1, defaults={"order": order}
                    )
        else:
            if partner is None:
                raise AssignmentError("An overlap in primary mode needs a partner assessor.")
            second = _assessor_for(campaign, partner)
            created.append(
                add_overlap(
                    primary=main,
                    topics=topics,
                    partner=second,
                    fraction=overlap,
                    by=by,
                    pairs=pairs,
                )
            )
    return created


def _check_gold(
    campaign: Campaign,
    mode: str,
    source: Assessor | None,
    rate: float,
    count: int | None,
) -> None:
    try:
        gold.check_rate(rate)
    except ValueError as exc:
        raise AssignmentError(str(exc)) from None
    if count is not None and count < 0:
        raise AssignmentError("The number of gold documents is a whole number, 0 or more.")
    if rate and count is not None:
        raise AssignmentError("Give a gold rate or a number of gold documents, not both.")
    if source is None:
        if rate or count:
            raise AssignmentError(
                "Gold documents need a gold source: an imported qrels source of the campaign."
            )
        return
    if source.campaign_id != campaign.pk or source.kind != Assessor.Kind.IMPORTED:
        raise AssignmentError(
            f"The gold source {source.name!r} is not an imported qrels source of this campaign."
        )
    if not rate and not count:
        raise AssignmentError("A gold source needs a gold rate or a number of gold documents.")
    if mode == Assignment.Mode.QUEUE:
        raise AssignmentError(
            "A shared queue has no gold documents: its documents are drawn one at a time."
        )


@transaction.atomic
def add_overlap(
    *,
    primary: Assignment,
    topics: Sequence[Topic],
    partner: Assessor,
    fraction: float,
    by=None,
    pairs: dict[int, list[str]] | None = None,
) -> Assignment:
    """Give ``partner`` a ``fraction`` of the documents of ``topics`` that ``primary`` (a
    primary assignment) holds, for agreement: an overlap assignment with the primary's seed,
    interleaving and repeat rate, so the sample is the one ``assign(overlap=...)`` draws with
    that seed. Documents the partner still has open elsewhere are not given again; documents
    they already judged arrive judged. ``pairs`` (topic pk -> pooled documents) when the caller
    has read them."""
    if primary.mode != Assignment.Mode.PRIMARY:
        raise AssignmentError("An overlap doubles primary work.")
    if partner.pk == primary.assessor_id:
        raise AssignmentError("The overlap partner must be another assessor.")
    if not 0 < fraction <= 1:
        raise AssignmentError("The overlap is a fraction above 0 and at most 1.")
    topics = sorted(topics, key=lambda t: (t.position, t.topic_id))
    if pairs is None:
        pairs = pool_pairs(primary.pool, topics)
    chosen = {}
    for topic in topics:
        sample = _overlap_sample(pairs.get(topic.pk, []), fraction, seed=primary.seed, topic=topic)
        held = _open_pairs_held(partner, topic, sample)
        chosen[topic.pk] = [doc for doc in sample if doc not in held]
    copy = Assignment.objects.create(
        campaign=primary.campaign,
        pool=primary.pool,
        assessor=partner,
        mode=Assignment.Mode.OVERLAP,
        seed=primary.seed,
        interleave=primary.interleave,
        overlap_fraction=fraction,
        partner=primary.assessor,
        repeat_rate=primary.repeat_rate,
        gold_source=primary.gold_source,
        gold_rate=primary.gold_rate,
        gold_count=primary.gold_count,
        created_by=by,
    )
    copy.topics.set(topics)
    _append_items(
        copy,
        presentation_order(
            chosen, topics, seed=primary.seed, assessor=partner, interleave=primary.interleave
        ),
    )
    return copy


@transaction.atomic
def reassign(*, assignment: Assignment, topics: Sequence[Topic], to_user, by=None) -> Assignment:
    """Move the unjudged documents of ``topics`` from ``assignment`` to another assessor.

    Judged documents stay where they are (with their judgments); the moved ones are withdrawn
    from the first assessor (never served to them again) and appended to the second's order."""
    campaign = assignment.campaign
    target = _assessor_for(campaign, to_user)
    if target == assignment.assessor:
        raise AssignmentError("Choose another assessor to reassign to.")
    topic_pks = [t.pk for t in topics]
    # Locked, so a verdict being written on one of these items either commits first (PostgreSQL
    # then re-reads the row and leaves the judged item out) or waits and finds it withdrawn: a
    # document is never both judged by the first assessor and handed to the second.
    open_here = (
        assignment.items.select_for_update(of=("self",))
        .filter(topic_id__in=topic_pks, judgment__isnull=True, withdrawn=False)
        .order_by("position")
    )
    # Gold-only checks (assess/gold.py) are not work: they leave with the topic, never handed on.
    moving = list(open_here.filter(gold_only=False).values_list("pk", "topic_id", "doc_id"))
    AssignmentItem.objects.filter(pk__in=list(open_here.values_list("pk", flat=True))).update(
        withdrawn=True
    )
    if assignment.mode == Assignment.Mode.QUEUE:
        # Queue work is not owned: release the first assessor's claims for the others to take.
        QueueItem.objects.filter(
            pool=assignment.pool, topic_id__in=topic_pks, claimed_by=assignment.assessor, done=False
        ).update(claimed_by=None, claimed_at=None)
        destination = Assignment.objects.filter(
            pool=assignment.pool, assessor=target, mode=Assignment.Mode.QUEUE, active=True
        ).first() or Assignment.objects.create(
            campaign=campaign,
            pool=assignment.pool,
            assessor=target,
            mode=Assignment.Mode.QUEUE,
            seed=assignment.seed,
            created_by=by,
            hybrid=assignment.hybrid,
        )
        destination.topics.add(*topics)
        _drop_emptied_topics(assignment, topics)
        return destination
    destination = Assignment.objects.filter(
        pool=assignment.pool, assessor=target, mode=assignment.mode, active=True
    ).first() or Assignment.objects.create(
        campaign=campaign,
        pool=assignment.pool,
        assessor=target,
        mode=assignment.mode,
        seed=assignment.seed,
        interleave=assignment.interleave,
        overlap_fraction=assignment.overlap_fraction,
        partner=assignment.partner,
        created_by=by,
    )
    destination.topics.add(*topics)
    pairs: dict[int, list[str]] = defaultdict(list)
    for _, topic_pk, doc_id in moving:
        pairs[topic_pk].append(doc_id)
    ordered = sorted(topics, key=lambda t: (t.position, t.topic_id))
    _append_items(
        destination,
        presentation_order(
            pairs,
            ordered,
            seed=destination.seed,
            assessor=target,
            interleave=destination.interleave,
        ),
    )
    # Pairs the destination held before and lost to an earlier move (A -> B -> A) are already
    # in its order, withdrawn: open them again where they were.
    for topic_pk, doc_ids in pairs.items():
        AssignmentItem.objects.filter(
            assignment=destination,
            topic_id=topic_pk,
            doc_id__in=doc_ids,
            withdrawn=True,
            judgment__isnull=True,
        ).update(withdrawn=False)
    _drop_emptied_topics(assignment, topics)
    return destination


def _drop_emptied_topics(assignment: Assignment, topics: Sequence[Topic]) -> None:
    """A topic stays on an assignment while it holds judged work there."""
    kept = set(
        assignment.items.filter(withdrawn=False, topic__in=topics).values_list(
            "topic_id", flat=True
        )
    )
    assignment.topics.remove(*[t for t in topics if t.pk not in kept])


# --- Moving work mid-campaign (the organiser workspace) -------------------------------------------


def _give(assignment: Assignment, topic: Topic, doc_ids: Sequence[str]) -> None:
    """Put ``doc_ids`` of ``topic`` in the assignment's order: a pair it held before and lost to
    an earlier move is served again from where it was; the others are appended in the assessor's
    own shuffled order (a pair the assessor already judged arrives linked to that judgment)."""
    wanted = set(doc_ids)
    revived = AssignmentItem.objects.filter(
        assignment=assignment,
        topic=topic,
        doc_id__in=wanted,
        withdrawn=True,
        judgment__isnull=True,
    )
    back = set(revived.values_list("doc_id", flat=True))
    revived.update(withdrawn=False)
    fresh = [doc for doc in doc_ids if doc not in back]
    if fresh:
        _append_items(
            assignment,
            presentation_order(
                {topic.pk: fresh},
                [topic],
                seed=assignment.seed,
                assessor=assignment.assessor,
                interleave=False,
            ),
        )
    _link_judged(assignment, topic, wanted)
    assignment.topics.add(topic)


def _link_judged(assignment: Assignment, topic: Topic, doc_ids: set[str]) -> None:
    """Open items of pairs the assessor has already judged carry that judgment: judged stays
    judged, and is not served as new work."""
    verdicts = Judgment.objects.filter(
        assessor_id=assignment.assessor_id, topic=topic, doc_id__in=doc_ids
    ).values_list("doc_id", "pk")
    for doc_id, judgment_pk in verdicts:
        AssignmentItem.objects.filter(
            assignment=assignment, topic=topic, doc_id=doc_id, judgment__isnull=True
        ).update(judgment_id=judgment_pk, withdrawn=False)


def _open_pairs_held(assessor: Assessor, topic: Topic, doc_ids: Sequence[str]) -> set[str]:
    """The documents of ``topic`` among ``doc_ids`` that ``assessor`` still has to judge in an
    active assignment (an overlap copy, say): giving them again would serve them twice."""
    return set(
        AssignmentItem.objects.filter(
            assignment__assessor=assessor,
            assignment__active=True,
            topic=topic,
            doc_id__in=list(doc_ids),
            withdrawn=False,
            judgment__isnull=True,
            gold_only=False,
        ).values_list("doc_id", flat=True)
    )


@transaction.atomic
def end_assignment(*, assignment: Assignment) -> int:
    """Stop an assignment: its unjudged documents are withdrawn (never served to its assessor
    again) and its queue claims released for the others; every judgment stays, linked to its
    item. Returns how many documents were withdrawn (0 if it had already ended)."""
    locked = Assignment.objects.select_for_update(of=("self",)).filter(
        pk=assignment.pk, active=True
    )
    if not locked.exists():
        return 0
    open_items = AssignmentItem.objects.filter(
        assignment=assignment, judgment__isnull=True, withdrawn=False
    )
    claims = [pk for pk in open_items.values_list("queue_item_id", flat=True) if pk is not None]
    withdrawn = open_items.update(withdrawn=True)
    QueueItem.objects.filter(pk__in=claims, claimed_by=assignment.assessor, done=False).update(
        claimed_by=None, claimed_at=None
    )
    locked.update(active=False)
    assignment.active = False
    return withdrawn


@transaction.atomic
def reassign_topic(*, pool: Pool, topic: Topic, from_user, to_user, by=None) -> int:
    """Move everything ``from_user`` still has to judge of ``topic`` in ``pool`` to ``to_user``
    (with :func:`reassign`, once per assignment holding the topic). Judged documents stay with
    their judgments. Refused (AssignmentError) when ``to_user`` would be given a document they
    already have to judge elsewhere (it would be served twice) or the overlap copy of their own
    work. Returns the number of documents moved (a shared queue moves its topic, not documents).
    """
    campaign = pool.campaign
    _check(campaign, pool, [topic])
    source = _assessor_for(campaign, from_user)
    target = _assessor_for(campaign, to_user)
    if source == target:
        raise AssignmentError("Choose another assessor to move the work to.")
    assignments = list(
        Assignment.objects.select_for_update(of=("self",))
        .filter(pool=pool, assessor=source, active=True, topics=topic)
        .order_by("pk")
    )
    moving: dict[int, list[str]] = {}
    for assignment in assignments:
        if assignment.mode == Assignment.Mode.OVERLAP and assignment.partner_id == target.pk:
            raise AssignmentError(
                f"{source.name}'s overlap on topic {topic.topic_id} doubles {target.name}'s own "
                "work: give it to a third assessor."
            )
        moving[assignment.pk] = list(
            assignment.items.filter(
                topic=topic, judgment__isnull=True, withdrawn=False, gold_only=False
            )
            .order_by("position")
            .values_list("doc_id", flat=True)
        )
    if not any(moving.values()) and not any(a.mode == Assignment.Mode.QUEUE for a in assignments):
        raise AssignmentError(
            f"{source.name} has nothing left to judge in topic {topic.topic_id} of pool "
            f"v{pool.version}."
        )
    clash = _open_pairs_held(target, topic, [d for docs in moving.values() for d in docs])
    if clash:
        raise AssignmentError(
            f"{target.name} already has {len(clash)} of these documents to judge (an overlap "
            f"copy): moving them would serve them twice. Choose another assessor, or rebalance."
        )
    moved = 0
    for assignment in assignments:
        reassign(assignment=assignment, topics=[topic], to_user=to_user, by=by)
        moved += len(moving[assignment.pk])
    return moved


@transaction.atomic
def rebalance(*, pool: Pool, topic: Topic, users: Sequence, by=None) -> dict[str, int]:
    """Deal the unjudged documents of ``topic``'s primary work in ``pool`` evenly across
    ``users`` (assessors of the campaign), moving as few documents as possible.

    The documents dealt are those of open items (unjudged, not withdrawn) of active primary
    assignments; overlap copies and shared queues are left as they are. Rules:

    - judged items stay where they are, with their judgments;
    - a document somebody has already judged is never served again to anyone who did not judge
      it: it goes to one of ``users`` who judged it (linked to that verdict, not served again),
      and if none did it stays with its holder;
    - a document goes to nobody who already has it to judge in another assignment (an overlap
      copy), so nothing is served twice;
    - every dealt document ends up open for exactly one assessor, and the counts dealt differ
      by at most one where those rules leave a choice.

    Returns assessor name -> documents of the topic they now have to judge in primary work.
    Raises AssignmentError when there is nothing to deal or a user is not an assessor.
    """
    from django.db.models import Count

    campaign = pool.campaign
    _check(campaign, pool, [topic])
    targets: list[Assessor] = []
    for user in users:
        assessor = _assessor_for(campaign, user)
        if assessor not in targets:
            targets.append(assessor)
    if not targets:
        raise AssignmentError("Choose at least one assessor to share the topic.")
    items = list(
        AssignmentItem.objects.select_for_update(of=("self",))
        .filter(
            assignment__pool=pool,
            assignment__mode=Assignment.Mode.PRIMARY,
            assignment__active=True,
            topic=topic,
            judgment__isnull=True,
            withdrawn=False,
            gold_only=False,  # a gold-only check stays with its assessor: it is not work
        )
        .select_related("assignment__assessor")
        .order_by("doc_id", "pk")
    )
    if not items:
        raise AssignmentError(
            f"Topic {topic.topic_id} has no unjudged documents in primary assignments of pool "
            f"v{pool.version} (shared queues balance themselves)."
        )
    holders: dict[str, list[AssignmentItem]] = defaultdict(list)
    for item in items:
        holders[item.doc_id].append(item)
    docs = sorted(holders)
    judged_by: dict[str, set[int]] = defaultdict(set)
    for doc_id, assessor_pk in Judgment.objects.filter(topic=topic, doc_id__in=docs).values_list(
        "doc_id", "assessor_id"
    ):
        judged_by[doc_id].add(assessor_pk)
    open_elsewhere = {
        (assessor_pk, doc_id)
        for assessor_pk, doc_id in AssignmentItem.objects.filter(
            assignment__assessor__in=targets,
            assignment__active=True,
            topic=topic,
            doc_id__in=docs,
            withdrawn=False,
            judgment__isnull=True,
        )
        .exclude(pk__in=[item.pk for item in items])
        .values_list("assignment__assessor_id", "doc_id")
    }
    _rng(pool.pk, "rebalance", topic.topic_id, len(docs)).shuffle(docs)

    load = {t.pk: 0 for t in targets}
    given: dict[int, list[str]] = defaultdict(list)
    withdraw: list[int] = []
    kept_judged: list[AssignmentItem] = []
    for doc in docs:
        held = holders[doc]
        holder_pks = {item.assignment.assessor_id for item in held}
        if judged_by[doc]:
            judges = [t for t in targets if t.pk in judged_by[doc]]
            if not judges:
                continue  # stays with its holder: nobody chosen may be served a judged document
            chosen = judges[0]
        else:
            eligible = [t for t in targets if (t.pk, doc) not in open_elsewhere]
            if not eligible:
                continue
            chosen = min(
                eligible,
                key=lambda t: (load[t.pk], t.pk not in holder_pks, targets.index(t)),
            )
            load[chosen.pk] += 1
        keep = next((item for item in held if item.assignment.assessor_id == chosen.pk), None)
        withdraw.extend(item.pk for item in held if item is not keep)
        if keep is None:
            given[chosen.pk].append(doc)
        elif chosen.pk in judged_by[doc]:
            kept_judged.append(keep)
    AssignmentItem.objects.filter(pk__in=withdraw, judgment__isnull=True).update(withdrawn=True)
    for item in kept_judged:
        _link_judged(item.assignment, topic, {item.doc_id})
    for target in targets:
        if not given[target.pk]:
            continue
        destination = (
            Assignment.objects.filter(
                pool=pool,
                assessor=target,
                mode=Assignment.Mode.PRIMARY,
                active=True,
                topics=topic,
            ).first()
            or Assignment.objects.filter(
                pool=pool, assessor=target, mode=Assignment.Mode.PRIMARY, active=True
            ).first()
            or Assignment.objects.create(
                campaign=campaign,
                pool=pool,
                assessor=target,
                mode=Assignment.Mode.PRIMARY,
                seed=secrets.randbelow(2**31),
                created_by=by,
            )
        )
        _give(destination, topic, sorted(given[target.pk]))
    for source in {item.assignment for item in items}:
        _drop_emptied_topics(source, [topic])
    counts = (
        AssignmentItem.objects.filter(
            assignment__pool=pool,
            assignment__mode=Assignment.Mode.PRIMARY,
            assignment__active=True,
            topic=topic,
            judgment__isnull=True,
            withdrawn=False,
        )
        .values_list("assignment__assessor__name")
        .annotate(n=Count("pk"))
    )
    return dict(sorted(counts))
