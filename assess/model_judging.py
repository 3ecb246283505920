"""A model judges a pool: one frozen configuration, one call per pair, never paid twice.

:func:`model_config` finds or makes the configuration (and its model assessor) for a set of
settings; :func:`start_model_judging` queues the job; :func:`judge_pool` is the job's handler.

The handler runs outside one big transaction (``run_job(..., atomic=False)``): each pair's
:class:`~assess.models.ModelCall` row is committed as ``sent`` before its request leaves and
completed (with the judgment, for a label) in one transaction after the answer. A worker killed
mid-job therefore leaves every answered pair recorded and at most ``concurrency`` rows ``sent``;
the next attempt (Celery's redelivery, a retry) marks those ``interrupted`` (their calls may have
been paid) and asks only the pairs that have no row, or whose call failed without an answer.
Threads make the HTTP calls; only the job's own thread touches the database.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from assess import llm
from assess.models import ModelCall, ModelConfig
from campaigns.jobs import JobFailed, Progress, enqueue
from campaigns.judgments import record_judgment
from campaigns.models import Assessor, Campaign, Document, Job, Topic
from pooling.models import Pool, PoolEntry

JUDGE_TASK = "assess.tasks.judge_with_model_task"
JOB_KIND = "judge_with_model"
# Calls in a row without an answer (after their retries) that stop the job: the endpoint is down.
FAILURES_IN_A_ROW = 8
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Execution:
    """How the job calls (not what it asks): these change no label, so they are job
    parameters, not part of the configuration."""

    concurrency: int = 4
    per_minute: float = 60.0
    timeout: float = 60.0
    retries: int = 3
    backoff: float = 1.0
    # Price per million tokens, for the cost on the job page (0: not counted).
    price_prompt: float = 0.0
    price_completion: float = 0.0
    retry_interrupted: bool = False

    @classmethod
    def from_form(cls, data: dict[str, Any]) -> Execution:
        """From a form's cleaned data: the fields it has, the defaults for the rest."""
        return cls(**{f.name: data[f.name] for f in dataclass_fields(cls) if f.name in data})

    def check(self) -> None:
        if not 1 <= self.concurrency <= 64:
            raise ConfigError("Concurrency is between 1 and 64 calls at a time.")
        if self.per_minute < 0 or self.timeout <= 0 or self.retries < 0 or self.backoff < 0:
            raise ConfigError("Rate, timeout, retries and backoff cannot be negative.")
        if self.price_prompt < 0 or self.price_completion < 0:
            raise ConfigError("Prices cannot be negative.")


def model_config(
    *,
    campaign: Campaign,
    endpoint: str,
    model: str,
    prompt_template: str = llm.DEFAULT_TEMPLATE,
    temperature: float = 0.0,
    seed: int | None = 0,
    max_tokens: int = 8,
    label_rule: str = ModelConfig.LabelRule.EXACT,
    logprobs: bool = False,
    api_key_env: str = "",
) -> ModelConfig:
    """The configuration for these settings and the campaign's current rubric: the existing
    one when every field matches, else a new one with its own model assessor."""
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"The endpoint {endpoint!r} is not an http(s) URL.")
    if not model.strip():
        raise ConfigError("The model needs a name.")
    if api_key_env and not ENV_NAME.match(api_key_env):
        raise ConfigError(
            f"--api-key-env takes the NAME of an environment variable, not {api_key_env[:3]}…"
        )
    if api_key_env and api_key_env not in settings.MODEL_API_KEY_VARIABLES:
        raise ConfigError(_not_allowed(api_key_env))
    if label_rule not in ModelConfig.LabelRule.values:
        raise ConfigError(f"Unknown label rule {label_rule!r}.")
    if not 0 <= temperature <= 2 or max_tokens < 1:
        raise ConfigError("Temperature is in [0, 2] and max tokens at least 1.")
    try:
        llm.check_template(prompt_template)
    except llm.TemplateError as exc:
        raise ConfigError(str(exc)) from None
    rubric = campaign.current_rubric()
    if rubric is None:
        raise ConfigError(f"Campaign {campaign.slug} has no rubric: the prompt lists its labels.")
    fields: dict[str, Any] = {
        "endpoint": endpoint,
        "model": model,
        "prompt_sha256": hashlib.sha256(prompt_template.encode()).hexdigest(),
        "temperature": float(temperature),
        "seed": seed,
        "max_tokens": max_tokens,
        "label_rule": label_rule,
        "logprobs": logprobs,
        "api_key_env": api_key_env,
        "rubric_version": rubric.number,
    }
    fingerprint = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    existing = ModelConfig.objects.filter(campaign=campaign, fingerprint=fingerprint).first()
    if existing is not None:
        return existing
    fields.pop("rubric_version")
    try:
        with transaction.atomic():
            assessor = Assessor.objects.create(
                campaign=campaign,
                name=f"model {model[:120]} {fingerprint[:8]}",
                kind=Assessor.Kind.MODEL,
                details={"model_fingerprint": fingerprint},
            )
            return ModelConfig.objects.create(
                campaign=campaign,
                assessor=assessor,
                rubric_version=rubric,
                prompt_template=prompt_template,
                fingerprint=fingerprint,
                **fields,
            )
    except IntegrityError:  # made at the same moment by another request
        return ModelConfig.objects.get(campaign=campaign, fingerprint=fingerprint)


