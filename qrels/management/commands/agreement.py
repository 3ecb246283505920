from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from campaigns.cli import get_campaign
from qrels import agreement
from qrels.agreement_data import BOOTSTRAP, agreement_data
from qrels.reports import COMPARISON_TITLES


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(header: list[str], rows: list[list[str]], numeric_from: int = 2) -> list[str]:
    """Rows as aligned text columns; columns from ``numeric_from`` on are right-aligned."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            str(cell).rjust(width) if i >= numeric_from else str(cell).ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


class Command(BaseCommand):
    help = (
        "Agreement between the assessors of a campaign: for each pair who judged the same "
        "(topic, document) pairs, n, observed agreement, Cohen's kappa, the pooled-marginals "
        "kappa, weighted kappas and the relevant-set overlap; Fleiss' kappa and Krippendorff's "
        "alpha for three or more."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--assessors",
            help="Comma-separated assessor names (people, imported sources or models); "
            "default: everyone with a judgment.",
        )
        parser.add_argument(
            "--binary",
            action="store_true",
            help="Labels from the campaign's relevance threshold count as 1, others as 0.",
        )
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=BOOTSTRAP,
            help=f"Bootstrap resamples for the 95%% intervals (default {BOOTSTRAP}; 0: none).",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="Everything as JSON: figures, confusion matrices, intervals, per topic.",
        )

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        names = None
        if options["assessors"]:
            names = [name.strip() for name in options["assessors"].split(",") if name.strip()]
            if len(names) < 2:
                raise CommandError("Name at least two assessors (--assessors A,B).")
        if options["bootstrap"] < 0:
            raise CommandError("--bootstrap is a number of resamples, 0 or more.")
        try:
            data = agreement_data(
                campaign=campaign,
                assessors=names,
                binary=options["binary"],
                bootstrap=options["bootstrap"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(data.to_json())  # ends with a newline: nothing added
            return
        self._text(campaign, data)

    def _text(self, campaign, data) -> None:
        out = self.stdout.write
        labels = (
            f"binary (labels from {data.threshold} count as 1)"
            if data.binary
            else f"labels as judged ({', '.join(map(str, data.labels))}), relevant from "
            f"{data.threshold}"
        )
        out(f"Agreement in {campaign.slug}: {len(data.assessors)} assessors, {labels}.")
        if not data.pairs:
            out(
                "No two of them judged the same (topic, document) pair: give assessors "
                "overlapping work (Assessors page) or import a second qrels file."
            )
            return
        header = ["A", "B", "n", "observed", "Cohen", "Cohen 95%", "pooled"]
        if data.graded:
            header += ["linear", "quadratic"]
        header += ["overlap"]
        negative = any(pair.negative for pair in data.pairs)
        if negative:
            header += ["negative", "identical"]
        headline = data.headline
        several = headline is not None and headline.pairs > 1
        out(
            "People's agreement (people and imported qrels only, never models): "
            + (
                f"Cohen's kappa {_f(headline.kappa)}"
                + (f", the mean over {headline.pairs} pairs of people" if several else "")
                + f", over {headline.n:,} pairs both judged."
                if headline
                else "no two people judged the same pair."
            )
        )
        for comparison, pairs in data.by_comparison().items():
            if pairs:
                out(f"\n{COMPARISON_TITLES[comparison]} ({comparison}):")
                self._pairs(header, pairs, data, negative)
        for entry in data.leniency:
            out(
                f"\nLeniency of {entry.model}: calls {_f(entry.model_relevant)} of its "
                f"{entry.n:,} pairs with people relevant; the people {_f(entry.people_relevant)} "
                "of the same pairs."
            )
        self._notes(data)

    def _pairs(self, header: list[str], pairs, data, negative: bool) -> None:
        rows = []
        for pair in pairs:
            ci = pair.ci.get("cohen_kappa")
            row = [
                pair.a,
                pair.b,
                f"{pair.n:,}" + (" !" if pair.small_n else ""),
                _f(pair.observed),
                _f(pair.cohen_kappa),
                f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "-",
                _f(pair.pooled_kappa),
            ]
            if data.graded:
                row += [_f(pair.weighted_kappa_linear), _f(pair.weighted_kappa_quadratic)]
            row += [_f(pair.relevant_overlap)]
            if negative:
                row += [f"{pair.negative:,}", _f(pair.identical)]
            rows.append(row)
        for line in table(header, rows):
            self.stdout.write(line)

    def _notes(self, data) -> None:
        out = self.stdout.write
        for pair in data.pairs:
            if pair.negative:
                met = "; ".join(f"{a} against {b}: {n:,}" for a, b, n in pair.negative_cells[:6])
                out(
                    f"\n{pair.a} / {pair.b}: {pair.negative:,} more pairs both labelled have a "
                    f"negative label ({met}) and are in no figure "
                    "above (trec_eval reads a label below 0 as 'in the pool, not judged'); the "
                    f"same label on {_f(pair.identical)} of all {pair.n + pair.negative:,} pairs "
                    "both labelled."
                )
        if any(pair.small_n for pair in data.pairs):
            out(
                f"\n! fewer than {agreement.SMALL_N} pairs judged by both: too few for stable "
                "figures (a kappa's 95% interval is typically +-0.2 or wider)."
            )
        g = data.group
        if g is not None:
            out(
                f"\n{len(g.assessors)} assessors, {g.n_items:,} pairs judged by two or more: "
                f"Fleiss' kappa {_f(g.fleiss_kappa)} (over the {g.fleiss_items:,} pairs with "
                f"{g.fleiss_raters} judgments each), Krippendorff's alpha nominal "
                f"{_f(g.alpha_nominal)}, ordinal {_f(g.alpha_ordinal)}."
            )
