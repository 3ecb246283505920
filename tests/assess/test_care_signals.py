"""Care signals (issue 19, assess/care.py): figures per assessor equal to a hand count, flags
only with evidence, and shown on the progress page (never blocking anyone)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from assess import care
from campaigns.models import Assessor, Judgment
from tests.factories import make_documents, make_topics

pytestmark = pytest.mark.django_db


def test_the_reading_floor_and_runs():
    assert care.reading_floor(0) == care.MIN_SECONDS
    assert care.reading_floor(830) == pytest.approx(10.0)
    assert care.reading_floor(50_000) == pytest.approx(1000 / 83)  # the first 1,000 characters
    assert care.longest_run([0, 0, 1, 1, 1, 0]) == (3, 1)
    assert care.longest_run([]) == (0, None)
    assert care.expected_longest_run(1, 0.5) is None
    # Schilling: about log2(n / 2) for a fair coin.
    assert care.expected_longest_run(1024, 0.5) == pytest.approx(9.0)


def _verdicts(campaign, name: str, labels: list[int], seconds: list[float]) -> None:
    assessor = Assessor.objects.create(campaign=campaign, name=name, kind=Assessor.Kind.PERSON)
    topic = campaign.topics.get()
    Judgment.objects.bulk_create(
        Judgment(
            campaign=campaign,
            topic=topic,
            doc_id=f"d{i:02d}",
            assessor=assessor,
            label=label,
            active_seconds=active,
        )
        for i, (label, active) in enumerate(zip(labels, seconds, strict=True))
    )


def test_figures_equal_a_hand_count_and_flags_need_evidence(campaign, client, organiser):
    make_topics(campaign, ["1"])
    make_documents(campaign, [f"d{i:02d}" for i in range(30)], body="x" * 2000)
    # careful (and two like them): 30 verdicts, 0 1 2 in turn, 20 s each (10 s per 1,000
    # characters).
    for name in ("careful", "careful2", "careful3"):
        _verdicts(campaign, name, [i % 3 for i in range(30)], [20.0] * 30)
    # hasty: 30 verdicts, all 0, 1 s each but 5 at 30 s.
    _verdicts(campaign, "hasty", [0] * 30, [1.0] * 25 + [30.0] * 5)
    # brief: 5 verdicts, too few for flags, all fast.
    _verdicts(campaign, "brief", [2] * 5, [0.5] * 5)
    found = {row.assessor: row for row in care.care_signals(campaign)}
    careful, hasty, brief = found["careful"], found["hasty"], found["brief"]
    assert careful.judgments == 30
    assert careful.seconds_per_1000_chars == pytest.approx(10.0)
    assert (careful.fast, careful.timed) == (0, 30)
    assert careful.longest_run == 1
    assert careful.flags == ()
    assert hasty.seconds_per_1000_chars == pytest.approx(0.5)  # the median of 25 x 1 s, 5 x 30 s
    assert (hasty.fast, hasty.timed) == (25, 30)  # under 1000 / 83 = 12 s
    assert (hasty.longest_run, hasty.run_label) == (30, 0)
    # hasty's labels: all 0; everyone else's: 30 each of 0, 1, 2 and 5 of 2 (brief).
    assert hasty.label_distance == pytest.approx(1 - 30 / 95)
    assert len(hasty.flags) == 3
    assert brief.flags == ()  # figures, but under MIN_JUDGMENTS: no flag
    assert brief.fast == 5

    client.force_login(organiser)
    html = client.get(reverse("assess:progress", args=[campaign.slug])).content.decode()
    assert "Care signals" in html
    assert "25 of 30 verdicts faster than reading" in html
    # The polling fragment does not recompute it.
    fragment = client.get(reverse("assess:progress", args=[campaign.slug]), HTTP_HX_REQUEST="true")
    assert "Care signals" not in fragment.content.decode()
