from django.core.management.base import BaseCommand

from campaigns.cli import StderrProgress, get_campaign, refused
from campaigns.textfiles import ParseError
from pooling.imports import import_runs


class Command(BaseCommand):
    help = "Import TREC run files into a campaign: all files or none."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Supersede runs with the same tag (the old version is kept for existing pools).",
        )
        parser.add_argument(
            "--split-tags",
            action="store_true",
            help="A file holding several tags becomes one run per tag (refused otherwise).",
        )
        parser.add_argument("--encoding")

    def handle(self, *args, slug: str, paths: list[str], **options) -> None:
        campaign = get_campaign(slug)
        progress = StderrProgress()
        try:
            summary = import_runs(
                campaign=campaign,
                sources=[(path, path) for path in paths],
                replace=options["replace"],
                split_tags=options["split_tags"],
                encoding=options["encoding"],
                progress=progress,
            )
        except ParseError as exc:
            raise refused(exc) from None
        finally:
            progress.close()
        self.stdout.write(summary.message())
