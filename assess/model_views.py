"""The organiser's model judges page: the configurations made so far (what each asked, how its
calls ended, tokens) and the form that makes one and starts its job on a pool; and the
gullibility check's page (assess/gullibility.py): its reports and the form that starts one."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from assess import gullibility, llm
from assess.model_judging import ConfigError, Execution, model_config, start_model_judging
from assess.models import ModelCall, ModelConfig
from campaigns.access import get_campaign_for
from campaigns.models import Campaign


class ModelJudgeForm(forms.Form):
    pool = forms.TypedChoiceField(coerce=int, label="Pool")
    endpoint = forms.CharField(
        max_length=500,
        help_text="Base URL of an OpenAI-compatible server: http://localhost:11434/v1 (Ollama), "
        "http://localhost:8000/v1 (vLLM).",
    )
    model = forms.CharField(max_length=200, help_text="The model's name at the endpoint.")
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="API key variable",
        help_text="The NAME of the worker's environment variable holding the key (never the "
        "key), one the administrator allows (MODEL_API_KEY_VARIABLES); empty for a local server.",
    )
    prompt_template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 12}),
        initial=llm.DEFAULT_TEMPLATE,
        help_text="Placeholders: " + ", ".join(f"${p}" for p in llm.PLACEHOLDERS) + ".",
    )
    label_rule = forms.ChoiceField(choices=ModelConfig.LabelRule.choices, initial="exact")
    temperature = forms.FloatField(min_value=0, max_value=2, initial=0.0)
    seed = forms.IntegerField(required=False, initial=0)
    max_tokens = forms.IntegerField(min_value=1, max_value=4096, initial=8)
    logprobs = forms.BooleanField(required=False, label="Ask for label probabilities (logprobs)")
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=4)
    per_minute = forms.FloatField(min_value=0, initial=60, label="Calls a minute (0: no limit)")
    timeout = forms.FloatField(min_value=0.1, initial=60, label="Timeout per call (s)")
    retries = forms.IntegerField(min_value=0, max_value=10, initial=3)
    price_prompt = forms.FloatField(min_value=0, initial=0, label="$ per 1M prompt tokens")
    price_completion = forms.FloatField(min_value=0, initial=0, label="$ per 1M output tokens")
    retry_interrupted = forms.BooleanField(
        required=False,
        label="Ask again the calls a lost worker left out (they may have been paid)",
    )

    def __init__(self, *args, campaign: Campaign, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["pool"].choices = [
            (pool.version, f"v{pool.version} ({pool.get_strategy_display()}, {pool.size} pairs)")
            for pool in campaign.pools.built().order_by("-version")
        ]


@login_required
@require_http_methods(["GET", "POST"])
def model_judges(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    form = ModelJudgeForm(request.POST or None, campaign=campaign)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        pool = campaign.pools.built().get(version=data["pool"])
        try:
            with transaction.atomic():
                config = model_config(
                    campaign=campaign,
                    endpoint=data["endpoint"].strip(),
                    model=data["model"].strip(),
                    prompt_template=data["prompt_template"].replace("\r\n", "\n"),
                    temperature=data["temperature"],
                    seed=data["seed"],
                    max_tokens=data["max_tokens"],
                    label_rule=data["label_rule"],
                    logprobs=data["logprobs"],
                    api_key_env=data["api_key_env"].strip(),
                )
                job = start_model_judging(
                    config=config,
                    pool=pool,
                    execution=Execution.from_form(data),
                    user=request.user,
                )
        except ConfigError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"{config.assessor.name} is judging pool v{pool.version}.")
            return redirect("campaigns:job", campaign.slug, job.pk)
    statuses = ModelCall.Status
    configs = (
        ModelConfig.objects.filter(campaign=campaign)
        .select_related("assessor", "rubric_version")
        .annotate(
            labelled=Count("calls", filter=Q(calls__status=statuses.LABELLED)),
            unparseable=Count("calls", filter=Q(calls__status=statuses.UNPARSEABLE)),
            failed=Count("calls", filter=Q(calls__status=statuses.FAILED)),
            interrupted=Count("calls", filter=Q(calls__status=statuses.INTERRUPTED)),
            prompt_tokens=Sum("calls__prompt_tokens"),
            completion_tokens=Sum("calls__completion_tokens"),
        )
        .order_by("-created_at", "-pk")
    )
    return render(
        request,
        "assess/organiser/models.html",
        {
            "campaign": campaign,
            "form": form,
            "configs": configs,
            "pools": campaign.pools.built().order_by("-version"),
        },
    )


class GullibilityForm(forms.Form):
    config = forms.TypedChoiceField(coerce=int, label="Model configuration")
    limit = forms.IntegerField(
        min_value=0,
        initial=gullibility.DEFAULT_LIMIT,
        label="Pairs to ask (0: all)",
        help_text="A seeded sample of the pairs people and the model judged non-relevant: "
        "every call is paid.",
    )
    seed = forms.IntegerField(initial=0)
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=4)
    per_minute = forms.FloatField(min_value=0, initial=60, label="Calls a minute (0: no limit)")
    timeout = forms.FloatField(min_value=0.1, initial=60, label="Timeout per call (s)")
    retries = forms.IntegerField(min_value=0, max_value=10, initial=3)
    price_prompt = forms.FloatField(min_value=0, initial=0, label="$ per 1M prompt tokens")
    price_completion = forms.FloatField(min_value=0, initial=0, label="$ per 1M output tokens")

    def __init__(self, *args, configs, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["config"].choices = [(c.pk, f"{c.assessor.name} ({c.model})") for c in configs]


# Pairs listed per configuration on the page (flips first); the command lists them all.
GULLIBILITY_PAIRS_SHOWN = 100


@login_required
@require_http_methods(["GET", "POST"])
def gullibility_check(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    configs = gullibility.configurations(campaign)
    form = GullibilityForm(request.POST or None, configs=configs)
    if request.method == "POST" and configs and form.is_valid():
        data = form.cleaned_data
        config = next(c for c in configs if c.pk == data["config"])
        try:
            with transaction.atomic():
                job = gullibility.start_gullibility_check(
                    config=config,
                    execution=Execution.from_form(data),
                    limit=data["limit"],
                    seed=data["seed"],
                    user=request.user,
                )
        except ConfigError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Checking {config.assessor.name}'s gullibility.")
            return redirect("campaigns:job", campaign.slug, job.pk)
    reports = [gullibility.report(config) for config in configs]
    return render(
        request,
        "assess/organiser/gullibility.html",
        {
            "campaign": campaign,
            "form": form,
            "configs": configs,
            "reports": [r for r in reports if r.asked],
            "unchecked": [r for r in reports if not r.asked],
            "shown": GULLIBILITY_PAIRS_SHOWN,
        },
    )
