from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from campaigns.models import Campaign
from campaigns.scales import SCALES, default_threshold, parse_labels


class Command(BaseCommand):
    help = (
        "Create a campaign with a label scale: a preset (--scale) or any scale (--labels 0-4, "
        "--labels 1,2,3,4). Names, descriptions and examples are edited on the rubric page."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="Short name used in addresses, e.g. covid-round1")
        parser.add_argument("--title", required=True)
        scale = parser.add_mutually_exclusive_group()
        scale.add_argument(
            "--scale", choices=sorted(SCALES), help="A preset scale (default graded3)."
        )
        scale.add_argument(
            "--labels",
            metavar="LABELS",
            help="Any scale: a range (0-4, as TREC RAG), a list (1,2,3,4, as Cranfield's "
            "codes), both (0-2,4), with names if wanted (0=Not relevant,1=Relevant).",
        )
        parser.add_argument(
            "--threshold",
            type=int,
            help="The lowest label counted as relevant (default: the preset's; with --labels, "
            "the second-lowest label).",
        )
        parser.add_argument("--description", default="")
        parser.add_argument("--guidelines", default="")

    def handle(self, *args, slug: str, title: str, **options) -> None:
        if Campaign.objects.filter(slug=slug).exists():
            raise CommandError(f"A campaign with slug {slug!r} already exists.")
        if options["labels"] is not None:
            try:
                labels = parse_labels(options["labels"])
            except ValueError as exc:
                raise CommandError(f"--labels: {exc}.") from None
            threshold = default_threshold(labels)
            described = f"labels {', '.join(str(label.value) for label in labels)}"
            note = f"--labels {options['labels']}"
        else:
            preset = SCALES[options["scale"] or "graded3"]
            labels, threshold = list(preset.labels), preset.threshold
            described, note = preset.title, f"{preset.title} preset"
        if options["threshold"] is not None:
            threshold = options["threshold"]
            if threshold not in {label.value for label in labels}:
                raise CommandError(
                    f"--threshold {threshold} is not one of the labels "
                    f"({', '.join(str(label.value) for label in labels)})."
                )
        campaign = Campaign(
            slug=slug,
            title=title,
            description=options["description"],
            guidelines=options["guidelines"],
            relevance_threshold=threshold,
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
            campaign.save_rubric(labels, note=note)
        self.stdout.write(f"Created campaign {slug} ({described}, relevant from {threshold}).")
