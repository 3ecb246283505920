"""``manage.py disagreements SLUG --assessors A,B``: the (topic, document) pairs two assessors
both labelled and labelled differently (or as ``--distance``, ``--topic`` and the labels
choose), with both verdicts and the pair's adjudicated label where one was given: what the
agreement pages' pair lists show, for a script. ``--show`` prints each pair in full (both
labels with their names, flags, time, whole notes, and the adjudication's reason), as the web
list shows a row; the default is a table, one line a pair."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from campaigns.cli import get_campaign
from campaigns.models import Assessor, Campaign, Judgment
from qrels.management.commands.agreement import table
from qrels.queries import JudgedPair, PairFilter, Verdict, pairs_both_judged

# Pairs read a query at a time: the memory of one batch, whatever the number of pairs.
BATCH = 5_000


def _verdict(verdict: Verdict) -> dict[str, Any]:
    return {
        "label": verdict.label,
        "label_name": verdict.name,
        "note": verdict.note,
        "unsure": verdict.unsure,
        "unreadable": verdict.unreadable,
        "seconds_on_screen": verdict.seconds_on_screen,
        "active_seconds": verdict.active_seconds,
        "judged_at": verdict.judged_at.isoformat() if verdict.judged_at else None,
        "source": verdict.source,
    }


def _adjudicated(campaign: Campaign) -> dict[tuple[int, str], Judgment]:
    """(topic pk, document id) -> the pair's adjudicated label, every one of the campaign (one
    query: adjudications are people's decisions, a few per disagreement at most)."""
    found = Judgment.objects.filter(
        campaign=campaign, assessor__kind=Assessor.Kind.ADJUDICATED
    ).order_by()
    return {(j.topic_id, j.doc_id): j for j in found}


def _adjudication(judgment: Judgment | None) -> dict[str, Any] | None:
    if judgment is None:
        return None
    return {
        "label": judgment.label,
        "reason": judgment.note,
        "judged_at": judgment.judged_at.isoformat(),
        "version": judgment.version,
    }


def _flags(verdict: Verdict) -> str:
    marks = [m for m, on in (("unsure", verdict.unsure), ("unreadable", verdict.unreadable)) if on]
    return ",".join(marks) or "-"


def _seconds(verdict: Verdict) -> str:
    if verdict.seconds_on_screen is None:
        return ""
    text = f"{verdict.seconds_on_screen:.0f} s"
    if verdict.active_seconds is not None:
        text += f" ({verdict.active_seconds:.0f} s active)"
    return text


def _indented(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.splitlines() or [""]]


def show_pair(pair: JudgedPair, *, a: str, b: str, adjudicated: Judgment | None) -> list[str]:
    """One pair as the web list shows its row: the topic and document, each verdict (label and
    its name, flags, time, when, the whole note), the adjudicated label and its reason."""
    lines = [
        f"topic {pair.topic} · document {pair.doc_id} · {pair.distance} apart"
        + (f" · {pair.title}" if pair.title else "")
    ]
    for who, verdict in ((a, pair.a), (b, pair.b)):
        facts = [f"{verdict.label} {verdict.name}".strip()]
        if verdict.unsure:
            facts.append("unsure")
        if verdict.unreadable:
            facts.append("unreadable")
        if verdict.source == Assessor.Kind.IMPORTED:
            facts.append("imported")
        if _seconds(verdict):
            facts.append(_seconds(verdict))
        if verdict.judged_at:
            facts.append(verdict.judged_at.strftime("%Y-%m-%d %H:%M"))
        lines.append(f"  {who}: " + " · ".join(facts))
        if verdict.note:
            lines += _indented(verdict.note, "      ")
    if adjudicated is None:
        lines.append("  adjudicated: -")
    else:
        lines.append(f"  adjudicated: {adjudicated.label} · {adjudicated.judged_at:%Y-%m-%d %H:%M}")
        lines += _indented(adjudicated.note, "      ")
    return lines


