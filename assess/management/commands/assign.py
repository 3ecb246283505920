from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from assess import gold
from assess.assignments import AssignmentError, assign
from assess.models import Assignment
from campaigns.cli import get_campaign


class Command(BaseCommand):
    help = "Give an assessor a pool's documents for some topics (primary or shared queue)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--pool", type=int, required=True, help="Pool version.")
        parser.add_argument("--assessor", required=True, help="Username of the assessor.")
        parser.add_argument("--topics", required=True, help="Comma-separated topic ids, or 'all'.")
        parser.add_argument("--mode", choices=["primary", "queue"], default="primary")
        parser.add_argument(
            "--overlap", type=float, help="Share of each topic also judged for agreement (0-1]."
        )
        parser.add_argument(
            "--with", dest="partner", help="Username judging the overlap (primary mode)."
        )
        parser.add_argument(
            "--interleave", action="store_true", help="Mix the topics in one order."
        )
        parser.add_argument(
            "--repeat-rate",
            type=float,
            default=0.0,
            help="Share of the documents served again later, unannounced, to measure the "
            "assessor's consistency (0-0.5; primary mode and its overlap).",
        )
        parser.add_argument(
            "--gold-from",
            metavar="NAME",
            help="Imported qrels source (import_qrels --assessor NAME) whose labelled pairs are "
            "mixed silently into the order as gold documents, for accuracy.",
        )
        gold_amount = parser.add_mutually_exclusive_group()
        gold_amount.add_argument(
            "--gold-rate",
            type=float,
            default=0.0,
            help="Gold documents as a share of the documents given (0-0.5).",
        )
        gold_amount.add_argument("--gold-count", type=int, help="Gold documents: how many.")
        parser.add_argument("--seed", type=int)

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        pool = campaign.pools.filter(version=options["pool"]).first()
        if pool is None:
            raise CommandError(f"No pool v{options['pool']} in {slug}.")
        User = get_user_model()

        def user(name: str):
            found = User.objects.filter(username=name).first()
            if found is None:
                raise CommandError(f"No user {name!r}.")
            return found

        if options["topics"].strip().lower() == "all":
            topics = list(pool.topics.all())
        else:
            wanted = [t.strip() for t in options["topics"].split(",") if t.strip()]
            topics = list(campaign.topics.filter(topic_id__in=wanted))
            missing = sorted(set(wanted) - {t.topic_id for t in topics})
            if missing:
                raise CommandError(f"No topic {', '.join(missing)} in {slug}.")
        gold_source = None
        if options["gold_from"]:
            try:
                gold_source = gold.source_named(campaign, options["gold_from"])
            except ValueError as exc:
                raise CommandError(f"--gold-from: {exc}") from None
        partner = user(options["partner"]) if options["partner"] else None
        if partner is not None and options["overlap"] is None:
            raise CommandError("--with needs --overlap (the share of documents to double).")
        try:
            created = assign(
                campaign=campaign,
                pool=pool,
                user=user(options["assessor"]),
                topics=topics,
                mode=options["mode"],
                seed=options["seed"],
                interleave=options["interleave"],
                overlap=options["overlap"],
                partner=partner,
                repeat_rate=options["repeat_rate"],
                gold_source=gold_source,
                gold_rate=options["gold_rate"],
                gold_count=options["gold_count"],
            )
        except AssignmentError as exc:
            raise CommandError(str(exc)) from None
        for assignment in created:
            count = assignment.items.count()
            what = (
                f"{count} documents"
                if assignment.mode != Assignment.Mode.QUEUE
                else "the shared queue"
            )
            gold_items = assignment.items.filter(gold__isnull=False).count()
            if gold_items:
                what += f", {gold_items} of them gold"
            self.stdout.write(
                f"{assignment.assessor.name}: {assignment.get_mode_display()} on "
                f"{len(topics)} topic(s) of pool v{pool.version}, {what} (seed {assignment.seed})."
            )