def _not_allowed(name: str) -> str:
    allowed = ", ".join(settings.MODEL_API_KEY_VARIABLES) or "none"
    return (
        f"{name} is not one of the variables a model's key may be read from ({allowed}); "
        "the administrator lists them in MODEL_API_KEY_VARIABLES."
    )


def running_job(kind: str, config: ModelConfig) -> Job | None:
    """A job of ``kind`` queued or running for ``config`` (one at a time per configuration)."""
    return (
        Job.objects.active()
        .filter(kind=kind, campaign_id=config.campaign_id, params__config=config.pk)
        .order_by()
        .first()
    )


def start_model_judging(
    *, config: ModelConfig, pool: Pool, execution: Execution = Execution(), user=None
) -> Job:
    """Queue the job that judges ``pool``'s pairs with ``config`` (one at a time per config)."""
    execution.check()
    if pool.campaign_id != config.campaign_id:
        raise ConfigError("The pool and the configuration belong to different campaigns.")
    if pool.built_at is None:
        raise ConfigError(f"Pool v{pool.version} is not built.")
    busy = running_job(JOB_KIND, config)
    if busy is not None:
        raise ConfigError(f"Job {busy.pk} is already judging with this configuration.")
    return enqueue(
        kind=JOB_KIND,
        task=JUDGE_TASK,
        campaign=config.campaign,
        params={
            "config": config.pk,
            "pool": pool.pk,
            "assessor": config.assessor.name,
            **execution.__dict__,
        },
        user=user,
    )


# --- The job ------------------------------------------------------------------------------------


@dataclass
class _Totals:
    labelled: int = 0
    unparseable: int = 0
    failed: int = 0
    failing_in_a_row: int = 0  # calls that got no answer since the last one that did
    prompt_tokens: int = 0
    completion_tokens: int = 0


def worker_api_key(config: ModelConfig) -> str | None:
    """The API key a configuration names, from the worker's environment (never stored); the
    job fails with the reason when the variable is not allowed or not set."""
    if not config.api_key_env:
        return None
    if config.api_key_env not in settings.MODEL_API_KEY_VARIABLES:
        raise JobFailed(_not_allowed(config.api_key_env))
    api_key = os.environ.get(config.api_key_env)
    if not api_key:
        raise JobFailed(f"The environment variable {config.api_key_env} is not set for the worker.")
    return api_key


def call_request(
    config: ModelConfig,
    *,
    topic: Topic,
    labels: list[tuple[int, str, str]],
    title: str,
    body: str,
    url: str,
    api_key: str | None,
    logprobs: bool | None = None,
) -> llm.Request:
    """The request that asks ``config`` about one document (``body`` as the model is to read
    it) for ``topic``: its frozen prompt template, model and sampling settings."""
    prompt = llm.render_prompt(
        config.prompt_template,
        topic={
            "title": topic.title,
            "description": topic.description,
            "narrative": topic.narrative,
        },
        labels=labels,
        document_title=title,
        document=body,
    )
    return llm.Request(
        url=url,
        model=config.model,
        prompt=prompt,
        temperature=config.temperature,
        seed=config.seed,
        max_tokens=config.max_tokens,
        logprobs=config.logprobs if logprobs is None else logprobs,
        api_key=api_key,
    )


