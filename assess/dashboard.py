"""How far judging has come: per topic, per assessor and for the whole campaign.

Two kinds of number, read from two places:

- **Work** (judged / assigned) counts the units of work given out: a document in a primary or
  overlap assignment, a copy in a shared queue. A unit is assigned while its assignment is active
  and it was not withdrawn, and stays counted once judged (judged work is never taken back). A
  queue copy counts while some active queue assignment covers its topic; per assessor, queue work
  is what they have claimed so far.
- **Judgments** (labels, time, pace) are the verdicts people gave in Pooljudge (imported qrels are
  not judging progress). Times are active seconds: the page was visible and focused.

The estimated finish is the remaining work at the last hour's pace, and None (shown as "—") when
nothing was judged in the last hour, nothing remains, or the remaining share of a shared queue is
nobody's in particular. Everything here is for organisers: it names assessors and their labels.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Exists, Max, Min, OuterRef, Q
from django.utils import timezone

from assess.models import Assignment, AssignmentItem, QueueItem, Skip
from campaigns.models import Assessor, Campaign, Judgment, Topic
from pooling.models import Pool
from pooljudge.common import median, neutralise

RATE_WINDOW = timedelta(hours=1)
SKIPPED_LISTED = 100


@dataclass
class Row:
    """One line of the dashboard: a topic, an assessor, or the campaign's total."""

    key: str
    title: str = ""
    judged: int = 0
    assigned: int = 0
    labels: dict[int, int] = field(default_factory=dict)
    median_seconds: float | None = None
    last_hour: int = 0
    eta: datetime | None = None
    # Part of this row's work is an open shared queue, whose share is nobody's in particular.
    shares_queue: bool = False
    # The label counts in the dashboard's column order (templates cannot index a dict).
    counts: list[int] = field(default_factory=list)
    # Documents skipped ("judge later") and not judged yet: part of the remaining work.
    skipped: int = 0

    @property
    def remaining(self) -> int:
        return max(self.assigned - self.judged, 0)

    @property
    def percent(self) -> int:
        return int(100 * self.judged / self.assigned) if self.assigned else 0

    @property
    def done(self) -> bool:
        return self.assigned > 0 and self.judged >= self.assigned

    @property
    def judgments(self) -> int:
        return sum(self.labels.values())


@dataclass(frozen=True)
class Cell:
    """What one assessor holds of one topic in one mode (P, Q or O): judged of assigned."""

    mode: str
    judged: int
    assigned: int

    @property
    def letter(self) -> str:
        return {"primary": "P", "queue": "Q", "overlap": "O"}[self.mode]

    @property
    def done(self) -> bool:
        return self.assigned > 0 and self.judged >= self.assigned


@dataclass(frozen=True)
class SkippedWork:
    """A document an assessor skipped and has not judged yet."""

    topic_id: str
    assessor: str
    doc_id: str
    times: int
    last_skipped_at: datetime


@dataclass
class Dashboard:
    now: datetime
    labels: list[tuple[int, str]]
    topics: list[Row]
    assessors: list[Row]
    total: Row
    # Assessor name -> [(time, judgments so far)], for the plot.
    series: dict[str, list[tuple[datetime, int]]]
    bucket: str
    # The oldest skips first, at most SKIPPED_LISTED of them (total.skipped counts them all).
    skipped: list[SkippedWork] = field(default_factory=list)

    @property
    def open_work(self) -> bool:
        return self.total.remaining > 0


# --- Pure pieces ----------------------------------------------------------------------------------


def estimate_finish(
    remaining: int, recent: int, *, now: datetime, window: timedelta = RATE_WINDOW
) -> datetime | None:
    """When ``remaining`` units are done at the pace of ``recent`` judgments per ``window``;
    None when nothing remains or nothing was judged recently (the pace is unknown)."""
    if remaining <= 0 or recent <= 0:
        return None
    return now + window * (remaining / recent)


def cumulative_series(
    events: Iterable[tuple[str, datetime]], *, now: datetime
) -> tuple[dict[str, list[tuple[datetime, int]]], str]:
    """(name, time) events -> per name, the running count at the start of each bucket and at
    ``now``; buckets are hours over the first two days of judging, days after that."""
    events = sorted(events, key=lambda e: e[1])
    if not events:
        return {}, "hour"
    start = events[0][1]
    bucket = "hour" if now - start <= timedelta(hours=48) else "day"

    def floor(moment: datetime) -> datetime:
        local = timezone.localtime(moment)
        if bucket == "hour":
            return local.replace(minute=0, second=0, microsecond=0)
        return local.replace(hour=0, minute=0, second=0, microsecond=0)

    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    edges = []
    moment = floor(start)
    while moment < now:
        edges.append(moment)
        moment += step
    edges.append(now)
    series: dict[str, list[tuple[datetime, int]]] = {}
    names = sorted({name for name, _ in events})
    for name in names:
        times = [t for n, t in events if n == name]
        points, count, index = [], 0, 0
        for edge in edges:
            while index < len(times) and times[index] <= edge:
                index += 1
                count += 1
            points.append((edge, count))
        series[name] = points
    return series, bucket


