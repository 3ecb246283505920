"""``manage.py fill_hybrid SLUG --pool V [--topics 301,302]``: once a topic's hybrid budget is
judged, fill its pairs nobody judged with the model's labels calibrated on the people's verdicts
of that topic (assess/hybrid.py). Filled labels are marked ``filled`` in the sidecar and enter
qrels only with ``export_qrels --include-filled``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from assess.hybrid import HybridError, fill
from campaigns.cli import get_campaign


class Command(BaseCommand):
    help = "Fill the unjudged pairs of judged hybrid-budget topics with calibrated model labels."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--pool", type=int, required=True, help="Pool version.")
        parser.add_argument(
            "--topics", default="all", help="Comma-separated topic ids, or 'all' (default)."
        )

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        pool = campaign.pools.filter(version=options["pool"]).first()
        if pool is None:
            raise CommandError(f"No pool v{options['pool']} in {slug}.")
        topics = None
        if options["topics"].strip().lower() != "all":
            wanted = [t.strip() for t in options["topics"].split(",") if t.strip()]
            topics = list(campaign.topics.filter(topic_id__in=wanted))
            missing = sorted(set(wanted) - {t.topic_id for t in topics})
            if missing:
                raise CommandError(f"No topic {', '.join(missing)} in {slug}.")
        try:
            report = fill(pool=pool, topics=topics)
        except HybridError as exc:
            raise CommandError(str(exc)) from None
        for row in report:
            self.stdout.write(
                f"{row.topic}: {row.judged} judged by people, {row.filled} filled "
                f"({row.unchanged} unchanged, {row.flipped} calibrated against the model's own "
                f"verdict), {row.unfillable} left unjudged (no model label)."
            )
