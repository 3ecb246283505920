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


# The rubric editor's limit; every label needs a key of its own.
MAX_LABELS = 12
_KEYS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _label_span(item: str) -> tuple[range, str]:
    """The values of one item of ``--labels`` and the name it gives them ("" for none)."""
    number, has_name, name = item.partition("=")
    first, dash, last = number.strip().partition("-")
    bad = ValueError(
        f"{item!r} is not a label value or range: use e.g. 0-4, or 1,2,3,4, or "
        "0=Not relevant,1=Relevant (labels are whole numbers, 0 or more)"
    )
    try:
        if dash and first.strip():  # a range; "-1" alone is a (negative) value
            low, high = int(first), int(last)
        else:
            low = high = int(number)
    except ValueError:
        raise bad from None
    if high < low:
        raise bad
    if has_name and high > low:
        raise ValueError(f"a range cannot have a name: {item!r}")
    return range(low, high + 1), name.strip()


def parse_labels(text: str) -> list[LabelSpec]:
    """The labels of ``create_campaign --labels``: a range (``0-4``), a list (``1,2,3,4``), or
    both (``0-2,4``); a list item may name its label (``0=Not relevant,1=Relevant``). Labels
    without a name are called "Label N"; keys are the digits, then letters. Raises ValueError
    with a sentence for anything else."""
    values: dict[int, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        span, name = _label_span(item)
        if len(values) + len(span) > MAX_LABELS:
            raise ValueError(f"a scale has at most {MAX_LABELS} labels")
        for value in span:
            if value in values:
                raise ValueError(f"label {value} is given twice")
            values[value] = name
    if any(value < 0 for value in values):
        raise ValueError(
            "labels are 0 or more; negative labels (trec_eval's 'in the pool, not judged') are "
            "accepted from imported qrels without being on the scale"
        )
    if len(values) < 2:
        raise ValueError("a scale needs at least two labels, e.g. 0-4")
    letters = iter(key for key in _KEYS if not key.isdigit() or int(key) not in values)
    return [
        LabelSpec(
            value,
            values[value] or f"Label {value}",
            key=str(value) if value < 10 else next(letters),
        )
        for value in sorted(values)
    ]


def default_threshold(labels: list[LabelSpec]) -> int:
    """The relevance threshold a scale gets unless one is given: its second-lowest label (0-4
    and 0-1 count from 1, as the presets do)."""
    return sorted(spec.value for spec in labels)[1]


def scale_advice(campaign) -> str:
    """Where an organiser changes a campaign's scale, for messages that refuse a label."""
    from django.urls import reverse

    return (
        f"add the label on the rubric page {reverse('campaigns:rubric', args=[campaign.slug])}, "
        "or create a campaign with the scale it needs (manage.py create_campaign SLUG "
        "--labels 0-4)"
    )
