"""``manage.py gold_accuracy SLUG [--json]``: each assessor's accuracy on gold documents, as
the progress page shows it (assess/gold.py), for a script."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from assess import gold
from campaigns.cli import get_campaign


class Command(BaseCommand):
    help = (
        "Each assessor's accuracy on the gold documents mixed into their work: their current "
        "verdict against the gold source's label, exact and binary (the campaign's relevance "
        "threshold)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--json", action="store_true", help="One JSON object.")

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        rows = gold.accuracy(campaign)
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "campaign": campaign.slug,
                        "relevance_threshold": campaign.relevance_threshold,
                        "assessors": [
                            {
                                "assessor": row.assessor,
                                "judged": row.judged,
                                "added_as_gold": row.added,
                                "correct": row.correct,
                                "accuracy": row.accuracy,
                                "binary_correct": row.binary_correct,
                                "binary_accuracy": row.binary_accuracy,
                            }
                            for row in rows
                        ],
                    },
                    indent=2,
                )
            )
            return
        if not rows:
            self.stdout.write("No gold documents judged yet.")
            return
        self.stdout.write(
            f"{'assessor':<20} {'judged':>6} {'added':>6} {'exact':>12} {'binary':>12}"
        )
        for row in rows:
            self.stdout.write(
                f"{row.assessor:<20} {row.judged:>6} {row.added:>6} "
                f"{row.correct:>4} ({row.accuracy:>4.0%}) {row.binary_correct:>4} "
                f"({row.binary_accuracy:>4.0%})"
            )
