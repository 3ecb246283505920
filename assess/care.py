"""Care signals: per assessor, the evidence an organiser needs to ask whether someone is judging
with care (issue 19). Never an automatic block: the progress page shows the figures and which
of them stand out, and the organiser decides.

Four signals, over each person's current verdicts (imported sources, models and adjudicated
labels are not people at work):

* **Time for the length**: the median active seconds per 1,000 characters of the document (time
  alone says little: a long document takes longer).
* **Faster than reading**: the share of verdicts given in less than ``MIN_SECONDS``, or in less
  time than reading the document's first ``READ_CHARS`` characters at ``READ_CHARS_PER_SECOND``
  (about 1,000 words a minute, past fast skimming). Flagged above ``FAST_SHARE``.
* **Label distribution**: the total variation distance between the assessor's labels and every
  other person's in the campaign; flagged above ``LABEL_DISTANCE``.
* **Runs of one label**: the longest run of one label in the order the verdicts were given,
  flagged when it is at least ``MIN_RUN`` and more than twice the longest run chance would give
  (Schilling's approximation, log(n (1 - p)) / log(1 / p), with p that label's share of every
  person's verdicts).

An assessor with fewer than ``MIN_JUDGMENTS`` verdicts gets figures but no flag.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import OuterRef, Subquery
from django.db.models.functions import Length

from campaigns.models import Assessor, Campaign, Document, Judgment

MIN_JUDGMENTS = 20
MIN_SECONDS = 2.0
READ_CHARS = 1000
READ_CHARS_PER_SECOND = 83.0  # ~1,000 words a minute at ~5 characters a word
FAST_SHARE = 0.2
LABEL_DISTANCE = 0.25
MIN_RUN = 10


@dataclass(frozen=True)
class CareSignals:
    assessor: str
    judgments: int
    seconds_per_1000_chars: float | None
    fast: int  # verdicts faster than reading (with an active time recorded)
    timed: int  # verdicts with an active time recorded
    label_distance: float | None
    longest_run: int
    run_label: int | None
    expected_run: float | None
    flags: tuple[str, ...] = field(default=())

    @property
    def fast_share(self) -> float | None:
        return self.fast / self.timed if self.timed else None


def reading_floor(chars: int) -> float:
    """Seconds below which a verdict on a document of ``chars`` characters cannot have read it."""
    return max(MIN_SECONDS, min(chars, READ_CHARS) / READ_CHARS_PER_SECOND)


def longest_run(labels: list[int]) -> tuple[int, int | None]:
    best, best_label, run = 0, None, 0
    for i, label in enumerate(labels):
        run = run + 1 if i and labels[i - 1] == label else 1
        if run > best:
            best, best_label = run, label
    return best, best_label


def expected_longest_run(n: int, p: float) -> float | None:
    """The longest run of one outcome of probability ``p`` expected in ``n`` draws."""
    if n < 2 or not 0 < p < 1:
        return None
    return max(1.0, math.log(n * (1 - p)) / math.log(1 / p))


def _distance(mine: Counter, others: Counter) -> float | None:
    n, m = sum(mine.values()), sum(others.values())
    if not n or not m:
        return None
    return sum(abs(mine[x] / n - others[x] / m) for x in set(mine) | set(others)) / 2


def care_signals(campaign: Campaign) -> list[CareSignals]:
    """Every person with verdicts in the campaign, by name: one query."""
    chars = (
        Document.objects.filter(campaign=campaign, doc_id=OuterRef("doc_id"))
        .annotate(n=Length("body"))
        .order_by()
        .values("n")[:1]
    )
    rows = (
        Judgment.objects.filter(campaign=campaign, assessor__kind=Assessor.Kind.PERSON)
        .annotate(chars=Subquery(chars))
        .order_by("assessor__name", "first_judged_at", "pk")
        .values_list("assessor__name", "label", "active_seconds", "chars")
    )
    by_assessor: dict[str, list[tuple[int, float | None, int]]] = defaultdict(list)
    everyone: Counter = Counter()
    for name, label, active, length in rows:
        if label < 0:
            continue
        by_assessor[name].append((label, active, length or 0))
        everyone[label] += 1
    result = []
    for name, verdicts in by_assessor.items():
        labels = [label for label, _, _ in verdicts]
        mine = Counter(labels)
        timed = [(active, length) for _, active, length in verdicts if active is not None]
        per_1000 = [active / (length / 1000) for active, length in timed if length]
        fast = sum(active < reading_floor(length) for active, length in timed)
        distance = _distance(mine, everyone - mine)
        run, run_label = longest_run(labels)
        # Chance is judged by how common that label is among everyone's verdicts: an assessor
        # who gives one label to everything has no run that "their own" rates would explain.
        share = everyone[run_label] / sum(everyone.values())
        expected = expected_longest_run(len(labels), share)
        flags: list[str] = []
        if len(labels) >= MIN_JUDGMENTS:
            if timed and fast / len(timed) > FAST_SHARE:
                flags.append(
                    f"{fast} of {len(timed)} verdicts faster than reading ({fast / len(timed):.0%})"
                )
            if distance is not None and distance > LABEL_DISTANCE:
                flags.append(f"labels unlike everyone else's (distance {distance:.2f})")
            if expected is not None and run >= MIN_RUN and run > 2 * expected:
                flags.append(
                    f"{run} verdicts in a row labelled {run_label} (chance: ~{expected:.0f})"
                )
        result.append(
            CareSignals(
                assessor=name,
                judgments=len(labels),
                seconds_per_1000_chars=statistics.median(per_1000) if per_1000 else None,
                fast=fast,
                timed=len(timed),
                label_distance=distance,
                longest_run=run,
                run_label=run_label,
                expected_run=expected,
                flags=tuple(flags),
            )
        )
    return result
