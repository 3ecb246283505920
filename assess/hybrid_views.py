"""The organiser's hybrid budget page of a pool (assess/hybrid.py): which model routes, each
topic's budget, how much of it people judged, and the fill once it is judged."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from assess.hybrid import HybridError, Share, budget_rows, fill, set_budget
from assess.models import HybridPlan
from campaigns.access import get_campaign_for
from campaigns.models import Assessor


class BudgetForm(forms.Form):
    model = forms.ChoiceField(
        label="Route by",
        help_text="The model assessor whose uncertainty decides what people judge first.",
    )
    routing = forms.ChoiceField(
        choices=HybridPlan.Routing.choices,
        label="Routing",
        help_text="Least certain first re-ranks after every verdict; the others are fixed orders.",
    )
    probabilities = forms.BooleanField(
        required=False,
        label="Use the model's label probabilities (logprobs), not its labels",
    )
    every = forms.CharField(
        required=False,
        label="Budget for every topic",
        help_text="A share of the pairs the model labelled (30%) or a count (12); a topic's "
        "own budget below wins. Empty: topics keep what they have.",
    )

    def __init__(self, *args, models, rows, plan, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [(m.name, m.name) for m in models]
        if plan is not None:
            self.fields["model"].initial = plan.model.name
            self.fields["routing"].initial = plan.routing
            self.fields["probabilities"].initial = plan.probabilities
        self.rows = rows
        for row in rows:
            self.fields[f"topic-{row.topic.pk}"] = forms.CharField(
                required=False, initial=row.share, label=f"Topic {row.topic.topic_id}"
            )

    def budgets(self) -> dict:
        """Topic -> Share from the form; raises HybridError naming the topic."""
        every = self.cleaned_data.get("every", "").strip()
        found = {}
        for row in self.rows:
            if row.budget is not None and row.budget.filled_at is not None:
                continue  # filled: its budget stays as it was judged (its field is disabled)
            own = self.cleaned_data.get(f"topic-{row.topic.pk}", "").strip()
            if own and own == row.share and every:
                own = ""  # unchanged in the form: the budget for every topic applies
            text = own or every
            if text:
                found[row.topic] = Share.parse(text, where=f"Topic {row.topic.topic_id}")
        return found


@login_required
@require_http_methods(["GET", "POST"])
def hybrid_budget(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    pool = campaign.pools.built().filter(version=version).first()
    if pool is None:
        raise Http404("No such built pool.")
    plan = HybridPlan.objects.filter(pool=pool).select_related("model").first()
    models = list(Assessor.objects.filter(campaign=campaign, kind=Assessor.Kind.MODEL))
    rows = budget_rows(pool)
    action = request.POST.get("action") if request.method == "POST" else None
    form = BudgetForm(
        request.POST if action == "budget" else None, models=models, rows=rows, plan=plan
    )
    if action == "budget" and form.is_valid():
        model = next(m for m in models if m.name == form.cleaned_data["model"])
        try:
            set_budget(
                pool=pool,
                model=model,
                budgets=form.budgets(),
                route=form.cleaned_data["routing"],
                probabilities=form.cleaned_data["probabilities"],
                by=request.user,
            )
        except HybridError as exc:
            form.add_error(None, f"Nothing was changed: {exc}")
        else:
            messages.success(request, f"Hybrid budget of pool v{pool.version} saved.")
            return redirect("assess:hybrid", campaign.slug, pool.version)
    elif action == "fill":
        wanted = request.POST.get("topic", "")
        ready = [r.topic for r in rows if r.ready]
        topics = [t for t in ready if str(t.pk) == wanted] if wanted else ready
        try:
            if not topics:
                raise HybridError("No topic's budget is judged yet: nothing to fill.")
            report = fill(pool=pool, topics=topics, by=request.user)
        except HybridError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                "Filled: "
                + "; ".join(f"topic {r.topic} {r.filled} new or changed" for r in report)
                + ". They enter qrels only with “Include filled labels”.",
            )
        return redirect("assess:hybrid", campaign.slug, pool.version)
    fields = [(row, form[f"topic-{row.topic.pk}"]) for row in rows]
    return render(
        request,
        "assess/organiser/hybrid.html",
        {
            "campaign": campaign,
            "pool": pool,
            "plan": plan,
            "form": form,
            "fields": fields,
            "models": models,
        },
    )
