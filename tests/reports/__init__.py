"""Helpers for the report tests: judgments of imported sources written directly, seed 000's
two-judge tables, and twelve runs whose ordering swaps exactly one pair between two qrels."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from campaigns.models import Assessor, Campaign, Judgment, Topic
from campaigns.scales import SCALES
from tests.conftest import PASSWORD
from tests.factories import make_run, make_topics


def login(client, user):
    assert client.login(username=user.get_username(), password=PASSWORD)
    return client


def binary_campaign(slug: str = "seed000") -> Campaign:
    scale = SCALES["binary"]
    campaign = Campaign.objects.create(slug=slug, title="Seed 000", relevance_threshold=1)
    campaign.save_rubric(list(scale.labels))
    return campaign


def judge(
    campaign: Campaign,
    name: str,
    verdicts: Iterable[tuple[str, str, int]],
    *,
    kind: str = Assessor.Kind.IMPORTED,
) -> Assessor:
    """Record (topic id, doc id, label) verdicts as the current judgments of ``name``."""
    assessor, _ = Assessor.objects.get_or_create(
        campaign=campaign, name=name, defaults={"kind": kind}
    )
    topics = dict(Topic.objects.filter(campaign=campaign).values_list("topic_id", "pk"))
    Judgment.objects.bulk_create(
        Judgment(
            campaign=campaign,
            topic_id=topics[topic],
            doc_id=doc,
            assessor=assessor,
            label=label,
            source=Judgment.Source.IMPORTED,
        )
        for topic, doc, label in verdicts
    )
    return assessor


def two_judges(
    campaign: Campaign,
    table: Sequence[Sequence[int]],
    *,
    topics: Sequence[str] = ("1", "2", "3", "4"),
    names: tuple[str, str] = ("judge1", "judge2"),
) -> tuple[Assessor, Assessor]:
    """Seed 000's 2x2 tables as two imported judges: table[i][j] documents that the first judge
    labelled 1 - i (relevant first) and the second 1 - j, spread round-robin over ``topics``."""
    if not campaign.topics.exists():
        make_topics(campaign, topics)
    first, second = [], []
    n = 0
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            for _ in range(count):
                topic = topics[n % len(topics)]
                doc = f"doc{n:04d}"
                first.append((topic, doc, 1 - i))
                second.append((topic, doc, 1 - j))
                n += 1
    return judge(campaign, names[0], first), judge(campaign, names[1], second)


TEXTBOOK = [[300, 20], [10, 70]]  # pooled 0.776, Cohen 0.776
DIFFERENT_RATES = [[10, 60], [0, 330]]  # 70 vs 10 relevant: Cohen 0.216, pooled 0.167
RARE = [[10, 15], [15, 360]]  # same 92.5% agreement, kappa 0.36


def twelve_runs(campaign: Campaign, topic: str = "1") -> list[str]:
    """Twelve runs over one topic: run i puts the common relevant document "r" at rank i + 2
    and a document only it retrieves, "u<i>", at rank 1. Judged with only "r" relevant, AP
    orders them s00 > s01 > ... > s11; with "u01" relevant too, s01 jumps above s00 and
    nothing else changes order: exactly one swapped pair of 66."""
    if not campaign.topics.filter(topic_id=topic).exists():
        make_topics(campaign, [topic])
    tags = []
    for i in range(12):
        ranking = [f"u{i:02d}"] + [f"f{i:02d}-{k}" for k in range(i)] + ["r"]
        ranking += [f"g{i:02d}-{k}" for k in range(20 - len(ranking))]
        tag = f"s{i:02d}"
        make_run(campaign, tag, {topic: [(d, 100.0 - r) for r, d in enumerate(ranking)]})
        tags.append(tag)
    return tags


def write_qrels(path, rows: Iterable[tuple[str, str, int]]) -> str:
    path.write_text("".join(f"{t} 0 {d} {label}\n" for t, d, label in rows))
    return str(path)
