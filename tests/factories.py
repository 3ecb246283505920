"""Building campaign data for tests in one obvious way: topics, documents, runs and a built pool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import transaction

from campaigns.models import Campaign, Document, Topic
from pooling.formats import trec_eval_order
from pooling.models import Pool, Run, RunTopic
from pooling.pools import create_pool


def make_topics(campaign: Campaign, ids: Sequence[str]) -> list[Topic]:
    return [
        Topic.objects.create(
            campaign=campaign,
            topic_id=topic_id,
            title=f"Topic {topic_id} title",
            description=f"What topic {topic_id} asks.",
            narrative=f"Relevant documents discuss topic {topic_id}.",
            position=i,
        )
        for i, topic_id in enumerate(ids, start=1)
    ]


def make_documents(campaign: Campaign, ids: Sequence[str], *, body: str = "") -> None:
    Document.objects.bulk_create(
        Document(
            campaign=campaign,
            doc_id=doc_id,
            title=f"Document {doc_id}",
            body=body or f"The text of document {doc_id}.",
            body_html=f"<p>{body or f'The text of document {doc_id}.'}</p>",
        )
        for doc_id in ids
    )


def make_run(
    campaign: Campaign, tag: str, ranking: Mapping[str, Sequence[tuple[str, float]]]
) -> Run:
    """A run from topic id -> [(doc id, score), ...] (stored in trec_eval order)."""
    topics = dict(campaign.topics.values_list("topic_id", "pk"))
    run = Run.objects.create(
        campaign=campaign,
        tag=tag,
        line_count=sum(len(docs) for docs in ranking.values()),
        topic_count=len(ranking),
    )
    for topic_id, docs in ranking.items():
        ordered = trec_eval_order(
            [d for d, _ in docs], [s for _, s in docs], list(range(1, len(docs) + 1))
        )
        RunTopic.objects.create(
            run=run,
            topic_id=topics[topic_id],
            docids="\n".join(ordered.docids),
            scores=RunTopic.pack_scores(ordered.scores),
            ranks=RunTopic.pack_ranks(ordered.ranks),
            length=len(ordered.docids),
        )
    return run


def make_pool(campaign: Campaign, *, depth: int = 10, **params) -> Pool:
    """A depth pool over all current runs, built in-process."""
    from pooljudge.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with transaction.atomic():
            pool = create_pool(
                campaign=campaign, strategy="depth", params={"depth": depth, **params}
            )
        # Outside a test transaction on_commit has fired; inside one, build now.
        pool.refresh_from_db()
        if pool.status != Pool.Status.BUILT:
            from pooling.pools import build_pool

            with transaction.atomic():
                build_pool(pool=pool)
            pool.refresh_from_db()
    finally:
        app.conf.task_always_eager = eager
    return pool


def small_campaign(campaign: Campaign, *, topics: Sequence[str] = ("301", "302"), docs: int = 6):
    """Two topics, documents d01..dNN, and two runs whose depth-``docs`` pool holds them all."""
    make_topics(campaign, topics)
    doc_ids = [f"d{i:02d}" for i in range(1, docs + 1)]
    make_documents(campaign, doc_ids)
    make_run(
        campaign,
        "SECRET-RUN-alpha",
        {t: [(d, 100.0 - i * 1.337) for i, d in enumerate(doc_ids)] for t in topics},
    )
    make_run(
        campaign,
        "SECRET-RUN-beta",
        {t: [(d, 7.25 + i * 0.5) for i, d in enumerate(doc_ids)] for t in topics},
    )
    return make_pool(campaign, depth=docs)


def judge(item, label: int = 1, *, note: str = ""):
    """Record ``label`` for an assignment item as its assessor would from a freshly loaded page
    (the item is reloaded first, so a revision carries the judgment's current version)."""
    import uuid

    from assess.judging import submit
    from campaigns.judgments import Timing

    item.refresh_from_db()
    judgment, _ = submit(
        item=item,
        label=label,
        rubric_version=item.assignment.campaign.current_rubric(),
        submission_id=uuid.uuid4(),
        expected_version=item.judgment.version if item.judgment else 0,
        timing=Timing(),
        note=note,
    )
    return judgment


# What a model's labels carry in the blinding crawls: none of it may reach an assessor.
MODEL_NAME = "umbrela-hidden-model"
MODEL_NOTE = "MODEL-PRIVATE-RATIONALE"
MODEL_ITERATION = "MODEL-ROUND"


def model_labels(
    pool: Pool,
    *,
    label: int = 2,
    name: str = MODEL_NAME,
    note: str = MODEL_NOTE,
    iteration: str = MODEL_ITERATION,
):
    """A model assessor's label on every pair of ``pool`` (as ``import_qrels --kind model``
    would leave them), each with a note and an iteration marker that must never reach an
    assessor: the model assessor."""
    from campaigns.models import Assessor, Judgment, JudgmentRevision

    campaign = pool.campaign
    model = Assessor.objects.create(campaign=campaign, name=name, kind=Assessor.Kind.MODEL)
    judgments = Judgment.objects.bulk_create(
        Judgment(
            campaign=campaign,
            topic_id=topic_pk,
            doc_id=doc_id,
            assessor=model,
            label=label,
            iteration=iteration,
            note=note,
            source=Judgment.Source.IMPORTED,
        )
        for topic_pk, doc_id in pool.entries.values_list("topic_id", "doc_id").order_by()
    )
    JudgmentRevision.objects.bulk_create(
        JudgmentRevision(judgment=j, version=1, label=j.label, iteration=j.iteration, note=j.note)
        for j in judgments
    )
    return model


# What a gold source carries in the blinding crawls: none of it may reach an assessor.
GOLD_NAME = "GOLD-SOURCE-NIST"
GOLD_ITERATION = "GOLD-ROUND"


def gold_qrels(campaign: Campaign, lines: Sequence[tuple[str, str, int]], *, name: str = GOLD_NAME):
    """Import ``lines`` (topic id, doc id, label) as the qrels of the imported source ``name``
    (as ``import_qrels … --assessor NAME`` does) and return that source, for gold items."""
    import io

    from campaigns.models import Assessor
    from qrels.imports import import_qrels

    text = "".join(f"{t} {GOLD_ITERATION} {d} {label}\n" for t, d, label in lines)
    import_qrels(
        campaign=campaign, source=io.BytesIO(text.encode()), name="gold.qrels", assessor=name
    )
    return Assessor.objects.get(campaign=campaign, name=name)
