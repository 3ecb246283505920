"""The choices on the report pages. Every field is optional and falls back to its default, so a
report is a plain GET link (``?policy=max&sort=P@10``) and an empty query string shows the
default report."""

from __future__ import annotations

from typing import Any

from django import forms

from campaigns.models import Assessor, Campaign
from pooling.models import Pool
from qrels.evaluation import MEASURES
from qrels.formats import CONFLICT_POLICIES
from qrels.policies import POLICIES, default_policy
from qrels.queries import judging_assessors
from qrels.sampled import DEFAULT_MEASURES
from qrels.sources import QrelsSource

YES_NO = [("yes", "Included"), ("no", "Left out")]
# Short enough for a select beside three others; the Export page explains each at length.
POLICY_LABELS = {
    "primary": "primary: the topic's primary assessor",
    "majority": "majority (a tie: the higher label)",
    "max": "max: the highest label",
    "min": "min: the lowest label",
    "mean": "mean, rounded half up",
    "first": "first: the label judged first",
    "refuse": "refuse: only if all agree",
    "adjudicated": "adjudicated: the settled label, else the default",
}


def policy_choices(campaign: Campaign) -> list[tuple[str, str]]:
    return [("", f"Default: {default_policy(campaign)}")] + [
        (name, POLICY_LABELS[name]) for name in POLICIES
    ]


MEASURE_CHOICES = [(m, m) for m in MEASURES]


def fill_defaults(form: forms.Form) -> None:
    """Give a bound form the initial value of every field the query left out, so that what
    the page shows selected is what the report was computed with."""
    if not form.is_bound:
        return
    data = form.data.copy()
    for name, field in form.fields.items():
        key = form.add_prefix(name)
        value = form.initial.get(name, field.initial)
        if key not in data and value is not None and not isinstance(value, list | tuple):
            data[key] = value
    form.data = data


def _choice(form: forms.Form, name: str, default: str) -> str:
    """The field's cleaned value when the query names it, else its initial value, else
    ``default`` (an empty choice means "the default" too)."""
    if form.is_bound and form.add_prefix(name) in form.data:
        value = getattr(form, "cleaned_data", {}).get(name)
        return value or default
    return form.initial.get(name) or default


