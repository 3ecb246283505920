from django.core.management.base import BaseCommand

from campaigns.cli import get_campaign, refused
from campaigns.formats import TOPIC_FORMATS
from campaigns.imports import import_topics
from campaigns.textfiles import ParseError


class Command(BaseCommand):
    help = "Import topics (TREC SGML, TSV, JSONL or SMART) into a campaign, all or nothing."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path")
        parser.add_argument(
            "--format", choices=TOPIC_FORMATS, help="Guessed from content if absent."
        )
        parser.add_argument(
            "--positional-ids",
            action="store_true",
            help="SMART files: number topics 1..N in file order (Cranfield's qrels use these).",
        )
        parser.add_argument("--encoding", help="Text encoding when the file is not UTF-8.")

    def handle(self, *args, slug: str, path: str, **options) -> None:
        campaign = get_campaign(slug)
        try:
            summary = import_topics(
                campaign=campaign,
                source=path,
                name=path,
                format=options["format"],
                positional_ids=options["positional_ids"],
                encoding=options["encoding"],
            )
        except ParseError as exc:
            raise refused(exc) from None
        self.stdout.write(summary.message())
