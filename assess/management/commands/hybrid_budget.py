"""``manage.py hybrid_budget SLUG --pool V --model NAME --budget 30% --topics all``: people judge at
most a share (or a count) of each topic's pairs, sent first where the model is least sure
(assess/hybrid.py); ``--set 301=12`` gives one topic its own budget. Prints each topic's budget."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from assess.hybrid import HybridError, Share, budget_rows, set_budget
from assess.models import HybridPlan
from campaigns.cli import get_campaign
from campaigns.models import Assessor


class Command(BaseCommand):
    help = "Set a pool's hybrid budget: how many of each topic's pairs people judge."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--pool", type=int, required=True, help="Pool version.")
        parser.add_argument("--model", required=True, help="The model assessor to route by.")
        parser.add_argument("--budget", help="Each topic's budget: a share (30%%) or a count (12).")
        parser.add_argument(
            "--topics", default="all", help="Comma-separated topic ids given --budget, or 'all'."
        )
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="TOPIC=BUDGET",
            help="One topic's own budget (repeatable): 301=12 or 301=25%%.",
        )
        parser.add_argument(
            "--routing", choices=HybridPlan.Routing.values, default=HybridPlan.Routing.UNCERTAIN
        )
        parser.add_argument(
            "--probabilities",
            action="store_true",
            help="Strata from the model's label probabilities (logprobs) instead of its labels.",
        )
        parser.add_argument("--seed", type=int)

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        pool = campaign.pools.filter(version=options["pool"]).first()
        if pool is None:
            raise CommandError(f"No pool v{options['pool']} in {slug}.")
        model = Assessor.objects.filter(campaign=campaign, name=options["model"]).first()
        if model is None:
            raise CommandError(f"No assessor {options['model']!r} in {slug}.")
        topics = {t.topic_id: t for t in pool.topics.all()}
        budgets = {}
        try:
            if options["budget"] is not None:
                if options["topics"].strip().lower() == "all":
                    chosen = list(topics)
                else:
                    chosen = [t.strip() for t in options["topics"].split(",") if t.strip()]
                for topic_id in chosen:
                    if topic_id not in topics:
                        raise HybridError(f"Pool v{pool.version} has no topic {topic_id}.")
                    budgets[topics[topic_id]] = Share.parse(
                        options["budget"], where=f"topic {topic_id}"
                    )
            for entry in options["set"]:
                topic_id, sep, text = entry.partition("=")
                if not sep or topic_id.strip() not in topics:
                    raise HybridError(
                        f"--set {entry!r}: write TOPIC=BUDGET with a topic of pool v{pool.version}."
                    )
                budgets[topics[topic_id.strip()]] = Share.parse(text, where=f"topic {topic_id}")
            if not budgets:
                raise HybridError("Give --budget (with --topics) or --set TOPIC=BUDGET.")
            plan = set_budget(
                pool=pool,
                model=model,
                budgets=budgets,
                route=options["routing"],
                probabilities=options["probabilities"],
                seed=options["seed"],
            )
        except HybridError as exc:
            raise CommandError(f"Nothing was changed: {exc}") from None
        self.stdout.write(
            f"Pool v{pool.version}: routed by {model.name} ({plan.routing}, seed {plan.seed})."
        )
        for row in budget_rows(pool):
            if row.budget is not None:
                self.stdout.write(
                    f"{row.topic.topic_id}: {row.share} -> people judge {row.budget.allowed} of "
                    f"{row.budget.routed} pairs the model labelled ({row.pairs} pooled)."
                )
