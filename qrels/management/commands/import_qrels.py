from django.core.management.base import BaseCommand

from campaigns.cli import get_campaign, refused
from campaigns.textfiles import ParseError
from qrels.formats import CONFLICT_POLICIES
from qrels.imports import IMPORT_KINDS, import_qrels


class Command(BaseCommand):
    help = (
        "Import a qrels file as the judgments of a named source (not a login): earlier qrels, "
        "or with --kind model an LLM judge's labels (kept out of default qrels and the headline "
        "agreement, never shown to assessors)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path")
        parser.add_argument("--assessor", required=True, help="Name of the source, e.g. NIST.")
        parser.add_argument(
            "--on-conflict",
            choices=CONFLICT_POLICIES,
            default="refuse",
            help="What to do when the file gives one pair two labels (default: refuse).",
        )
        parser.add_argument(
            "--kind",
            choices=IMPORT_KINDS,
            default="imported",
            help="imported (default): earlier qrels, people's verdicts made elsewhere; model: "
            "a model's labels (e.g. UMBRELA's). An existing source keeps its kind.",
        )
        parser.add_argument("--encoding")

    def handle(self, *args, slug: str, path: str, **options) -> None:
        campaign = get_campaign(slug)
        try:
            summary = import_qrels(
                campaign=campaign,
                source=path,
                name=path,
                assessor=options["assessor"],
                on_conflict=options["on_conflict"],
                encoding=options["encoding"],
                kind=options["kind"],
            )
        except ParseError as exc:
            raise refused(exc) from None
        for warning in summary.warnings[:20]:
            self.stderr.write(f"warning: {warning}")
        if len(summary.warnings) > 20:
            self.stderr.write(f"… and {len(summary.warnings) - 20} more warnings")
        self.stdout.write(summary.message())
