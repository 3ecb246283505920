"""Runs stored before trec_eval's 32-bit precision decided the order are put in that order by a
data migration (pooling 0003); lists already in it are left alone."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from pooling.models import Run, RunTopic
from tests.factories import make_run, make_topics

pytestmark = pytest.mark.django_db

migration = importlib.import_module("pooling.migrations.0003_runtopic_trec_eval_float_order")


def test_a_list_stored_in_64_bit_order_is_put_in_trec_eval_order(campaign):
    (topic,) = make_topics(campaign, ["1"])
    run = Run.objects.create(campaign=campaign, tag="old", line_count=3, topic_count=1)
    # As the old importer stored it: by the scores as 64-bit floats.
    scores = [0.5, 0.40868028804263584, 0.4086802880426358]
    old = RunTopic.objects.create(
        run=run,
        topic=topic,
        docids="mmm\naaa\nzzz",
        scores=RunTopic.pack_scores(scores),
        ranks=RunTopic.pack_ranks([1, 2, 3]),
        length=3,
    )
    current = make_run(campaign, "new", {"1": [("b", 2.0), ("a", 1.0)]}).topics.get()
    untouched = bytes(current.scores)

    migration.reorder(apps, None)

    old.refresh_from_db()
    assert old.doc_list() == ["mmm", "zzz", "aaa"]
    assert old.score_list() == [0.5, 0.4086802880426358, 0.40868028804263584]
    assert old.rank_list() == [1, 3, 2]
    current.refresh_from_db()
    assert (current.doc_list(), bytes(current.scores)) == (["b", "a"], untouched)
