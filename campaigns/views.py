from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from campaigns.access import ASSESSOR, ORGANISER, get_campaign_for
from campaigns.forms import CampaignForm, LabelFormSet, RubricMetaForm
from campaigns.members import add_member
from campaigns.models import Campaign
from campaigns.scales import SCALES


@login_required
@permission_required("campaigns.add_campaign", raise_exception=True)
@require_http_methods(["GET", "POST"])
def campaign_create(request: HttpRequest) -> HttpResponse:
    form = CampaignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        scale = SCALES[form.cleaned_data["scale"]]
        with transaction.atomic():
            campaign: Campaign = form.save(commit=False)
            campaign.created_by = request.user
            campaign.relevance_threshold = scale.threshold
            campaign.save()
            campaign.save_rubric(list(scale.labels), by=request.user, note=f"{scale.title} preset")
            add_member(campaign=campaign, user=request.user, role=ORGANISER)
        messages.success(request, f"Campaign “{campaign.title}” created. Review its rubric next.")
        return redirect("campaigns:rubric", slug=campaign.slug)
    return render(request, "campaigns/campaign_form.html", {"form": form})


@login_required
def campaign_detail(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug, role=None)
    if request.campaign_role == ASSESSOR:
        return redirect("campaigns:guide", slug=slug)
    topics = campaign.topics.all()
    documents = Paginator(campaign.documents.only("doc_id", "title"), 50).get_page(
        request.GET.get("page")
    )
    context = {
        "campaign": campaign,
        "rubric": campaign.current_rubric(),
        "topics": topics,
        "topic_count": topics.count(),
        "documents": documents,
        "members": campaign.memberships.select_related("user"),
    }
    return render(request, "campaigns/campaign_detail.html", context)


@login_required
def campaign_guide(request: HttpRequest, slug: str) -> HttpResponse:
    """Guidelines and rubric, for anyone in the campaign."""
    campaign = get_campaign_for(request, slug, role=None)
    return render(
        request,
        "campaigns/campaign_guide.html",
        {"campaign": campaign, "rubric": campaign.current_rubric()},
    )


def _initial_labels(campaign: Campaign, preset: str | None) -> tuple[list[dict], int]:
    if preset in SCALES:
        scale = SCALES[preset]
        return [spec.__dict__ for spec in scale.labels], scale.threshold
    rubric = campaign.current_rubric()
    specs = rubric.specs() if rubric else list(SCALES["binary"].labels)
    return [spec.__dict__ for spec in specs], campaign.relevance_threshold


@login_required
@require_http_methods(["GET", "POST"])
def rubric_edit(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    if request.method == "POST":
        formset = LabelFormSet(request.POST, prefix="labels")
        meta = RubricMetaForm(request.POST)
        if formset.is_valid() and meta.is_valid():
            try:
                version = campaign.save_rubric(
                    formset.specs(),
                    by=request.user,
                    note=meta.cleaned_data["note"],
                    threshold=meta.cleaned_data["threshold"],
                )
            except ValueError as exc:
                meta.add_error("threshold", str(exc))
            else:
                messages.success(request, f"Saved rubric version {version.number}.")
                return redirect("campaigns:rubric", slug=slug)
    else:
        initial, threshold = _initial_labels(campaign, request.GET.get("preset"))
        formset = LabelFormSet(initial=initial, prefix="labels")
        meta = RubricMetaForm(initial={"threshold": threshold})
    context = {
        "campaign": campaign,
        "formset": formset,
        "meta": meta,
        "rubric": campaign.current_rubric(),
        "scales": SCALES,
    }
    return render(request, "campaigns/rubric_edit.html", context)


@login_required
def rubric_history(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    versions = campaign.rubric_versions.order_by("-number").prefetch_related("labels")
    return render(
        request, "campaigns/rubric_history.html", {"campaign": campaign, "versions": versions}
    )
