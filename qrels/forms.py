from __future__ import annotations

from typing import Any

from django import forms

from campaigns.models import Campaign
from qrels.policies import POLICIES, default_policy

POLICY_HELP = {
    "primary": "the topic's primary assessor, else majority",
    "majority": "most frequent label, ties to the higher",
    "max": "highest label",
    "min": "lowest label",
    "mean": "mean, rounded half up",
    "first": "the label judged first",
    "refuse": "only if assessors agree",
    "adjudicated": "the adjudicated label, else the default policy",
}


class ExportForm(forms.Form):
    policy = forms.ChoiceField(
        label="Combining several assessors",
        help_text="How one label is chosen for a pair judged by more than one assessor. "
        "Refuse lists every disagreeing pair instead of building.",
    )
    unjudged = forms.ChoiceField(
        label="Pooled but unjudged pairs",
        choices=[
            ("omit", "Leave them out (absence = not judged)"),
            ("-1", "Write them with label -1 (for inferred measures)"),
        ],
        initial="omit",
        widget=forms.RadioSelect,
        help_text="Pairs nobody labelled. Negative labels from imported qrels are written as "
        "they came either way.",
    )
    pool = forms.ChoiceField(
        label="Pool",
        required=False,
        help_text="With a pool, only its pairs are exported; otherwise every judgment.",
    )
    per_assessor = forms.BooleanField(
        label="One qrels file per assessor (instead of qrels.txt)", required=False
    )
    binary = forms.BooleanField(
        label="Binary labels (1 from the relevance threshold)", required=False
    )
    include_imported = forms.BooleanField(
        label="Include imported judgments (earlier qrels)", required=False, initial=True
    )
    include_models = forms.BooleanField(
        label="Include model assessors' labels (an LLM judge's)",
        required=False,
        initial=False,
        help_text="Left out by default: the qrels are then people's and imported sources' "
        "labels. The bundle's README counts the labels of each source.",
    )
    include_filled = forms.BooleanField(
        label="Include filled labels (a hybrid budget's calibrated model labels)",
        required=False,
        initial=False,
        help_text="Left out by default. They are marked filled in the sidecar's source column.",
    )
    usernames = forms.BooleanField(
        label="Name assessors by login instead of pseudonym",
        required=False,
        help_text="Logins are personal data: share such a bundle only with whom may see them.",
    )

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        default = default_policy(campaign)
        self.fields["policy"].choices = [("", f"Default: {default} ({POLICY_HELP[default]})")] + [
            (name, f"{name}: {POLICY_HELP[name]}") for name in POLICIES
        ]
        self.fields["policy"].required = False
        self.pools = {
            str(pool.version): pool for pool in campaign.pools.built().order_by("-version")
        }
        self.fields["pool"].choices = [("", "All built pools")] + [
            (version, f"v{version} · {pool.describe()}") for version, pool in self.pools.items()
        ]

    def options(self) -> dict[str, Any]:
        """The export options, JSON-safe, as stored on the Export and given to the job."""
        data = self.cleaned_data
        pool = data.get("pool") or None
        return {
            "policy": data.get("policy") or default_policy(self.campaign),
            "per_assessor": bool(data.get("per_assessor")),
            "unjudged": data["unjudged"],
            "binary": bool(data.get("binary")),
            "include_imported": bool(data.get("include_imported")),
            "include_models": bool(data.get("include_models")),
            "include_filled": bool(data.get("include_filled")),
            "usernames": bool(data.get("usernames")),
            "pool": int(pool) if pool else None,
        }