def _cost(execution: Execution, prompt_tokens: int, completion_tokens: int) -> float:
    return (
        prompt_tokens * execution.price_prompt + completion_tokens * execution.price_completion
    ) / 1_000_000


def judge_pool(job: Job, progress: Progress) -> dict[str, Any]:
    params = dict(job.params)
    config = ModelConfig.objects.select_related("campaign", "assessor", "rubric_version").get(
        pk=params.pop("config")
    )
    pool = Pool.objects.get(pk=params.pop("pool"))
    params.pop("assessor", None)
    # The first job of this run: its follow-ups (slices) do not ask again what failed in it.
    run_of = params.pop("run_of", job.pk)
    execution = Execution(**params)
    api_key = worker_api_key(config)
    # Rows another attempt left "sent" (its worker died mid-call): the call may have been paid.
    ModelCall.objects.filter(config=config, status=ModelCall.Status.SENT).update(
        status=ModelCall.Status.INTERRUPTED,
        error="The worker was lost while this call was out; not sent again.",
        finished_at=timezone.now(),
    )
    pairs = list(
        PoolEntry.objects.filter(pool=pool, sampled=True)
        .order_by("topic__position", "topic_id", "doc_id")
        .values_list("topic_id", "doc_id")
    )
    settled = {ModelCall.Status.LABELLED, ModelCall.Status.UNPARSEABLE}
    if not execution.retry_interrupted:
        settled.add(ModelCall.Status.INTERRUPTED)
    known = {
        (topic, doc): (status, asked_by)
        for topic, doc, status, asked_by in ModelCall.objects.filter(config=config)
        .order_by()
        .values_list("topic_id", "doc_id", "status", "job_id")
    }

    def to_ask(pair: tuple[int, str]) -> bool:
        status, asked_by = known.get(pair, (None, None))
        if status == ModelCall.Status.FAILED:
            # Failed in an earlier run: asked again; in this run (an earlier slice): not.
            return asked_by is None or asked_by < run_of
        return status not in settled

    todo = [pair for pair in pairs if to_ask(pair)]
    progress.update(len(pairs) - len(todo), total=len(pairs), message="asking the model")

    topics = {t.pk: t for t in Topic.objects.filter(pk__in={t for t, _ in todo})}
    labels = [
        (label.value, label.name, label.description) for label in config.rubric_version.labels.all()
    ]
    scale = {value for value, _, _ in labels}
    url = llm.chat_url(config.endpoint)
    limiter = llm.RateLimiter(execution.per_minute)
    totals = _Totals()
    in_flight: dict[Future, ModelCall] = {}

    def report() -> None:
        # Set, not Progress.update: that also checks for a cancel, which must not interrupt
        # recording the answers of calls already out (the heartbeat writes these values).
        tokens = totals.prompt_tokens + totals.completion_tokens
        cost = _cost(execution, totals.prompt_tokens, totals.completion_tokens)
        unlabelled = totals.failed + totals.unparseable
        progress.message = (
            f"{tokens:,} tokens"
            + (f", ${cost:.4f}" if cost else "")
            + (f", {unlabelled} without a label" if unlabelled else "")
        )

    def settle(future: Future, call: ModelCall) -> None:
        failed_before = totals.failed
        _record(future, call, config=config, scale=scale, totals=totals)
        totals.failing_in_a_row = (
            totals.failing_in_a_row + 1 if totals.failed > failed_before else 0
        )
        progress.done += 1
        report()

    def check_endpoint() -> None:
        # An endpoint that is down would otherwise be retried pair after pair for hours.
        if totals.failing_in_a_row >= FAILURES_IN_A_ROW:
            raise JobFailed(
                f"The endpoint gave no answer to {totals.failing_in_a_row} calls in a row "
                f"(the last: {last_error()}); nothing more was sent. Run it again once it answers: "
                "only the pairs without an answer are asked."
            )

    def last_error() -> str:
        call = (
            ModelCall.objects.filter(config=config, status=ModelCall.Status.FAILED, job=job)
            .order_by("-finished_at", "-pk")
            .only("error")
            .first()
        )
        return call.error if call is not None else "no answer"

    # A pool can take longer than a task may run (CELERY_TASK_TIME_LIMIT, below the broker's
    # visibility timeout): past the slice, stop sending, settle what is out, and hand the rest
    # to a follow-up job (the same parameters; it asks only what is still unasked).
    slice_ends = time.monotonic() + settings.MODEL_JOB_SLICE_SECONDS
    sliced = False
    executor = ThreadPoolExecutor(max_workers=execution.concurrency, thread_name_prefix="model")
    try:
        for start in range(0, len(todo), 500):
            if sliced:
                break
            chunk = todo[start : start + 500]
            documents = {
                d.doc_id: d
                for d in Document.objects.filter(
                    campaign=config.campaign, doc_id__in={doc for _, doc in chunk}
                ).only("doc_id", "title", "body")
            }
            for topic_id, doc_id in chunk:
                progress.check()
                if in_flight and time.monotonic() > slice_ends:  # never a slice with no call
                    sliced = True
                    break
                while len(in_flight) >= execution.concurrency:
                    finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in finished:
                        settle(future, in_flight.pop(future))
                    progress.check()
                    check_endpoint()
                call = _claim(config, topic_id, doc_id, job)
                if call is None:
                    progress.done += 1
                    continue
                call.topic = topics[topic_id]  # the judgment needs it: no query per answer
                document = documents.get(doc_id)
                if document is None:
                    finish_call(
                        call,
                        status=ModelCall.Status.FAILED,
                        error="The document is not in the campaign (import it, then run again).",
                    )
                    totals.failed += 1
                    progress.done += 1
                    continue
                request = call_request(
                    config,
                    topic=topics[topic_id],
                    labels=labels,
                    title=document.title,
                    body=document.body,
                    url=url,
                    api_key=api_key,
                )
                future = executor.submit(
                    llm.call,
                    request,
                    timeout=execution.timeout,
                    retries=execution.retries,
                    backoff=execution.backoff,
                    limiter=limiter,
                )
                in_flight[future] = call
    except BaseException as exc:
        # Cancelled or failing: the calls already out are paid for; record their answers, and
        # what this attempt spent (the job's row keeps it whatever the outcome).
        _drain(in_flight, settle)
        executor.shutdown(wait=True)
        summary = _summary(config, execution, totals, pairs)
        if isinstance(exc, JobFailed):  # run_job stores its result as the job's
            exc.result = {**summary, **exc.result}
        else:
            Job.objects.filter(pk=job.pk, attempts=job.attempts).update(result=summary)
        raise
    _drain(in_flight, settle)
    executor.shutdown(wait=True)
    summary = _summary(config, execution, totals, pairs)
    if sliced:
        follow_up = enqueue(
            kind=JOB_KIND,
            task=JUDGE_TASK,
            campaign=config.campaign,
            params={**job.params, "run_of": run_of},
            user=job.created_by,
        )
        summary["continued_as"] = follow_up.pk
        summary["message"] += f" The rest continues as job {follow_up.pk}."
    return summary