class QrelsSourceForm(forms.Form):
    """Which qrels: the campaign's under a policy, one assessor's own verdicts; imported sources
    in or out; all judged pairs or only those of one pool version."""

    source = forms.ChoiceField(label="Qrels", required=False)
    policy = forms.ChoiceField(label="Several assessors on a pair", required=False)
    imported = forms.ChoiceField(label="Imported qrels", choices=YES_NO, required=False)
    pool = forms.ChoiceField(label="Pairs", required=False)

    def __init__(self, *args, campaign: Campaign, default_source: str = "campaign", **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.default_source = default_source
        self.assessors = {str(a.pk): a for a in judging_assessors(campaign)}
        people = [
            (f"assessor-{pk}", f"{a.name} only")
            for pk, a in self.assessors.items()
            if a.kind == Assessor.Kind.PERSON
        ]
        sources = [
            (f"assessor-{pk}", f"{a.name} only (imported)")
            for pk, a in self.assessors.items()
            if a.kind != Assessor.Kind.PERSON
        ]
        choices: list[Any] = [("campaign", "Campaign qrels (policy below)")]
        if people:
            choices.append(("One assessor", people))
        if sources:
            choices.append(("One imported source", sources))
        self.fields["source"].choices = choices
        self.fields["policy"].choices = policy_choices(campaign)
        self.pools = {
            str(pool.version): pool for pool in campaign.pools.built().order_by("-version")
        }
        self.fields["pool"].choices = [("", "Every judged pair")] + [
            (version, f"Pool v{version} only · {pool.describe()}")
            for version, pool in self.pools.items()
        ]
        self.initial.setdefault("source", default_source)
        self.initial.setdefault("imported", "yes")
        fill_defaults(self)

    def qrels_source(self) -> QrelsSource:
        """The chosen qrels (defaults where a field was left out or the form is unbound)."""
        source = _choice(self, "source", self.default_source)
        policy = _choice(self, "policy", "") or None
        imported = _choice(self, "imported", "yes") == "yes"
        pool = _choice(self, "pool", "")
        version = int(pool) if pool else None
        if source.startswith("assessor-"):
            assessor = self.assessors[source.removeprefix("assessor-")]
            return QrelsSource(kind="assessor", assessor=assessor.name, pool=version)
        return QrelsSource(kind="campaign", policy=policy, include_imported=imported, pool=version)


class EvaluationForm(QrelsSourceForm):
    # A sampled pool's pairs are scored with the inferred measures (qrels.sampled) too.
    sort = forms.ChoiceField(
        label="Order by",
        choices=MEASURE_CHOICES + [(m, m) for m in DEFAULT_MEASURES if m not in MEASURES],
        required=False,
    )

    def sort_measure(self) -> str:
        return _choice(self, "sort", MEASURES[0])


class MeasureForm(forms.Form):
    measure = forms.ChoiceField(label="Measure", choices=MEASURE_CHOICES[:-1], required=False)
    common = forms.ChoiceField(
        label="Topics",
        choices=[("yes", "Only topics both qrels have"), ("no", "Every topic of each")],
        required=False,
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fill_defaults(self)

    def measure_name(self) -> str:
        return _choice(self, "measure", MEASURES[0])

    def common_topics(self) -> bool:
        return _choice(self, "common", "yes") == "yes"


class PoolBiasForm(forms.Form):
    pool = forms.ChoiceField(label="Pool", required=False)
    measure = forms.ChoiceField(label="Measure", choices=MEASURE_CHOICES[:-1], required=False)
    policy = forms.ChoiceField(label="Several assessors on a pair", required=False)
    imported = forms.ChoiceField(label="Imported qrels", choices=YES_NO, required=False)

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.pools = {
            str(pool.version): pool for pool in campaign.pools.built().order_by("-version")
        }
        self.fields["pool"].choices = [
            (version, f"v{version} · {pool.describe()} · {pool.runs.count()} runs")
            for version, pool in self.pools.items()
        ]
        self.fields["policy"].choices = policy_choices(campaign)
        fill_defaults(self)

    def chosen_pool(self) -> Pool | None:
        version = _choice(self, "pool", "")
        if version in self.pools:
            return self.pools[version]
        # Default: the latest depth pool (leave-one-out needs a depth), else the latest pool.
        depth = [p for p in self.pools.values() if p.strategy == Pool.Strategy.DEPTH]
        return (depth or list(self.pools.values()) or [None])[0]

    def options(self) -> dict[str, Any]:
        pool = self.chosen_pool()
        return {
            "pool": pool.version if pool else None,
            "measure": _choice(self, "measure", MEASURES[0]),
            "policy": _choice(self, "policy", "") or None,
            "include_imported": _choice(self, "imported", "yes") == "yes",
        }


class AgreementForm(forms.Form):
    assessors = forms.MultipleChoiceField(
        label="Assessors", required=False, widget=forms.CheckboxSelectMultiple
    )
    labels = forms.ChoiceField(
        label="Labels",
        choices=[("graded", "As given (graded)"), ("binary", "Binary")],
        required=False,
    )

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.known = judging_assessors(campaign)
        self.fields["assessors"].choices = [(str(a.pk), a.name) for a in self.known]
        self.fields["labels"].choices = [
            ("graded", "As judged"),
            ("binary", f"Binary: relevant from label {campaign.relevance_threshold}"),
        ]

    def chosen(self) -> list[str]:
        """Names of the chosen assessors, in the page's order (people first); all by default."""
        picked = set(self.cleaned_data.get("assessors") or []) if self.is_bound else set()
        return [a.name for a in self.known if not picked or str(a.pk) in picked]

    def binary(self) -> bool:
        return _choice(self, "labels", "graded") == "binary"


class PairListForm(forms.Form):
    """The filters of the list of pairs behind an agreement count: a confusion cell (the label
    each assessor gave, either or both), a topic, a least distance between the labels, and the
    page. Every field is optional: without any, the list is every pair both judged."""

    labels = forms.ChoiceField(
        choices=[("graded", "As judged"), ("binary", "Binary")], required=False
    )
    a_label = forms.IntegerField(label="First assessor's label", required=False, min_value=0)
    b_label = forms.IntegerField(label="Second assessor's label", required=False, min_value=0)
    topic = forms.ChoiceField(label="Topic", required=False)
    distance = forms.IntegerField(
        label="Labels at least this far apart", required=False, min_value=0, max_value=1000
    )
    show = forms.ChoiceField(
        label="Pairs",
        required=False,
        choices=[
            ("", "Both labelled 0 or more"),
            ("same", "Given the same label"),
            ("negative", "With a negative label (in no figure)"),
        ],
    )
    page = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        topics = campaign.topics.order_by("position", "topic_id").values_list("topic_id", "title")
        self.fields["topic"].choices = [("", "Every topic")] + [
            (topic_id, f"{topic_id} {title}"[:70].strip()) for topic_id, title in topics
        ]
        self.fields["labels"].choices = [
            ("graded", "As judged"),
            ("binary", f"Binary: relevant from label {campaign.relevance_threshold}"),
        ]

    def binary(self) -> bool:
        return _choice(self, "labels", "graded") == "binary"


class UploadForm(forms.Form):
    qrels = forms.FileField(
        label="Qrels file",
        help_text="topic iteration docid label, as trec_eval reads it (gzip accepted).",
    )
    on_conflict = forms.ChoiceField(
        label="A pair given twice with different labels",
        choices=[(name, name) for name in CONFLICT_POLICIES],
        initial="refuse",
        required=False,
    )

    def conflict_policy(self) -> str:
        return self.cleaned_data.get("on_conflict") or "refuse"
