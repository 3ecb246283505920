"""Label scale presets. Each is a starting point the organiser edits in the rubric editor."""

from __future__ import annotations

from dataclasses import dataclass

from campaigns.models import LabelSpec


@dataclass(frozen=True)
class Scale:
    name: str
    title: str
    threshold: int
    labels: tuple[LabelSpec, ...]


SCALES: dict[str, Scale] = {
    scale.name: scale
    for scale in (
        Scale(
            "binary",
            "Binary (0 not relevant, 1 relevant)",
            1,
            (
                LabelSpec(0, "Not relevant", "The document does not help with the topic.", "", "0"),
                LabelSpec(
                    1, "Relevant", "The document helps with the topic as described.", "", "1"
                ),
            ),
        ),
        Scale(
            "graded3",
            "Three levels (0, 1, 2)",
            1,
            (
                LabelSpec(
                    0, "Not relevant", "Nothing in the document addresses the topic.", "", "0"
                ),
                LabelSpec(
                    1,
                    "Partially relevant",
                    "Addresses the topic in part, or only in passing.",
                    "",
                    "1",
                ),
                LabelSpec(
                    2,
                    "Highly relevant",
                    "Addresses the topic directly and substantially.",
                    "",
                    "2",
                ),
            ),
        ),
        Scale(
            "trecdl",
            "TREC Deep Learning (0-3, relevant from 2)",
            2,
            (
                LabelSpec(0, "Irrelevant", "Has nothing to do with the topic.", "", "0"),
                LabelSpec(
                    1,
                    "Related",
                    "On the topic's subject but does not answer it. Counted as not relevant.",
                    "",
                    "1",
                ),
                LabelSpec(
                    2,
                    "Highly relevant",
                    "Has some answer for the topic, but it may be unclear or hidden among "
                    "extraneous information.",
                    "",
                    "2",
                ),
                LabelSpec(
                    3,
                    "Perfectly relevant",
                    "Dedicated to the topic and contains the exact answer.",
                    "",
                    "3",
                ),
            ),
        ),
    )
}
