"""The gullibility check (issue 20): are a model's labels moved by query words alone?

Models are lenient and gullible (Alaofi et al. 2024; Clarke & Dietz 2024): an irrelevant
passage with the query's words stuffed into it is often labelled relevant. The check takes the
pairs people judged non-relevant (every person's or imported source's label on the pair below
the campaign's relevance threshold) that the configuration labelled non-relevant too, asks the
configuration again with the topic's query terms appended to the document, and counts the
labels that flip to relevant.

It runs as a job through the model-judging machinery (assess/llm.py: the rate limiter, retries
with backoff, timeouts; the execution settings and cost of assess/model_judging.py), and is
idempotent by (configuration, pair, variant): each call's :class:`~assess.models.GullibilityCall`
row is committed as ``sent`` before the request leaves, so a redelivered or restarted job never
pays twice (a row left ``sent`` by a dead worker becomes ``interrupted``, not asked again).
The stuffed calls have their own table: they are never judgments and never reach qrels,
agreement or the configuration's ordinary calls and figures.
"""

from __future__ import annotations

import random
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Min, Sum
from django.utils import timezone

from assess import llm
from assess.highlight import extract_terms
from assess.model_judging import (
    FAILURES_IN_A_ROW,
    ConfigError,
    Execution,
    _cost,
    _Totals,
    call_request,
    finish_call,
    running_job,
    settled_call,
    worker_api_key,
)
from assess.models import GullibilityCall, ModelConfig
from campaigns.jobs import JobFailed, Progress, enqueue
from campaigns.models import VERDICT_KINDS, Campaign, Document, Job, Judgment, Topic

TASK = "assess.tasks.gullibility_task"
JOB_KIND = "gullibility_check"
VARIANT = GullibilityCall.Variant.TERMS_APPENDED
# Pairs asked by default: a sample, since every call is paid.
DEFAULT_LIMIT = 200


def query_terms(topic: Topic) -> list[str]:
    """The topic's query terms: the words of its title (its description's when it has no
    title), as the term highlighting finds them (assess/highlight.py: no stop words)."""
    return list(extract_terms(topic.title) or extract_terms("", topic.description))


def stuffed(document: str, topic: Topic, variant: str = VARIANT) -> str:
    """``document`` with the topic's query terms stuffed into it, as ``variant`` says."""
    if variant != GullibilityCall.Variant.TERMS_APPENDED:
        raise ValueError(f"unknown variant {variant!r}")
    terms = " ".join(query_terms(topic))
    return f"{document}\n\n{terms}" if terms else document


@dataclass(frozen=True)
class Candidate:
    topic_id: int
    doc_id: str
    people_max: int  # the highest label people gave the pair (below the threshold)
    model_label: int  # the configuration's own label on the unstuffed document


def candidates(config: ModelConfig) -> list[Candidate]:
    """The pairs the check may ask: every person's (and imported source's) label on the pair
    is below the campaign's relevance threshold (negative labels, "pooled but unjudged", are no
    verdict), and the configuration labelled the pair below it too. In topic, document order."""
    threshold = config.campaign.relevance_threshold
    people = (
        Judgment.objects.filter(
            campaign=config.campaign, assessor__kind__in=VERDICT_KINDS, label__gte=0
        )
        .order_by()
        .values_list("topic_id", "doc_id")
        .annotate(top=Max("label"), bottom=Min("label"))
        .filter(top__lt=threshold)
    )
    non_relevant = {(topic, doc): top for topic, doc, top, _ in people}
    model = (
        Judgment.objects.filter(assessor=config.assessor, label__gte=0, label__lt=threshold)
        .order_by()
        .values_list("topic_id", "doc_id", "label")
    )
    found = [
        Candidate(topic, doc, non_relevant[(topic, doc)], label)
        for topic, doc, label in model
        if (topic, doc) in non_relevant
    ]
    order = dict(Topic.objects.filter(campaign=config.campaign).values_list("pk", "position"))
    return sorted(found, key=lambda c: (order.get(c.topic_id, 0), c.topic_id, c.doc_id))


def start_gullibility_check(
    *,
    config: ModelConfig,
    execution: Execution | None = None,
    limit: int = DEFAULT_LIMIT,
    seed: int = 0,
    user=None,
) -> Job:
    """Queue the check of ``config`` on at most ``limit`` of its candidate pairs (0: all),
    chosen by a seeded shuffle. Raises ConfigError when there is nothing to ask."""
    execution = execution or Execution()
    execution.check()
    if limit < 0:
        raise ConfigError("The number of pairs cannot be negative.")
    if not candidates(config):
        raise ConfigError(
            f"No pair to ask {config.assessor.name}: the check needs pairs people judged "
            "non-relevant that this configuration labelled non-relevant too (judge the pool "
            "with it first)."
        )
    busy = running_job(JOB_KIND, config)
    if busy is not None:
        raise ConfigError(f"Job {busy.pk} is already checking this configuration.")
    return enqueue(
        kind=JOB_KIND,
        task=TASK,
        campaign=config.campaign,
        params={
            "config": config.pk,
            "assessor": config.assessor.name,
            "variant": str(VARIANT),
            "limit": limit,
            "seed": seed,
            **execution.__dict__,
        },
        user=user,
    )


