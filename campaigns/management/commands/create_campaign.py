from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from campaigns.models import Campaign
from campaigns.scales import SCALES


class Command(BaseCommand):
    help = "Create a campaign with a label scale preset."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="Short name used in addresses, e.g. covid-round1")
        parser.add_argument("--title", required=True)
        parser.add_argument("--scale", choices=sorted(SCALES), default="graded3")
        parser.add_argument("--description", default="")
        parser.add_argument("--guidelines", default="")

    def handle(self, *args, slug: str, title: str, scale: str, **options) -> None:
        if Campaign.objects.filter(slug=slug).exists():
            raise CommandError(f"A campaign with slug {slug!r} already exists.")
        preset = SCALES[scale]
        campaign = Campaign(
            slug=slug,
            title=title,
            description=options["description"],
            guidelines=options["guidelines"],
            relevance_threshold=preset.threshold,
        )
        try:
            campaign.full_clean()
        except ValidationError as exc:
            problems = "; ".join(
                f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()
            )
            raise CommandError(problems) from None
        with transaction.atomic():
            campaign.save()
            campaign.save_rubric(list(preset.labels), note=f"{preset.title} preset")
        self.stdout.write(
            f"Created campaign {slug} ({preset.title}, relevant from {preset.threshold})."
        )
