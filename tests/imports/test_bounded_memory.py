"""An import holds a chunk of text and a topic, and evaluation a batch of runs, not a whole file
or every run: measured with tracemalloc, which counts Python's own allocations exactly (the
peak RSS of real imports is in bench/memory.py)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from campaigns.models import Topic
from pooling.imports import import_runs
from pooling.models import RunTopic
from qrels import queries, runscores
from tests.factories import make_run

pytestmark = pytest.mark.django_db


def peak_of(work, **arguments) -> int:
    """The peak of Python allocations (bytes) while ``work(**arguments)`` runs."""
    tracemalloc.start()
    try:
        work(**arguments)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def write_run(path, topics: int, depth: int = 1000) -> int:
    rng = random.Random(11)
    with path.open("w") as out:
        for topic in range(1, topics + 1):
            scores = sorted((rng.random() * 30 for _ in range(depth)), reverse=True)
            out.write(
                "".join(
                    f"{topic}\tQ0\tdoc{rng.randrange(10**7):07d}x{rank}\t{rank}\t{score!r}\t"
                    f"{path.stem}\n"
                    for rank, score in enumerate(scores, 1)
                )
            )
    return path.stat().st_size


def test_importing_a_run_file_holds_a_chunk_and_a_topic_whatever_its_size(campaign, tmp_path):
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(t), position=t) for t in range(1, 401)
    )
    peaks, sizes = [], []
    for topics in (200, 400):
        path = tmp_path / f"run{topics}.txt"
        sizes.append(write_run(path, topics))
        peaks.append(peak_of(import_runs, campaign=campaign, sources=[(path.name, path)]))
        stored = RunTopic.objects.filter(run__campaign=campaign, run__tag=path.stem)
        assert stored.count() == topics
    assert sizes[1] > 18_000_000
    # The file twice as long needs no more memory (holding its text alone would be its size).
    assert peaks[1] < 1.3 * peaks[0], f"peaks {peaks} for files of {sizes} bytes"
    assert peaks[1] < sizes[1] / 2, f"peaks {peaks} for files of {sizes} bytes"


def test_evaluation_holds_a_batch_of_runs_not_every_run(campaign, monkeypatch):
    topics = [str(t) for t in range(1, 6)]
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=t, position=i) for i, t in enumerate(topics, 1)
    )
    rng = random.Random(5)
    docs = [f"d{i:05d}" for i in range(3000)]
    for number in range(30):
        make_run(
            campaign,
            f"run{number:02d}",
            {t: [(d, rng.random()) for d in rng.sample(docs, 1000)] for t in topics},
        )
    from campaigns.models import Assessor, Judgment

    nist = Assessor.objects.create(campaign=campaign, name="nist", kind=Assessor.Kind.IMPORTED)
    Judgment.objects.bulk_create(
        Judgment(campaign=campaign, topic=topic, doc_id=d, assessor=nist, label=rng.randint(0, 2))
        for topic in campaign.topics.all()
        for d in docs[:300]
    )
    every_run = peak_of(queries.stored_runs, runs=queries.current_runs(campaign))
    # About a tenth of the runs a batch (raising=False: so that this fails on old code by its
    # memory, not by a missing name).
    monkeypatch.setattr(queries, "BATCH_DOCUMENTS", 15_000)
    source = runscores.QrelsSource(policy="max")
    peak = peak_of(runscores.evaluation_report, campaign=campaign, source=source)
    assert peak < every_run / 2, f"peak {peak:,} bytes; every run held: {every_run:,}"
