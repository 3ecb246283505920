"""``manage.py gullibility_check SLUG --assessor NAME``: are a model's labels moved by query
words alone? (assess/gullibility.py)

Asks the model configuration of assessor NAME again, for a sample of the pairs people judged
non-relevant and it labelled non-relevant too, with the topic's query terms appended to the
document, and prints how many flip to relevant (overall, per topic, and the pairs). In the
embedded setup (no broker) the job runs here. ``--report`` prints what earlier checks found,
asking nothing. A campaign without a model configuration (no endpoint: only imported model
labels, say) has nothing to ask: the check says so and is skipped.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from assess import gullibility
from assess.model_judging import ConfigError, Execution
from assess.models import ModelConfig
from campaigns.cli import get_campaign
from campaigns.models import Assessor


class Command(BaseCommand):
    help = "Re-ask a model with the query terms appended to non-relevant documents; count flips."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--assessor",
            help="The model assessor whose configuration is asked (default: the campaign's only "
            "configuration).",
        )
        parser.add_argument(
            "--limit",
            type=int,
            default=gullibility.DEFAULT_LIMIT,
            help=f"Pairs asked, a seeded sample ({gullibility.DEFAULT_LIMIT}; 0: all).",
        )
        parser.add_argument("--seed", type=int, default=0, help="The sample's seed (0).")
        parser.add_argument("--concurrency", type=int, default=4, help="Calls at a time (4).")
        parser.add_argument("--rate", type=float, default=60, help="Calls a minute (60; 0: any).")
        parser.add_argument("--timeout", type=float, default=60, help="Seconds per call (60).")
        parser.add_argument("--retries", type=int, default=3, help="On 429, 5xx, timeouts (3).")
        parser.add_argument("--backoff", type=float, default=1.0, help="First wait (1 s).")
        parser.add_argument("--price-in", type=float, default=0.0, help="$ per 1M prompt tokens.")
        parser.add_argument("--price-out", type=float, default=0.0, help="$ per 1M output tokens.")
        parser.add_argument(
            "--report", action="store_true", help="Print what earlier checks found; ask nothing."
        )

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        configs = ModelConfig.objects.filter(campaign=campaign).select_related(
            "assessor", "campaign", "rubric_version"
        )
        name = options["assessor"]
        if name is not None:
            assessor = Assessor.objects.filter(campaign=campaign, name=name).first()
            if assessor is None or assessor.kind != Assessor.Kind.MODEL:
                raise CommandError(f"{name!r} is not a model assessor of {slug}.")
            config = configs.filter(assessor=assessor).first()
            if config is None:
                self.stdout.write(
                    f"{name}'s labels were imported: there is no endpoint to ask again. "
                    "The gullibility check is skipped."
                )
                return
        else:
            found = list(configs)
            if not found:
                self.stdout.write(
                    f"No model endpoint is configured in {slug} (judge_with_model makes one): "
                    "the gullibility check is skipped."
                )
                return
            if len(found) > 1:
                names = ", ".join(c.assessor.name for c in found)
                raise CommandError(
                    f"Several model configurations; choose one with --assessor: {names}."
                )
            (config,) = found
        if not options["report"]:
            execution = Execution(
                concurrency=options["concurrency"],
                per_minute=options["rate"],
                timeout=options["timeout"],
                retries=options["retries"],
                backoff=options["backoff"],
                price_prompt=options["price_in"],
                price_completion=options["price_out"],
            )
            try:
                with transaction.atomic():
                    job = gullibility.start_gullibility_check(
                        config=config,
                        execution=execution,
                        limit=options["limit"],
                        seed=options["seed"],
                    )
            except ConfigError as exc:
                raise CommandError(str(exc)) from None
            job.refresh_from_db()
            self.stdout.write(f"Job {job.pk}: {job.status}.")
            if job.is_final and job.status != job.Status.DONE:
                raise CommandError(job.error)
            if not job.is_final:
                return
        self._print(gullibility.report(config))

    def _print(self, found: gullibility.GullibilityReport) -> None:
        threshold = found.config.campaign.relevance_threshold
        rate = f"{found.rate:.1%}" if found.rate is not None else "n/a"
        self.stdout.write(
            f"{found.config.assessor.name} ({found.config.model}, configuration "
            f"{found.config.fingerprint[:12]}): query terms appended to {found.asked} of "
            f"{found.candidates} pairs people and the model judged non-relevant; "
            f"{found.labelled} answered with a label, {found.flipped} of them relevant "
            f"(label >= {threshold}): flip rate {rate}. "
            f"{found.unparseable} unparseable, {found.failed} without an answer; "
            f"{found.prompt_tokens:,} prompt + {found.completion_tokens:,} completion tokens."
        )
        if found.topics:
            self.stdout.write("topic\tlabelled\tflipped\trate")
            for topic in found.topics:
                topic_rate = f"{topic.rate:.3f}" if topic.rate is not None else ""
                self.stdout.write(f"{topic.topic}\t{topic.labelled}\t{topic.flipped}\t{topic_rate}")
        if found.pairs:
            self.stdout.write("topic\tdocument\tmodel label\twith terms\tstatus")
            for pair in found.pairs:
                label = "" if pair.label is None else str(pair.label)
                self.stdout.write(
                    f"{pair.topic}\t{pair.doc_id}\t{pair.original_label}\t{label}\t{pair.status}"
                )