def safe_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: numbers pass, text that would start a formula gets
    a leading apostrophe."""
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return value
    return neutralise(str(value))


# --- Reading the campaign -------------------------------------------------------------------------


def _work_items(campaign: Campaign):
    """Primary and overlap items that are work: judged, or open in an active assignment."""
    return (
        # Planted repeats and gold-only items are checks on the assessor, not work on the pool.
        AssignmentItem.objects.filter(
            assignment__campaign=campaign, repeat_of__isnull=True, gold_only=False
        )
        .exclude(assignment__mode=Assignment.Mode.QUEUE)
        .filter(Q(judgment__isnull=False) | Q(withdrawn=False, assignment__active=True))
    )


def _queue_claims(campaign: Campaign):
    return AssignmentItem.objects.filter(
        assignment__campaign=campaign, assignment__mode=Assignment.Mode.QUEUE
    ).filter(Q(judgment__isnull=False) | Q(withdrawn=False, assignment__active=True))


def _active_queue_topics(campaign: Campaign) -> dict[tuple[int, int], set[int]]:
    """(pool pk, topic pk) -> assessor pks of the active queue assignments covering it."""
    covered: dict[tuple[int, int], set[int]] = defaultdict(set)
    rows = Assignment.topics.through.objects.filter(
        assignment__campaign=campaign,
        assignment__active=True,
        assignment__mode=Assignment.Mode.QUEUE,
    ).values_list("assignment__pool_id", "topic_id", "assignment__assessor_id")
    for pool_pk, topic_pk, assessor_pk in rows:
        covered[(pool_pk, topic_pk)].add(assessor_pk)
    return covered


def grid_cells(campaign: Campaign, *, pool: Pool) -> dict[tuple[int, int], list[Cell]]:
    """(topic pk, assessor pk) -> what the assessor holds of the topic in ``pool``, one Cell per
    mode (queue cells: judged of claimed so far)."""
    counts: dict[tuple[int, int, str], list[int]] = defaultdict(lambda: [0, 0])
    for source in (_work_items(campaign), _queue_claims(campaign)):
        source = source.filter(assignment__pool=pool)
        rows = source.values_list(
            "topic_id", "assignment__assessor_id", "assignment__mode"
        ).annotate(total=Count("pk"), done=Count("judgment"))
        for topic_pk, assessor_pk, mode, total, done in rows:
            entry = counts[(topic_pk, assessor_pk, mode)]
            entry[0] += done
            entry[1] += total
    # A queue assessor who has claimed nothing yet still holds the topic.
    for (pool_pk, topic_pk), assessors in _active_queue_topics(campaign).items():
        for assessor_pk in assessors if pool_pk == pool.pk else ():
            counts.setdefault((topic_pk, assessor_pk, Assignment.Mode.QUEUE), [0, 0])
    cells: dict[tuple[int, int], list[Cell]] = defaultdict(list)
    order = {"primary": 0, "overlap": 1, "queue": 2}
    for (topic_pk, assessor_pk, mode), (done, total) in sorted(
        counts.items(), key=lambda kv: order[kv[0][2]]
    ):
        cells[(topic_pk, assessor_pk)].append(Cell(str(mode), done, total))
    return cells


@dataclass
class Work:
    """Judged and assigned units: per topic pk and per assessor pk, as [judged, assigned]."""

    topics: dict[int, list[int]]
    assessors: dict[int, list[int]]
    # Topics with an open shared queue, and the assessors drawing from one.
    queue_topics: set[int]
    sharing_queue: set[int]


def count_work(campaign: Campaign, *, pool: Pool | None = None) -> Work:
    """The units of work given out in ``campaign`` (only ``pool``'s when given)."""
    topic_work: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    assessor_work: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for source in (_work_items(campaign), _queue_claims(campaign)):
        if pool is not None:
            source = source.filter(assignment__pool=pool)
        rows = source.values_list(
            "topic_id", "assignment__assessor_id", "assignment__mode"
        ).annotate(total=Count("pk"), done=Count("judgment"))
        for topic_pk, assessor_pk, mode, total, done in rows:
            if mode != Assignment.Mode.QUEUE:
                # Queue claims are counted below, as the queue's own copies.
                topic_work[topic_pk][0] += done
                topic_work[topic_pk][1] += total
            assessor_work[assessor_pk][0] += done
            assessor_work[assessor_pk][1] += total
    covered = _active_queue_topics(campaign)
    queue_topics: set[int] = set()
    sharing: set[int] = set()
    queue_items = QueueItem.objects.filter(pool__campaign=campaign)
    if pool is not None:
        queue_items = queue_items.filter(pool=pool)
    queue_rows = queue_items.values_list("pool_id", "topic_id").annotate(
        total=Count("pk"), done=Count("pk", filter=Q(done=True))
    )
    for pool_pk, topic_pk, total, done in queue_rows:
        topic_work[topic_pk][0] += done
        topic_work[topic_pk][1] += total if (pool_pk, topic_pk) in covered else done
        if (pool_pk, topic_pk) in covered and done < total:
            queue_topics.add(topic_pk)
            sharing |= covered[(pool_pk, topic_pk)]
    return Work(dict(topic_work), dict(assessor_work), queue_topics, sharing)


def _skipped_items(campaign: Campaign):
    """Items skipped and not judged yet that are still someone's work (open, in an active
    assignment)."""
    return AssignmentItem.objects.filter(
        assignment__campaign=campaign,
        assignment__active=True,
        judgment__isnull=True,
        withdrawn=False,
    ).filter(Exists(Skip.objects.filter(item=OuterRef("pk"))))


def count_skipped(campaign: Campaign) -> dict[tuple[int, int], int]:
    """(topic pk, assessor pk) -> documents skipped and not judged yet."""
    rows = (
        _skipped_items(campaign)
        .order_by()
        .values_list("topic_id", "assignment__assessor_id")
        .annotate(n=Count("pk"))
    )
    return {(topic_pk, assessor_pk): n for topic_pk, assessor_pk, n in rows}


def list_skipped(campaign: Campaign, *, limit: int = SKIPPED_LISTED) -> list[SkippedWork]:
    """The documents skipped and not judged yet, those skipped longest ago first."""
    rows = (
        _skipped_items(campaign)
        .annotate(
            times=Count("skips"), first_skip=Min("skips__skipped_at"), last=Max("skips__skipped_at")
        )
        .order_by("first_skip", "pk")
        .values_list("topic__topic_id", "assignment__assessor__name", "doc_id", "times", "last")
    )
    return [SkippedWork(*row) for row in rows[:limit]]


def _label_columns(campaign: Campaign, seen: Iterable[int]) -> list[tuple[int, str]]:
    rubric = campaign.current_rubric()
    names = {label.value: label.name for label in rubric.labels.all()} if rubric else {}
    return [(value, names.get(value, "")) for value in sorted(set(names) | set(seen))]


def campaign_dashboard(campaign: Campaign, *, now: datetime | None = None) -> Dashboard:
    """Every number of the progress page, read in a handful of queries."""
    now = now or timezone.now()
    since = now - RATE_WINDOW

    work = count_work(campaign)
    topic_work, assessor_work, sharing = work.topics, work.assessors, work.sharing_queue
    skipped = count_skipped(campaign)
    topic_skipped: dict[int, int] = defaultdict(int)
    assessor_skipped: dict[int, int] = defaultdict(int)
    for (topic_pk, assessor_pk), n in skipped.items():
        topic_skipped[topic_pk] += n
        assessor_skipped[assessor_pk] += n

    # Judgments: labels, active seconds, the last hour, and the times for the plot.
    judgments = Judgment.objects.filter(
        campaign=campaign, source=Judgment.Source.JUDGED, assessor__kind=Assessor.Kind.PERSON
    )
    by_topic_labels: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    by_assessor_labels: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    by_topic_seconds: dict[int, list[float]] = defaultdict(list)
    by_assessor_seconds: dict[int, list[float]] = defaultdict(list)
    by_topic_recent: dict[int, int] = defaultdict(int)
    by_assessor_recent: dict[int, int] = defaultdict(int)
    all_labels: dict[int, int] = defaultdict(int)
    all_seconds: list[float] = []
    events: list[tuple[int, datetime]] = []
    rows = judgments.values_list(
        "topic_id", "assessor_id", "label", "active_seconds", "first_judged_at"
    )
    for topic_pk, assessor_pk, label, seconds, first_judged in rows.iterator(chunk_size=5000):
        by_topic_labels[topic_pk][label] += 1
        by_assessor_labels[assessor_pk][label] += 1
        all_labels[label] += 1
        if seconds is not None:
            by_topic_seconds[topic_pk].append(seconds)
            by_assessor_seconds[assessor_pk].append(seconds)
            all_seconds.append(seconds)
        if first_judged > since:
            by_topic_recent[topic_pk] += 1
            by_assessor_recent[assessor_pk] += 1
        events.append((assessor_pk, first_judged))

    topic_pks = set(topic_work) | set(by_topic_labels)
    topics = list(
        Topic.objects.filter(campaign=campaign, pk__in=topic_pks).order_by("position", "topic_id")
    )
    topic_rows = []
    for topic in topics:
        judged, assigned = topic_work.get(topic.pk, (0, 0))
        row = Row(
            key=topic.topic_id,
            title=topic.title,
            judged=judged,
            assigned=assigned,
            labels=dict(by_topic_labels.get(topic.pk, {})),
            median_seconds=median(by_topic_seconds.get(topic.pk, [])),
            last_hour=by_topic_recent.get(topic.pk, 0),
            skipped=topic_skipped.get(topic.pk, 0),
        )
        row.eta = estimate_finish(row.remaining, row.last_hour, now=now)
        topic_rows.append(row)

    assessor_pks = set(assessor_work) | set(by_assessor_labels)
    people = {a.pk: a for a in Assessor.objects.filter(campaign=campaign, pk__in=assessor_pks)}
    assessor_rows = []
    for assessor in sorted(people.values(), key=lambda a: a.name.lower()):
        judged, assigned = assessor_work.get(assessor.pk, (0, 0))
        row = Row(
            key=assessor.name,
            judged=judged,
            assigned=assigned,
            labels=dict(by_assessor_labels.get(assessor.pk, {})),
            median_seconds=median(by_assessor_seconds.get(assessor.pk, [])),
            last_hour=by_assessor_recent.get(assessor.pk, 0),
            shares_queue=assessor.pk in sharing,
            skipped=assessor_skipped.get(assessor.pk, 0),
        )
        if not row.shares_queue:
            row.eta = estimate_finish(row.remaining, row.last_hour, now=now)
        assessor_rows.append(row)

    total = Row(
        key="All topics",
        judged=sum(r.judged for r in topic_rows),
        assigned=sum(r.assigned for r in topic_rows),
        labels=dict(all_labels),
        median_seconds=median(all_seconds),
        last_hour=sum(by_topic_recent.values()),
        shares_queue=bool(work.queue_topics),
        skipped=sum(skipped.values()),
    )
    total.eta = estimate_finish(total.remaining, total.last_hour, now=now)
    names = {pk: a.name for pk, a in people.items()}
    series, bucket = cumulative_series(
        ((names.get(pk, "?"), moment) for pk, moment in events), now=now
    )
    columns = _label_columns(campaign, all_labels)
    for row in [*topic_rows, *assessor_rows, total]:
        row.counts = [row.labels.get(value, 0) for value, _ in columns]
    return Dashboard(
        now=now,
        labels=columns,
        topics=topic_rows,
        assessors=assessor_rows,
        total=total,
        series=series,
        bucket=bucket,
        skipped=list_skipped(campaign) if skipped else [],
    )


# --- CSV ------------------------------------------------------------------------------------------


def dashboard_csv(dashboard: Dashboard) -> str:
    """The dashboard's tables as one CSV: a row per topic, per assessor and the total, with the
    same columns as the page. Text cells are neutralised for spreadsheets."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    header = ["section", "id", "title", "judged", "assigned", "remaining", "percent_judged"]
    header += [f"label {value} {name}".strip() for value, name in dashboard.labels]
    header += [
        "median_active_seconds",
        "judged_last_hour",
        "estimated_finish",
        "skipped_not_judged",
    ]
    writer.writerow([safe_cell(h) for h in header])

    def line(section: str, row: Row) -> list[object]:
        cells: list[object] = [
            section,
            row.key,
            row.title,
            row.judged,
            row.assigned,
            row.remaining,
            row.percent,
        ]
        cells += [row.labels.get(value, 0) for value, _ in dashboard.labels]
        cells += [
            round(row.median_seconds, 1) if row.median_seconds is not None else None,
            row.last_hour,
            timezone.localtime(row.eta).isoformat(timespec="minutes") if row.eta else None,
            row.skipped,
        ]
        return [safe_cell(c) for c in cells]

    for row in dashboard.topics:
        writer.writerow(line("topic", row))
    for row in dashboard.assessors:
        writer.writerow(line("assessor", row))
    writer.writerow(line("total", dashboard.total))
    return out.getvalue()
