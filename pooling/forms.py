"""The organiser's pool form and the planner's settings.

Every check that can be made before a pool exists is made here, with the message next to the field
it concerns; what is left (the campaign has no runs, the runs rank no topic) comes back from
``create_pool`` as a PoolDefinitionError and is shown above the form.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django import forms

from campaigns.models import Campaign, Topic
from pooling import strategies
from pooling.models import Pool, Run
from pooling.pools import PLANNER_DEPTHS, PoolDefinitionError, normalise_params

# Bounds that keep every input meaningful and every computation small; no real run is deeper.
MAX_DEPTH = 100_000
MAX_BUDGET = 1_000_000
MAX_SEED = 2**63 - 1
MAX_EXTRA_DEPTHS = 12
MAX_SECONDS = 3600.0

_SEPARATORS = re.compile(r"[,;\n]+")
_STRATUM = re.compile(r"^(\d+)\s*[-\u2013]\s*(\d+)\s*:\s*(\S+?)\s*(%?)$")
_RUN_DEPTH = re.compile(r"^(\S+?)\s*(?:=|:|\s)\s*(\S+)$")


def parse_strata(text: str) -> list[dict[str, Any]]:
    """``1-10 : 1`` rows (one per line or comma-separated) -> stratum dicts, as create_pool takes
    them. The rate is a fraction (0.1) or a percentage (10%). Raises ValueError with a sentence."""
    strata = []
    for row in filter(None, (part.strip() for part in _SEPARATORS.split(text))):
        match = _STRATUM.match(row)
        if match is None:
            raise ValueError(f"“{row}” is not first-last : rate (for example 11-100 : 0.1).")
        first, last, rate_text, percent = match.groups()
        try:
            rate = float(rate_text)
        except ValueError:
            raise ValueError(f"The rate in “{row}” is not a number.") from None
        if percent:
            rate /= 100
        if not math.isfinite(rate):
            raise ValueError(f"The rate in “{row}” is not a number.")
        if int(last) > MAX_DEPTH:
            raise ValueError(f"Strata end at rank {MAX_DEPTH:,} at the latest.")
        strata.append({"first_rank": int(first), "last_rank": int(last), "rate": rate})
    if not strata:
        raise ValueError("A sampled pool needs at least one stratum.")
    # The strategies' own checks, so the organiser reads the same sentence the builder would raise.
    strategies.check_strata([strategies.Stratum(**s) for s in strata])
    return strata


def parse_run_depths(text: str, tags: set[str]) -> dict[str, int]:
    """``TAG = k`` rows -> {tag: k}. Raises ValueError naming the first bad row or unknown tag."""
    depths: dict[str, int] = {}
    for row in filter(None, (part.strip() for part in _SEPARATORS.split(text))):
        match = _RUN_DEPTH.match(row)
        if match is None or not match.group(2).isdigit():
            raise ValueError(f"“{row}” is not TAG = k (k a whole number, 0 leaves the run out).")
        tag, k = match.group(1), int(match.group(2))
        if tag not in tags:
            raise ValueError(f"No contributing run is tagged “{tag}”.")
        if k > MAX_DEPTH:
            raise ValueError(f"The depth of {tag} must be at most {MAX_DEPTH:,}.")
        if tag in depths:
            raise ValueError(f"{tag} has two depths.")
        depths[tag] = k
    return depths


def parse_topic_ids(text: str) -> list[str]:
    return list(dict.fromkeys(text.replace(",", " ").split()))


class RunChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Run) -> str:
        return obj.tag


class BuildPoolForm(forms.Form):
    """Everything ``create_pool`` needs, for any strategy. Fields of the strategies not chosen are
    ignored, so switching strategy never leaves a hidden error behind."""

    strategy = forms.ChoiceField(
        choices=Pool.Strategy.choices, widget=forms.RadioSelect, initial=Pool.Strategy.DEPTH
    )
    # depth
    depth = forms.IntegerField(
        label="Depth k",
        min_value=1,
        max_value=MAX_DEPTH,
        required=False,
        initial=10,
        help_text="The top k documents of every run, per topic.",
    )
    depth_per_run = forms.CharField(
        label="Per-run depths (optional)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "bm25 = 50\ncoord-level = 0"}),
        help_text="One run per line: TAG = k. Runs not listed use k; 0 leaves a run out.",
    )
    # sample
    strata = forms.CharField(
        required=False,
        initial="1-10 : 1\n11-100 : 0.1",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One stratum per line: first-last rank : rate (0.1 or 10%). Strata start at "
        "rank 1 and follow each other without gaps; a document falls in the stratum of its best "
        "rank.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_SEED,
        help_text="The same seed draws the same sample. Empty: a new seed, recorded with the pool.",
    )
    # rrf
    rrf_budget = forms.IntegerField(
        label="Budget",
        min_value=1,
        max_value=MAX_BUDGET,
        required=False,
        help_text="Documents per topic.",
    )
    rrf_k = forms.FloatField(
        label="Constant k",
        min_value=0,
        max_value=1e9,
        required=False,
        initial=60,
        help_text="score = Σ 1 / (k + rank); 60 is the usual choice.",
    )
    rrf_depth = forms.IntegerField(
        label="Read runs to depth",
        min_value=1,
        max_value=MAX_DEPTH,
        required=False,
        help_text="Empty: whole runs.",
    )
    # rbp
    rbp_budget = forms.IntegerField(
        label="Budget",
        min_value=1,
        max_value=MAX_BUDGET,
        required=False,
        help_text="Documents per topic.",
    )
    rbp_p = forms.FloatField(
        label="Persistence p",
        required=False,
        initial=0.8,
        help_text="Between 0 and 1; a document at rank r weighs (1 - p) p^(r - 1).",
    )
    rbp_aggregate = forms.ChoiceField(
        label="Combine runs by",
        choices=[("sum", "Sum of weights"), ("max", "Largest weight")],
        initial="sum",
        required=False,
    )
    rbp_depth = forms.IntegerField(
        label="Read runs to depth",
        min_value=1,
        max_value=MAX_DEPTH,
        required=False,
        help_text="Empty: whole runs.",
    )
    # every strategy
    order = forms.ChoiceField(
        label="Ranking order",
        choices=[
            ("trec_eval", "trec_eval: score descending, ties by document id descending"),
            ("file_rank", "The rank column of the run files"),
        ],
        initial="trec_eval",
        widget=forms.RadioSelect,
    )
    residual = forms.BooleanField(
        label="Residual: leave out pairs already judged in this campaign", required=False
    )
    # judging order (pooling.adaptive)
    judging_order = forms.ChoiceField(
        label="Order",
        choices=[
            ("", "Shuffled: each assessor's own seeded order (the static pool)"),
            ("bandit", "Adaptive, bandit: runs that keep finding relevant ones get more turns"),
            ("mtf", "Adaptive, move-to-front: a run keeps its turn until a non-relevant document"),
        ],
        required=False,
        initial="",
        widget=forms.RadioSelect,
        help_text="Adaptive orders choose each shared-queue document when it is asked for.",
    )
    burn_in = forms.IntegerField(
        label="Burn-in depth",
        min_value=0,
        max_value=MAX_DEPTH,
        required=False,
        initial=5,
        help_text="Every run's top d, per topic, is judged before adaptive choice starts.",
    )
    judging_budget = forms.IntegerField(
        label="Budget per topic",
        min_value=1,
        max_value=MAX_BUDGET,
        required=False,
        help_text="Judgments; the topic stops after them. Empty: no limit.",
    )
    judging_fraction = forms.FloatField(
        label="or share of each topic's pool",
        min_value=0.01,
        max_value=1,
        required=False,
        help_text="0.5 = half of the topic's pooled documents.",
    )
    recall_target = forms.FloatField(
        label="Recall target",
        min_value=0.05,
        max_value=1,
        required=False,
        initial=0.8,
        help_text="Suggest stopping a topic when its estimated recall passes this.",
    )
    runs = RunChoiceField(
        label="Contributing runs",
        queryset=Run.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        error_messages={
            "required": "Choose at least one run.",
            "invalid_choice": "%(value)s is not one of this campaign's current runs.",
            "invalid_pk_value": "“%(pk)s” is not one of this campaign's current runs.",
        },
    )
    topics = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "All topics the runs rank"}),
        help_text="Topic ids separated by spaces or commas. Empty: every topic the runs rank.",
    )
    note = forms.CharField(max_length=200, required=False, help_text="For the version list.")

    STRATEGY_FIELDS = {
        Pool.Strategy.DEPTH: ("depth", "depth_per_run"),
        Pool.Strategy.SAMPLE: ("strata", "seed"),
        Pool.Strategy.RRF: ("rrf_budget", "rrf_k", "rrf_depth"),
        Pool.Strategy.RBP: ("rbp_budget", "rbp_p", "rbp_aggregate", "rbp_depth"),
    }

    def __init__(self, *args, campaign: Campaign, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        current = campaign.runs.current().order_by("tag")
        self.fields["runs"].queryset = current
        if not self.is_bound:
            self.initial.setdefault("runs", list(current))

    def strategy_fields(self, strategy: str) -> list[forms.BoundField]:
        return [self[name] for name in self.STRATEGY_FIELDS[strategy]]

    def strategy_sections(self) -> list[tuple[str, str, list[forms.BoundField]]]:
        return [
            (value, label, self.strategy_fields(value)) for value, label in Pool.Strategy.choices
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        strategy = data.get("strategy")
        if strategy is None:
            return data
        params: dict[str, Any] = {
            "order": data.get("order") or "trec_eval",
            "residual": bool(data.get("residual")),
        }
        runs = list(data.get("runs") or [])
        if strategy == Pool.Strategy.DEPTH:
            self._require("depth", "Give the depth k.")
            params["depth"] = data.get("depth")
            if data.get("depth_per_run"):
                try:
                    params["depth_per_run"] = parse_run_depths(
                        data["depth_per_run"], {run.tag for run in runs}
                    )
                except ValueError as exc:
                    self.add_error("depth_per_run", str(exc))
        elif strategy == Pool.Strategy.SAMPLE:
            try:
                params["strata"] = parse_strata(data.get("strata") or "")
            except ValueError as exc:
                self.add_error("strata", str(exc))
        elif strategy == Pool.Strategy.RRF:
            self._require("rrf_budget", "Give the number of documents per topic.")
            params["budget"] = data.get("rrf_budget")
            params["k"] = 60 if data.get("rrf_k") is None else data["rrf_k"]
            params["depth"] = data.get("rrf_depth")
        else:
            self._require("rbp_budget", "Give the number of documents per topic.")
            p = data.get("rbp_p")
            if p is not None and not 0 < p < 1:
                self.add_error("rbp_p", "p must be above 0 and below 1.")
            params["budget"] = data.get("rbp_budget")
            params["p"] = 0.8 if p is None else p
            params["aggregate"] = data.get("rbp_aggregate") or "sum"
            params["depth"] = data.get("rbp_depth")

        if data.get("judging_order"):
            params["adjudication"] = {
                "order": data["judging_order"],
                "burn_in": 5 if data.get("burn_in") is None else data["burn_in"],
                "budget": data.get("judging_budget"),
                "budget_fraction": data.get("judging_fraction"),
                "target": data.get("recall_target") or 0.8,
            }

        topics = None
        wanted = parse_topic_ids(data.get("topics") or "")
        if wanted:
            known = Topic.objects.filter(campaign=self.campaign, topic_id__in=wanted)
            found = {t.topic_id: t for t in known}
            missing = [t for t in wanted if t not in found]
            if missing:
                shown = ", ".join(missing[:10]) + (" …" if len(missing) > 10 else "")
                self.add_error("topics", f"Not a topic of this campaign: {shown}.")
            topics = [found[t] for t in wanted if t in found]

        if not self.errors and runs:
            try:
                normalise_params(strategy, params, runs)
            except PoolDefinitionError as exc:
                self.add_error(None, str(exc))
        self.definition = {
            "strategy": strategy,
            "params": params,
            "runs": runs,
            "topics": topics,
            "seed": data.get("seed") if strategy == Pool.Strategy.SAMPLE else None,
            "note": data.get("note") or "",
        }
        return data

    def _require(self, name: str, message: str) -> None:
        if self.cleaned_data.get(name) is None and name not in self.errors:
            self.add_error(name, message)


class PlannerForm(forms.Form):
    """The planner's GET parameters: extra depths and the seconds per judgment."""

    depths = forms.CharField(
        label="More depths",
        required=False,
        help_text="Added to 1, 5, 10, 20, 50, 100; e.g. 30 200.",
        widget=forms.TextInput(attrs={"inputmode": "numeric", "placeholder": "30 200"}),
    )
    seconds = forms.FloatField(
        label="Seconds per judgment",
        required=False,
        min_value=0,
        max_value=MAX_SECONDS,
        widget=forms.NumberInput(attrs={"step": "any"}),
    )

    def clean_depths(self) -> list[int]:
        extra = []
        for part in parse_topic_ids(self.cleaned_data.get("depths") or ""):
            if not part.isdigit() or not 1 <= int(part) <= MAX_DEPTH:
                raise forms.ValidationError(f"“{part}” is not a depth from 1 to {MAX_DEPTH:,}.")
            extra.append(int(part))
        if len(extra) > MAX_EXTRA_DEPTHS:
            raise forms.ValidationError(f"At most {MAX_EXTRA_DEPTHS} more depths.")
        return extra

    def planner_depths(self) -> list[int]:
        extra = self.cleaned_data.get("depths", []) if self.is_valid() else []
        return sorted({*PLANNER_DEPTHS, *extra})

    def planner_seconds(self) -> float | None:
        return self.cleaned_data.get("seconds") if self.is_valid() else None