def chosen(pairs: list[Candidate], *, limit: int, seed: int) -> list[Candidate]:
    """``limit`` of ``pairs`` (all when 0 or more than there are), the same ones for the same
    seed: a restarted job asks the same sample."""
    if not limit or limit >= len(pairs):
        return pairs
    picked = random.Random(seed).sample(range(len(pairs)), limit)
    return [pairs[i] for i in sorted(picked)]


# --- The job ------------------------------------------------------------------------------------


def check_gullibility(job: Job, progress: Progress) -> dict[str, Any]:
    """The job's handler: ask every chosen pair that has no answer yet (see the module)."""
    params = dict(job.params)
    config = ModelConfig.objects.select_related("campaign", "assessor", "rubric_version").get(
        pk=params.pop("config")
    )
    variant = params.pop("variant")
    limit, seed = params.pop("limit"), params.pop("seed")
    params.pop("assessor", None)
    execution = Execution(**params)
    api_key = worker_api_key(config)
    calls = GullibilityCall.objects.filter(config=config, variant=variant)
    # Rows an earlier attempt left "sent" (its worker died mid-call): maybe paid, not re-sent.
    calls.filter(status=GullibilityCall.Status.SENT).update(
        status=GullibilityCall.Status.INTERRUPTED,
        error="The worker was lost while this call was out; not sent again.",
        finished_at=timezone.now(),
    )
    pairs = chosen(candidates(config), limit=limit, seed=seed)
    known = {
        (topic, doc): status
        for topic, doc, status in calls.order_by().values_list("topic_id", "doc_id", "status")
    }
    again = {GullibilityCall.Status.FAILED}
    if execution.retry_interrupted:
        again.add(GullibilityCall.Status.INTERRUPTED)
    todo = [
        p
        for p in pairs
        if (p.topic_id, p.doc_id) not in known or known[(p.topic_id, p.doc_id)] in again
    ]
    progress.update(len(pairs) - len(todo), total=len(pairs), message="asking the model")
    topics = {t.pk: t for t in Topic.objects.filter(pk__in={p.topic_id for p in todo})}
    labels = [
        (label.value, label.name, label.description) for label in config.rubric_version.labels.all()
    ]
    scale = {value for value, _, _ in labels}
    url = llm.chat_url(config.endpoint)
    limiter = llm.RateLimiter(execution.per_minute)
    totals = _Totals()
    in_flight: dict[Future, GullibilityCall] = {}

    def settle(future: Future, call: GullibilityCall) -> None:
        failed_before = totals.failed
        _record(future, call, config=config, scale=scale, totals=totals)
        totals.failing_in_a_row = (
            totals.failing_in_a_row + 1 if totals.failed > failed_before else 0
        )
        progress.done += 1
        tokens = totals.prompt_tokens + totals.completion_tokens
        progress.message = f"{tokens:,} tokens"

    executor = ThreadPoolExecutor(max_workers=execution.concurrency, thread_name_prefix="gullible")
    try:
        documents = {
            d.doc_id: d
            for d in Document.objects.filter(
                campaign=config.campaign, doc_id__in={p.doc_id for p in todo}
            ).only("doc_id", "title", "body")
        }
        for pair in todo:
            progress.check()
            while len(in_flight) >= execution.concurrency:
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    settle(future, in_flight.pop(future))
                progress.check()
                if totals.failing_in_a_row >= FAILURES_IN_A_ROW:
                    raise JobFailed(
                        f"The endpoint gave no answer to {totals.failing_in_a_row} calls in a "
                        "row; nothing more was sent. Run the check again once it answers: only "
                        "the pairs without an answer are asked."
                    )
            call = _claim(config, pair, variant, job, again)
            if call is None:
                progress.done += 1
                continue
            document = documents.get(pair.doc_id)
            topic = topics[pair.topic_id]
            if document is None:
                finish_call(call, status=GullibilityCall.Status.FAILED, error="No such document.")
                totals.failed += 1
                progress.done += 1
                continue
            request = call_request(
                config,
                topic=topic,
                labels=labels,
                title=document.title,
                body=stuffed(document.body, topic, variant),
                url=url,
                api_key=api_key,
                logprobs=False,
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
    except BaseException:
        # The calls already out are paid for: record their answers before giving up.
        for future in list(in_flight):
            future.exception()
            settle(future, in_flight.pop(future))
        executor.shutdown(wait=True)
        raise
    for future in list(in_flight):
        future.exception()
        settle(future, in_flight.pop(future))
    executor.shutdown(wait=True)
    found = report(config)
    cost = _cost(execution, totals.prompt_tokens, totals.completion_tokens)
    return {
        "message": (
            f"{config.assessor.name}: {found.flipped} of {found.labelled} non-relevant pairs "
            f"flipped to relevant with the query terms appended"
            + (f" ({found.rate:.1%})" if found.rate is not None else "")
            + f"; {totals.prompt_tokens:,} prompt + {totals.completion_tokens:,} completion "
            "tokens in this job" + (f", ${cost:.4f}" if cost else "") + "."
        ),
        "assessor": config.assessor.name,
        "asked": len(pairs),
        "labelled": totals.labelled,
        "unparseable": totals.unparseable,
        "failed": totals.failed,
        "flipped": found.flipped,
        "prompt_tokens": totals.prompt_tokens,
        "completion_tokens": totals.completion_tokens,
        "cost": cost,
    }


def _claim(
    config: ModelConfig, pair: Candidate, variant: str, job: Job, again: set[str]
) -> GullibilityCall | None:
    """The pair's row, committed as ``sent`` before any request; None when it is not ours."""
    now = timezone.now()
    try:
        with transaction.atomic():
            return GullibilityCall.objects.create(
                config=config,
                topic_id=pair.topic_id,
                doc_id=pair.doc_id,
                variant=variant,
                original_label=pair.model_label,
                status=GullibilityCall.Status.SENT,
                job=job,
                sent_at=now,
            )
    except IntegrityError:
        pass
    rows = GullibilityCall.objects.filter(
        config=config, topic_id=pair.topic_id, doc_id=pair.doc_id, variant=variant
    )
    taken = rows.filter(status__in=again).update(
        status=GullibilityCall.Status.SENT, job=job, sent_at=now, error="", finished_at=None
    )
    return rows.get() if taken else None


def _record(
    future: Future,
    call: GullibilityCall,
    *,
    config: ModelConfig,
    scale: set[int],
    totals: _Totals,
) -> None:
    status, fields = settled_call(future, call, config=config, scale=scale, totals=totals)
    fields.pop("logprobs", None)  # asked without: a flip is a label, not a probability
    # Only this row: a stuffed answer is never a judgment.
    finish_call(call, status=status, **fields)


@dataclass(frozen=True)
class FlippedPair:
    topic: str
    doc_id: str
    original_label: int
    label: int | None
    status: str


@dataclass(frozen=True)
class TopicFlips:
    topic: str
    labelled: int
    flipped: int

    @property
    def rate(self) -> float | None:
        return self.flipped / self.labelled if self.labelled else None


@dataclass(frozen=True)
class GullibilityReport:
    config: ModelConfig
    variant: str
    candidates: int  # pairs the check could ask
    asked: int  # pairs with a row (asked, whatever the outcome)
    labelled: int
    unparseable: int
    failed: int  # failed or interrupted: no answer
    flipped: int  # labelled at or above the threshold with the query terms appended
    prompt_tokens: int
    completion_tokens: int
    topics: list[TopicFlips] = field(default_factory=list)
    pairs: list[FlippedPair] = field(default_factory=list)  # every asked pair, flips first

    @property
    def rate(self) -> float | None:
        return self.flipped / self.labelled if self.labelled else None


def report(config: ModelConfig, *, variant: str = VARIANT) -> GullibilityReport:
    """What the check found for ``config``: of the pairs asked with the query terms appended,
    how many were labelled relevant (at or above the campaign's threshold), overall and per
    topic, and every pair asked."""
    threshold = config.campaign.relevance_threshold
    calls = list(
        GullibilityCall.objects.filter(config=config, variant=variant)
        .select_related("topic")
        .order_by("topic__position", "topic__topic_id", "doc_id")
    )
    statuses = GullibilityCall.Status
    per_topic: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    pairs = []
    for call in calls:
        flipped = call.status == statuses.LABELLED and call.label >= threshold
        if call.status == statuses.LABELLED:
            per_topic[call.topic.topic_id][0] += 1
            per_topic[call.topic.topic_id][1] += int(flipped)
        pairs.append(
            FlippedPair(
                call.topic.topic_id, call.doc_id, call.original_label, call.label, call.status
            )
        )
    tokens = GullibilityCall.objects.filter(config=config, variant=variant).aggregate(
        prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")
    )
    labelled = sum(1 for c in calls if c.status == statuses.LABELLED)
    return GullibilityReport(
        config=config,
        variant=variant,
        candidates=len(candidates(config)),
        asked=len(calls),
        labelled=labelled,
        unparseable=sum(1 for c in calls if c.status == statuses.UNPARSEABLE),
        failed=sum(1 for c in calls if c.status in (statuses.FAILED, statuses.INTERRUPTED)),
        flipped=sum(t[1] for t in per_topic.values()),
        prompt_tokens=tokens["prompt"] or 0,
        completion_tokens=tokens["completion"] or 0,
        topics=[TopicFlips(topic, n, f) for topic, (n, f) in per_topic.items()],
        pairs=sorted(pairs, key=lambda p: not (p.label is not None and p.label >= threshold)),
    )


def configurations(campaign: Campaign) -> list[ModelConfig]:
    """The campaign's model configurations (each has an endpoint the check can ask)."""
    return list(
        ModelConfig.objects.filter(campaign=campaign)
        .select_related("assessor", "campaign", "rubric_version")
        .order_by("-created_at", "-pk")
    )
