from __future__ import annotations

import hashlib
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from campaigns.cli import StderrProgress, get_campaign
from campaigns.textfiles import ParseError
from qrels.evaluation import MEASURES
from qrels.formats import CONFLICT_POLICIES
from qrels.management.commands.agreement import table
from qrels.policies import POLICIES, PolicyConflict
from qrels.reports import EvaluationReport, EvaluationRow, StabilityReport
from qrels.runscores import evaluation_report, stability_report
from qrels.sampled import DEFAULT_MEASURES
from qrels.sources import QrelsSource, parse_upload

SHOWN_SWAPS = 20


class Command(BaseCommand):
    help = (
        "Score every current run of a campaign with trec_eval's measures (pytrec_eval) against "
        "the campaign's qrels or a qrels file, at the campaign's relevance threshold; means over "
        "all qrels topics (trec_eval -c) and each run's unjudged share of its top 10. With "
        "--compare-with, Kendall's tau between the rankings under two qrels."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--qrels",
            metavar="PATH",
            help="Score against this qrels file instead of the campaign's judgments.",
        )
        parser.add_argument(
            "--policy",
            choices=POLICIES,
            help="How one label is chosen for a pair several assessors judged (default: the "
            "campaign's, as on the Export page).",
        )
        parser.add_argument(
            "--no-imported", action="store_true", help="Leave out imported judgments."
        )
        parser.add_argument(
            "--pool", type=int, metavar="VERSION", help="Only the pairs of this pool version."
        )
        parser.add_argument(
            "--measures",
            help=f"Comma-separated measures (default {','.join(MEASURES)}; on a stratified "
            f"sampled --pool, {','.join(DEFAULT_MEASURES)}, with iP@k for any k); the first "
            "orders the runs and is the one --compare-with ranks by.",
        )
        parser.add_argument(
            "--compare-with",
            metavar="PATH",
            help="A second qrels file: rank the runs under both and report Kendall's tau and "
            "the swapped pairs.",
        )
        parser.add_argument(
            "--common-topics",
            action="store_true",
            help="With --compare-with: only the topics both qrels have.",
        )
        parser.add_argument(
            "--on-conflict",
            choices=CONFLICT_POLICIES,
            default="refuse",
            help="A qrels file giving one pair two labels: refuse (default), max, min, first.",
        )
        parser.add_argument("--json", action="store_true", help="Everything, per topic, as JSON.")

    def _read(self, path: str, on_conflict: str) -> tuple[QrelsSource, dict]:
        file = Path(path)
        if not file.is_file():
            raise CommandError(f"No qrels file at {path}.")
        data = file.read_bytes()
        try:
            qrels = parse_upload(data, name=file.name, on_conflict=on_conflict)
        except ParseError as exc:
            count = exc.count
            raise CommandError(
                f"{path} is not a qrels file trec_eval reads: {count:,} "
                f"problem{'s' if count != 1 else ''}.\n{exc}"
            ) from None
        source = QrelsSource(
            kind="upload", upload_name=str(path), upload_sha256=hashlib.sha256(data).hexdigest()
        )
        return source, qrels

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        measures = None
        if options["measures"]:
            measures = [m.strip() for m in options["measures"].split(",") if m.strip()]
        uploaded = None
        if options["qrels"]:
            if options["policy"] or options["no_imported"] or options["pool"] is not None:
                raise CommandError(
                    "--policy, --no-imported and --pool apply to the campaign's "
                    "judgments, not to --qrels."
                )
            source, uploaded = self._read(options["qrels"], options["on_conflict"])
        else:
            source = QrelsSource(
                policy=options["policy"],
                include_imported=not options["no_imported"],
                pool=options["pool"],
            )
        if not campaign.runs.current().exists():
            raise CommandError(f"Campaign {slug!r} has no runs to score; import runs first.")
        progress = StderrProgress()
        try:
            report = evaluation_report(
                campaign=campaign,
                source=source,
                uploaded=uploaded,
                measures=measures,
                progress=progress,
            )
            comparison = None
            if options["compare_with"]:
                other, other_qrels = self._read(options["compare_with"], options["on_conflict"])
                uploads = {"second": other_qrels}
                if uploaded is not None:
                    uploads["first"] = uploaded
                comparison = stability_report(
                    campaign=campaign,
                    first=source,
                    second=other,
                    measure=report.measures[0],
                    common_topics=options["common_topics"],
                    uploaded=uploads,
                )
        except PolicyConflict as exc:
            for line in exc.lines(SHOWN_SWAPS):
                self.stderr.write(line)
            raise CommandError(
                f"Policy refuse: assessors disagree on {len(exc.conflicts):,} pairs; choose "
                "another --policy."
            ) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        finally:
            progress.close()
        if options["json"]:
            out = {
                "evaluation": report.to_dict(per_topic_by_measure=True),
                "comparison": comparison.to_dict() if comparison else None,
            }
            self.stdout.write(json.dumps(out, indent=1, ensure_ascii=False))
            return
        self._text(report, comparison)

    def _text(self, report: EvaluationReport, comparison: StabilityReport | None) -> None:
        out = self.stdout.write
        q = report.qrels
        out(
            f"Qrels: {q.description}: {q.topics} topics, {q.verdicts:,} judged pairs "
            f"({q.relevant:,} relevant from label {report.threshold})"
            + (f", {q.unjudged:,} pooled but unjudged (-1)" if q.unjudged else "")
            + "."
        )
        if q.topics_not_in_campaign:
            out(
                f"  {len(q.topics_not_in_campaign)} qrels topics are not campaign topics: "
                "every run scores 0 on them."
            )
        for pool in report.pools:
            share = f" ({pool.judged_share:.0%})" if pool.judged_share is not None else ""
            out(
                f"Pool v{pool.version}: {pool.description}, from {len(pool.runs)} runs; "
                f"{pool.judged:,} of {pool.size:,} pairs judged{share}."
            )
        judged = report.judged_at_10
        if judged.mean is not None:
            out(
                f"Top 10 judged: {judged.mean:.0%} on average over the runs "
                f"(lowest {judged.lowest:.0%})."
            )
        out(
            f"Means over all {len(report.topics)} qrels topics (trec_eval -c); "
            f"runs best first by {report.measures[0]}."
        )
        measures = report.measures
        inferred = report.inferred
        if inferred:
            if inferred.why:
                out(inferred.why)
            if inferred.warning:
                out(f"Warning: {inferred.warning}")
        rows = [
            [row.run, f"{row.topics_answered}"]
            + [_value(row, m) for m in measures]
            + [f"{row.unjudged_at_10:.0%}" + (" !" if row.warn else "")]
            for row in report.ranked(measures[0])
        ]
        out("")
        for line in table(["run", "topics", *measures, "unjudged@10"], rows, numeric_from=1):
            out(line)
        if any(row.warn for row in report.runs):
            out("\n! 10% or more of the run's top 10 unjudged: its scores need a caveat.")
        if comparison is not None:
            tau = comparison.tau
            out(
                f"\nRanking by {comparison.measure} under "
                f"{comparison.qrels.first.description} against "
                f"{comparison.qrels.second.description}:"
            )
            out(
                f"Kendall's tau {'-' if tau is None else f'{tau:.4f}'}: "
                f"{comparison.swapped} of {comparison.pairs} pairs of runs swapped."
            )
            for a, b in comparison.swapped_pairs[:SHOWN_SWAPS]:
                out(f"  {a} above {b} under the first, below under the second")
            if comparison.swapped > SHOWN_SWAPS:
                out(f"  … and {comparison.swapped - SHOWN_SWAPS:,} more (see --json)")


def _value(row: EvaluationRow, measure: str) -> str:
    """A mean, with its 95 % interval where the report has one (the inferred measures)."""
    interval = (row.intervals or {}).get(measure)
    if interval is None:
        return f"{row.mean[measure]:.4f}"
    return f"{row.mean[measure]:.4f} [{interval[0]:.4f}, {interval[1]:.4f}]"