class Command(BaseCommand):
    help = (
        "The (topic, document) pairs two assessors both labelled and disagree on (labels at "
        "least --distance apart, default 1), with each one's label, note, flags and time; "
        "negative (imported 'not judged') labels are left out, as agreement leaves them out."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--assessors", required=True, help="Two assessor names: A,B.")
        parser.add_argument("--topic", help="Only this topic id.")
        parser.add_argument(
            "--distance",
            type=int,
            default=1,
            help="Labels at least this far apart (default 1: every disagreement; 0: every "
            "pair both judged).",
        )
        parser.add_argument("--a-label", type=int, help="Only pairs A labelled so.")
        parser.add_argument("--b-label", type=int, help="Only pairs B labelled so.")
        parser.add_argument(
            "--binary",
            action="store_true",
            help="Labels from the campaign's relevance threshold count as 1, others as 0 "
            "(for the distance and the labels chosen).",
        )
        output = parser.add_mutually_exclusive_group()
        output.add_argument("--json", action="store_true", help="The pairs as a JSON list.")
        output.add_argument(
            "--show",
            action="store_true",
            help="Each pair in full, as the web list shows it: both labels with their names, "
            "flags, time and whole notes, and the adjudicated label with its reason.",
        )

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        names = [name.strip() for name in options["assessors"].split(",") if name.strip()]
        if len(names) != 2 or names[0] == names[1]:
            raise CommandError("Name two assessors (--assessors A,B).")
        found = dict(
            Assessor.objects.filter(campaign=campaign, name__in=names).values_list("name", "pk")
        )
        missing = [name for name in names if name not in found]
        if missing:
            raise CommandError(
                f"No assessor {', '.join(map(repr, missing))} in {campaign.slug}; assessors: "
                f"{', '.join(sorted(campaign.assessors.values_list('name', flat=True))) or 'none'}."
            )
        if options["distance"] < 0:
            raise CommandError("--distance is 0 or more.")
        topic = options["topic"]
        if topic is not None and not campaign.topics.filter(topic_id=topic).exists():
            raise CommandError(f"No topic {topic!r} in {campaign.slug}.")
        where = PairFilter(
            binary=options["binary"],
            threshold=campaign.relevance_threshold,
            a_label=options["a_label"],
            b_label=options["b_label"],
            topic=topic,
            distance=options["distance"],
        )
        rubric = campaign.current_rubric()
        label_names = {label.value: label.name for label in rubric.labels.all()} if rubric else {}
        pairs: list[JudgedPair] = []
        while True:
            page = pairs_both_judged(
                campaign=campaign,
                a=found[names[0]],
                b=found[names[1]],
                where=where,
                limit=BATCH,
                offset=len(pairs),
                label_names=label_names,
            )
            pairs += page.pairs
            if len(page.pairs) < BATCH:
                break
        a, b = names
        settled = _adjudicated(campaign)
        if options["json"]:
            rows = [
                {
                    "topic": p.topic,
                    "doc_id": p.doc_id,
                    "distance": p.distance,
                    "a": _verdict(p.a),
                    "b": _verdict(p.b),
                    "adjudicated": _adjudication(settled.get((p.topic_pk, p.doc_id))),
                }
                for p in pairs
            ]
            document = {"assessors": {"a": a, "b": b}, "pairs": rows}
            self.stdout.write(json.dumps(document, indent=1))
            return
        self.stdout.write(f"{len(pairs):,} pair{'s' if len(pairs) != 1 else ''} ({a} / {b}).")
        if not pairs:
            return
        if options["show"]:
            for pair in pairs:
                self.stdout.write("")
                for line in show_pair(
                    pair, a=a, b=b, adjudicated=settled.get((pair.topic_pk, pair.doc_id))
                ):
                    self.stdout.write(line)
            return
        header = [
            "topic",
            "document",
            a,
            b,
            f"{a} flags",
            f"{b} flags",
            f"{a} note",
            f"{b} note",
            "adjudicated",
            "apart",
        ]
        rows = []
        for p in pairs:
            adjudicated = settled.get((p.topic_pk, p.doc_id))
            rows.append(
                [
                    p.topic,
                    p.doc_id,
                    f"{p.a.label} {p.a.name}".strip(),
                    f"{p.b.label} {p.b.name}".strip(),
                    _flags(p.a),
                    _flags(p.b),
                    " ".join(p.a.note.split())[:60] or "-",
                    " ".join(p.b.note.split())[:60] or "-",
                    str(adjudicated.label) if adjudicated is not None else "-",
                    str(p.distance),
                ]
            )
        for line in table(header, rows, numeric_from=len(header) - 1):
            self.stdout.write(line)