def _drain(in_flight: dict[Future, ModelCall], settle) -> None:
    for future in list(in_flight):
        future.exception()  # waits for it
        settle(future, in_flight.pop(future))


def _summary(
    config: ModelConfig, execution: Execution, totals: _Totals, pairs: list[tuple[int, str]]
) -> dict[str, Any]:
    cost = _cost(execution, totals.prompt_tokens, totals.completion_tokens)
    message = (
        f"{config.assessor.name}: {totals.labelled} labelled, {totals.unparseable} unparseable, "
        f"{totals.failed} failed in this job; {totals.prompt_tokens:,} prompt + "
        f"{totals.completion_tokens:,} completion tokens"
        + (f", ${cost:.4f}" if execution.price_prompt or execution.price_completion else "")
        + "."
    )
    return {
        "message": message,
        "assessor": config.assessor.name,
        "labelled": totals.labelled,
        "unparseable": totals.unparseable,
        "failed": totals.failed,
        "prompt_tokens": totals.prompt_tokens,
        "completion_tokens": totals.completion_tokens,
        "cost": cost,
        "pairs": _count_by_status(config, pairs),
    }


def _count_by_status(config: ModelConfig, pairs: list[tuple[int, str]]) -> dict[str, int]:
    wanted = set(pairs)
    counts: dict[str, int] = {}
    for topic, doc, status in (
        ModelCall.objects.filter(config=config)
        .order_by()
        .values_list("topic_id", "doc_id", "status")
    ):
        if (topic, doc) in wanted:
            counts[status] = counts.get(status, 0) + 1
    counts["not asked"] = len(wanted) - sum(counts.values())
    return counts


