from django.core.management.base import BaseCommand, CommandError

from campaigns.cli import StderrProgress, get_campaign, refused
from campaigns.formats import DOCUMENT_FORMATS
from campaigns.imports import import_documents
from campaigns.textfiles import ParseError
from pooling.imports import pooled_doc_ids


class Command(BaseCommand):
    help = (
        "Import documents (TREC SGML, JSONL, TSV or SMART, optionally gzip) into a campaign, "
        "streaming, all or nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path")
        parser.add_argument("--format", choices=DOCUMENT_FORMATS)
        parser.add_argument(
            "--only-pooled",
            action="store_true",
            help="Keep only documents in the campaign's pools: a corpus of any size streams "
            "through and only what will be judged is stored.",
        )
        parser.add_argument("--encoding")

    def handle(self, *args, slug: str, path: str, **options) -> None:
        campaign = get_campaign(slug)
        keep = None
        if options["only_pooled"]:
            keep = pooled_doc_ids(campaign)
            if not keep:
                raise CommandError(
                    "The campaign has no pools yet, so --only-pooled would keep nothing."
                )
        progress = StderrProgress()
        try:
            summary = import_documents(
                campaign=campaign,
                source=path,
                name=path,
                format=options["format"],
                keep=keep,
                encoding=options["encoding"],
                progress=progress,
            )
        except ParseError as exc:
            raise refused(exc) from None
        finally:
            progress.close()
        self.stdout.write(summary.message())
