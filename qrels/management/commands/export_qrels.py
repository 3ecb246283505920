from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from campaigns.cli import StderrProgress, get_campaign
from qrels.export import ExportError, bundle_name, export_bundle, use_snapshot
from qrels.policies import POLICIES, UNJUDGED, PolicyConflict, default_policy

SHOWN_CONFLICTS = 50


class Command(BaseCommand):
    help = (
        "Export a campaign's qrels, the assessor sidecar and its documentation as a bundle "
        "(a directory, or one zip with --zip)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--out",
            required=True,
            help="Directory to write the bundle into (created; must be empty). With --zip, "
            "the directory the zip is written to.",
        )
        parser.add_argument(
            "--policy",
            choices=POLICIES,
            help="How one label is chosen for a pair several assessors judged (default: "
            "primary if the campaign has primary assignments, else majority).",
        )
        parser.add_argument(
            "--per-assessor",
            action="store_true",
            help="qrels/<assessor>.txt per assessor instead of qrels.txt.",
        )
        parser.add_argument(
            "--unjudged",
            choices=UNJUDGED,
            default="omit",
            help="Pooled pairs nobody labelled: leave out (default) or write -1. Imported "
            "negative labels are written as they came either way.",
        )
        parser.add_argument(
            "--binary",
            action="store_true",
            help="Labels >= the campaign's relevance threshold become 1, others 0.",
        )
        parser.add_argument(
            "--no-imported",
            action="store_true",
            help="Leave out imported judgments (earlier qrels).",
        )
        parser.add_argument(
            "--include-models",
            action="store_true",
            help="Count model assessors' labels (an LLM judge's) in the qrels and the sidecar; "
            "left out by default.",
        )
        parser.add_argument(
            "--include-filled",
            action="store_true",
            help="Count a hybrid budget's filled labels (a model's, calibrated on the people's "
            "verdicts, on pairs no person judged) in the qrels and the sidecar; left out by "
            "default.",
        )
        parser.add_argument(
            "--usernames",
            action="store_true",
            help="Name people by login instead of their stable pseudonym.",
        )
        parser.add_argument(
            "--pool",
            type=int,
            metavar="VERSION",
            help="Only pairs of this pool version (default: every judgment).",
        )
        parser.add_argument("--zip", action="store_true", help="Write one zip file.")

    def handle(self, *args, slug: str, out: str, **options) -> None:
        campaign = get_campaign(slug)
        pool = None
        if options["pool"] is not None:
            pool = campaign.pools.filter(version=options["pool"]).first()
            if pool is None:
                versions = list(campaign.pools.built().values_list("version", flat=True))
                raise CommandError(
                    f"Campaign {slug!r} has no pool v{options['pool']}; built pools: "
                    + (", ".join(f"v{v}" for v in versions) or "none")
                    + "."
                )
        directory = Path(out)
        if options["zip"]:
            if directory.exists() and not directory.is_dir():
                raise CommandError(f"{directory} is not a directory.")
        elif directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise CommandError(f"{directory} is not an empty directory; choose a new one.")
        policy = options["policy"] or default_policy(campaign)
        progress = StderrProgress()
        kwargs = {
            "campaign": campaign,
            "policy": policy,
            "per_assessor": options["per_assessor"],
            "unjudged": options["unjudged"],
            "binary": options["binary"],
            "include_imported": not options["no_imported"],
            "include_models": options["include_models"],
            "include_filled": options["include_filled"],
            "usernames": options["usernames"],
            "pool": pool,
            "progress": progress,
        }
        target = None
        try:
            with transaction.atomic():
                use_snapshot()
                if options["zip"]:
                    directory.mkdir(parents=True, exist_ok=True)
                    # The name is fixed before the export starts so a failure can clean up.
                    from django.utils import timezone

                    now = timezone.now()
                    target = directory / f"{bundle_name(campaign, now)}.zip"
                    if target.exists():
                        raise CommandError(f"{target} exists already.")
                    with open(target, "wb") as handle:
                        result = export_bundle(destination=handle, zip=True, now=now, **kwargs)
                else:
                    result = export_bundle(destination=directory, **kwargs)
        except PolicyConflict as exc:
            self._remove(target)
            count = len(exc.conflicts)
            for line in exc.lines(SHOWN_CONFLICTS):
                self.stderr.write(line)
            if count > SHOWN_CONFLICTS:
                self.stderr.write(f"… and {count - SHOWN_CONFLICTS:,} more")
            raise CommandError(
                f"Nothing was exported: assessors disagree on {count:,} "
                f"pair{'s' if count != 1 else ''} and the policy is refuse."
            ) from None
        except (ExportError, ValueError) as exc:
            self._remove(target)
            raise CommandError(f"Nothing was exported: {exc}") from None
        except BaseException:
            self._remove(target)
            raise
        finally:
            progress.close()
        counts = result.counts
        where = target if target is not None else directory
        self.stdout.write(
            f"Exported {counts['judgments']:,} judgments"
            + (f", {counts['qrels_lines']:,} qrels lines" if not options["per_assessor"] else "")
            + f" (policy {policy}) to {where}"
            + (f" ({result.zip_bytes:,} bytes, sha256 {result.zip_sha256})" if target else "")
            + "."
        )

    @staticmethod
    def _remove(target: Path | None) -> None:
        if target is not None and target.exists():
            target.unlink()