def _claim(config: ModelConfig, topic_id: int, doc_id: str, job: Job) -> ModelCall | None:
    """The pair's call row, committed as ``sent`` before any request; None when the pair is
    not ours to ask (answered meanwhile, or out with another attempt)."""
    now = timezone.now()
    try:
        with transaction.atomic():
            return ModelCall.objects.create(
                config=config,
                topic_id=topic_id,
                doc_id=doc_id,
                status=ModelCall.Status.SENT,
                job=job,
                sent_at=now,
            )
    except IntegrityError:
        pass
    # Asked before without an answer (failed; interrupted when a retry was asked for).
    again = [ModelCall.Status.FAILED]
    if job.params.get("retry_interrupted"):
        again.append(ModelCall.Status.INTERRUPTED)
    taken = ModelCall.objects.filter(
        config=config, topic_id=topic_id, doc_id=doc_id, status__in=again
    ).update(status=ModelCall.Status.SENT, job=job, sent_at=now, error="", finished_at=None)
    if not taken:
        return None
    return ModelCall.objects.get(config=config, topic_id=topic_id, doc_id=doc_id)


def finish_call(call: Any, **fields: Any) -> None:
    """Store ``fields`` on a call row (ModelCall or GullibilityCall), finished now unless said."""
    fields.setdefault("finished_at", timezone.now())
    for name, value in fields.items():
        setattr(call, name, value)
    call.save(update_fields=list(fields))


def settled_call(
    future: Future, call: Any, *, config: ModelConfig, scale: set[int], totals: _Totals
) -> tuple[str, dict[str, Any]]:
    """What a call that came back (or gave up) amounts to: its status (``failed``,
    ``unparseable`` or ``labelled``, the values of ModelCall.Status and GullibilityCall.Status
    alike) and the fields to store on ``call``, with ``label`` when there is one; counted in
    ``totals``. Shared by every job that asks a model (this module, assess.gullibility)."""
    error = future.exception()
    if isinstance(error, llm.CallFailed):
        totals.failed += 1
        tries = getattr(error, "tries", 1)
        return ModelCall.Status.FAILED, {
            "tries": call.tries + tries,
            "http_status": error.status,
            "response": error.body[:100_000],
            "error": f"{error.message} (after {tries} tries)",
        }
    if error is not None:
        totals.failed += 1
        return ModelCall.Status.FAILED, {"error": f"{type(error).__name__}: {error}"}
    answer: llm.Answer = future.result()
    totals.prompt_tokens += answer.prompt_tokens or 0
    totals.completion_tokens += answer.completion_tokens or 0
    fields: dict[str, Any] = {
        "tries": call.tries + answer.tries,
        "http_status": answer.status,
        "response": answer.body,
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "seconds": answer.seconds,
    }
    if answer.content is None:
        label, reason = None, "the response has no message content"
    else:
        label, reason = llm.parse_label(answer.content, rule=config.label_rule, scale=scale)
    if label is None:
        totals.unparseable += 1
        return ModelCall.Status.UNPARSEABLE, {"error": reason, **fields}
    totals.labelled += 1
    fields["label"] = label
    fields["logprobs"] = answer.logprobs
    return ModelCall.Status.LABELLED, fields


def _record(
    future: Future, call: ModelCall, *, config: ModelConfig, scale: set[int], totals: _Totals
) -> None:
    status, fields = settled_call(future, call, config=config, scale=scale, totals=totals)
    if status != ModelCall.Status.LABELLED:
        finish_call(call, status=status, **fields)
        return
    label = fields["label"]
    logprobs = fields.pop("logprobs")
    with transaction.atomic():
        finish_call(
            call,
            status=status,
            probabilities=llm.label_probabilities(logprobs, label=label, scale=scale),
            **fields,
        )
        record_judgment(
            assessor=config.assessor,
            topic=call.topic,
            doc_id=call.doc_id,
            label=label,
            rubric_version=config.rubric_version,
            check_label=False,  # parse_label kept it on the scale
        )
