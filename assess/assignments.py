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

from assess.models import Assignment, AssignmentItem, QueueItem
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
    pairs: dict[int, list[str]], topics: Sequence[Topic], *, seed: int, assessor: Assessor,
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
    link pairs the assessor already judged to that judgment (a judged document stays judged)."""
    held = set(assignment.items.values_list("topic_id", "doc_id"))
    start = assignment.items.aggregate(last=Max("position"))["last"] or 0
    earlier = Judgment.objects.filter(
        assessor=assignment.assessor, topic_id__in={t for t, _ in order}
    ).values_list("topic_id", "doc_id", "pk")
    judged = {(t, d): pk for t, d, pk in earlier}
    items = []
    for topic_pk, doc_id in order:
        if (topic_pk, doc_id) in held:
            continue
        held.add((topic_pk, doc_id))
        start += 1
        items.append(
            AssignmentItem(
                assignment=assignment, topic_id=topic_pk, doc_id=doc_id, position=start,
                judgment_id=judged.get((topic_pk, doc_id)),
            )
        )
    AssignmentItem.objects.bulk_create(items, batch_size=2000)
    return len(items)


def _ensure_queue(pool: Pool, topics: Sequence[Topic], *, seed: int) -> None:
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


def _overlap_sample(docs: list[str], fraction: float, *, seed: int, topic: Topic) -> list[str]:
    if fraction >= 1:
        return list(docs)
    k = min(len(docs), math.ceil(round(fraction * len(docs), 9)))
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
) -> list[Assignment]:
    """Give ``user`` the pool's documents for ``topics``.

    primary: every document, in the user's own order. queue: the user draws from the topics'
    shared queue. With ``overlap`` (a fraction, 1.0 = whole topics) a share of each topic's
    documents is also given for agreement: to ``partner`` in primary mode, or in queue mode as
    extra queue copies that go to a second assessor; ``overlap_topics`` limits the overlap to
    some of the topics. Returns the assignments created."""
    topics = sorted(topics, key=lambda t: (t.position, t.topic_id))
    _check(campaign, pool, topics)
    if mode not in Assignment.Mode.values or mode == Assignment.Mode.OVERLAP:
        raise AssignmentError("The mode is primary or queue (overlap is added with a fraction).")
    if overlap is not None and not 0 < overlap <= 1:
        raise AssignmentError("The overlap is a fraction above 0 and at most 1.")
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
        campaign=campaign, pool=pool, assessor=assessor, mode=mode, seed=seed,
        interleave=interleave, created_by=by,
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
        _ensure_queue(pool, topics, seed=seed)
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
            if second == assessor:
                raise AssignmentError("The overlap partner must be another assessor.")
            copy = Assignment.objects.create(
                campaign=campaign, pool=pool, assessor=second, mode=Assignment.Mode.OVERLAP,
                seed=seed, interleave=interleave, overlap_fraction=overlap, partner=assessor,
                created_by=by,
            )
            copy.topics.set(topics)
            _append_items(
                copy,
                presentation_order(
                    chosen, topics, seed=seed, assessor=second, interleave=interleave
                ),
            )
            created.append(copy)
    return created


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
    moving = list(
        assignment.items.filter(topic_id__in=topic_pks, judgment__isnull=True, withdrawn=False)
        .order_by("position")
        .values_list("pk", "topic_id", "doc_id")
    )
    AssignmentItem.objects.filter(pk__in=[pk for pk, _, _ in moving]).update(withdrawn=True)
    if assignment.mode == Assignment.Mode.QUEUE:
        # Queue work is not owned: release the first assessor's claims for the others to take.
        QueueItem.objects.filter(
            pool=assignment.pool, topic_id__in=topic_pks, claimed_by=assignment.assessor, done=False
        ).update(claimed_by=None, claimed_at=None)
        destination = Assignment.objects.filter(
            pool=assignment.pool, assessor=target, mode=Assignment.Mode.QUEUE, active=True
        ).first() or Assignment.objects.create(
            campaign=campaign, pool=assignment.pool, assessor=target, mode=Assignment.Mode.QUEUE,
            seed=assignment.seed, created_by=by,
        )
        destination.topics.add(*topics)
        _drop_emptied_topics(assignment, topics)
        return destination
    destination = Assignment.objects.filter(
        pool=assignment.pool, assessor=target, mode=assignment.mode, active=True
    ).first() or Assignment.objects.create(
        campaign=campaign, pool=assignment.pool, assessor=target, mode=assignment.mode,
        seed=assignment.seed, interleave=assignment.interleave,
        overlap_fraction=assignment.overlap_fraction, partner=assignment.partner, created_by=by,
    )
    destination.topics.add(*topics)
    pairs: dict[int, list[str]] = defaultdict(list)
    for _, topic_pk, doc_id in moving:
        pairs[topic_pk].append(doc_id)
    ordered = sorted(topics, key=lambda t: (t.position, t.topic_id))
    _append_items(
        destination,
        presentation_order(
            pairs, ordered, seed=destination.seed, assessor=target,
            interleave=destination.interleave,
        ),
    )
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
