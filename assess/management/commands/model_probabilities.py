"""``manage.py model_probabilities SLUG --assessor NAME``: a model judge's probability of relevance
per pair, ``topic docid p`` lines on stdout, for ``manage.py hybrid --probabilities``.

p is the share of the label probabilities (from the endpoint's logprobs) on labels at or above
the campaign's relevance threshold. Pairs whose call stored no probabilities are left out (and
counted on stderr): absence is not a probability.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from assess.models import ModelCall, ModelConfig
from campaigns.cli import get_campaign


class Command(BaseCommand):
    help = "Write a model judge's probability of relevance per pair (topic docid p)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--assessor", required=True, help="The model assessor's name.")

    def handle(self, *args, slug: str, assessor: str, **options) -> None:
        campaign = get_campaign(slug)
        config = (
            ModelConfig.objects.filter(campaign=campaign, assessor__name=assessor)
            .select_related("rubric_version")
            .first()
        )
        if config is None:
            raise CommandError(f"No model assessor {assessor!r} in {slug}.")
        threshold = campaign.relevance_threshold
        written = missing = 0
        calls = (
            ModelCall.objects.filter(config=config, status=ModelCall.Status.LABELLED)
            .order_by("topic__topic_id", "doc_id")
            .values_list("topic__topic_id", "doc_id", "probabilities")
        )
        for topic_id, doc_id, probabilities in calls.iterator(chunk_size=2000):
            if not probabilities:
                missing += 1
                continue
            relevant = sum(p for label, p in probabilities.items() if int(label) >= threshold)
            self.stdout.write(f"{topic_id} {doc_id} {relevant:.6f}")
            written += 1
        self.stderr.write(
            f"{written:,} pairs written; {missing:,} labelled without probabilities left out."
        )
