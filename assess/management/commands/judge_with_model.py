"""``manage.py judge_with_model SLUG --pool V --endpoint URL --model NAME``: a model judges a pool.

Finds or makes the frozen configuration (a model assessor of its own) and queues the job; in the
embedded setup (no broker) the job runs here and its summary is printed. The API key is read by
the worker from the environment variable named by ``--api-key-env``; it is never stored.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from assess import llm
from assess.model_judging import ConfigError, Execution, model_config, start_model_judging
from assess.models import ModelConfig
from campaigns.cli import get_campaign


class Command(BaseCommand):
    help = "Judge a pool's pairs with a model behind an OpenAI-compatible endpoint."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--pool", type=int, required=True, help="Pool version.")
        parser.add_argument(
            "--endpoint",
            required=True,
            help="Base URL (http://localhost:11434/v1 for Ollama, http://host:8000/v1 for vLLM) "
            "or the full /v1/chat/completions URL.",
        )
        parser.add_argument("--model", required=True, help="The model's name at the endpoint.")
        parser.add_argument(
            "--api-key-env", default="", help="NAME of the environment variable with the key."
        )
        parser.add_argument(
            "--template",
            help="Prompt template file ($title $description $narrative $labels "
            "$document_title $document); default: a built-in rubric-aware prompt.",
        )
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--max-tokens", type=int, default=8)
        parser.add_argument("--label-rule", choices=ModelConfig.LabelRule.values, default="exact")
        parser.add_argument(
            "--logprobs", action="store_true", help="Ask for logprobs (label probabilities)."
        )
        parser.add_argument("--concurrency", type=int, default=4, help="Calls at a time (4).")
        parser.add_argument("--rate", type=float, default=60, help="Calls a minute (60; 0: any).")
        parser.add_argument("--timeout", type=float, default=60, help="Seconds per call (60).")
        parser.add_argument("--retries", type=int, default=3, help="On 429, 5xx, timeouts (3).")
        parser.add_argument(
            "--backoff", type=float, default=1.0, help="First wait, doubling (1 s)."
        )
        parser.add_argument("--price-in", type=float, default=0.0, help="$ per 1M prompt tokens.")
        parser.add_argument(
            "--price-out", type=float, default=0.0, help="$ per 1M completion tokens."
        )
        parser.add_argument(
            "--retry-interrupted",
            action="store_true",
            help="Ask again the pairs whose call was out when a worker died (may pay twice).",
        )

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        pool = campaign.pools.filter(version=options["pool"]).first()
        if pool is None:
            raise CommandError(f"No pool v{options['pool']} in {slug}.")
        template = llm.DEFAULT_TEMPLATE
        if options["template"]:
            try:
                template = Path(options["template"]).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"{options['template']}: {exc}") from None
        execution = Execution(
            concurrency=options["concurrency"],
            per_minute=options["rate"],
            timeout=options["timeout"],
            retries=options["retries"],
            backoff=options["backoff"],
            price_prompt=options["price_in"],
            price_completion=options["price_out"],
            retry_interrupted=options["retry_interrupted"],
        )
        try:
            with transaction.atomic():
                config = model_config(
                    campaign=campaign,
                    endpoint=options["endpoint"],
                    model=options["model"],
                    prompt_template=template,
                    temperature=options["temperature"],
                    seed=options["seed"],
                    max_tokens=options["max_tokens"],
                    label_rule=options["label_rule"],
                    logprobs=options["logprobs"],
                    api_key_env=options["api_key_env"],
                )
                job = start_model_judging(config=config, pool=pool, execution=execution)
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        job.refresh_from_db()
        self.stdout.write(
            f"Assessor {config.assessor.name} (configuration {config.fingerprint[:12]}); "
            f"job {job.pk}: {job.status}."
        )
        if job.is_final:
            self.stdout.write(job.result.get("message") or job.error)
            if job.status != job.Status.DONE:
                raise CommandError(job.error)
