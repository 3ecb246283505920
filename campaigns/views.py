from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from accounts.redirects import safe_next
from campaigns import jobs
from campaigns.access import ADJUDICATOR, ASSESSOR, ORGANISER, get_campaign_for
from campaigns.forms import (
    CampaignForm,
    CampaignSettingsForm,
    ImportForm,
    LabelFormSet,
    RubricMetaForm,
)
from campaigns.members import add_member
from campaigns.models import COMMAND_KEYS, Campaign, Job, Upload
from campaigns.scales import SCALES
from campaigns.uploads import (
    IMPORTERS,
    Limits,
    UploadRefused,
    bytes_kept_until,
    purge_expired_bytes,
    store_upload,
    upload_refusals,
)


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
        return redirect("assess:campaign_home", slug=slug)
    if request.campaign_role == ADJUDICATOR:
        return redirect("qrels:agreement", slug=slug)
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
@require_http_methods(["GET", "POST"])
def campaign_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """Title, description, guidelines and the judging screen's switches (topic breaks, term
    highlighting), for the campaign's organisers."""
    campaign = get_campaign_for(request, slug)
    form = CampaignSettingsForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Settings saved; assessors see them from their next document.")
        return redirect("campaigns:settings", slug=slug)
    status = 400 if form.errors else 200
    return render(
        request,
        "campaigns/campaign_settings.html",
        {"campaign": campaign, "form": form},
        status=status,
    )


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
        "command_keys": COMMAND_KEYS,
    }
    return render(request, "campaigns/rubric_edit.html", context)


@login_required
def rubric_history(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    versions = campaign.rubric_versions.order_by("-number").prefetch_related("labels")
    return render(
        request, "campaigns/rubric_history.html", {"campaign": campaign, "versions": versions}
    )


# --- Files: uploads and their import jobs ---------------------------------------------------------

IMPORT_KINDS = ("import_topics", "import_documents", "import_runs", "import_qrels")


def _import_cards(campaign: Campaign, forms: dict | None = None) -> list[dict]:
    forms = forms or {}
    cards = []
    for kind, importer in IMPORTERS.items():
        latest = campaign.jobs.filter(kind=f"import_{kind}").first()
        cards.append(
            {
                "importer": importer,
                "form": forms.get(kind) or ImportForm(importer=importer),
                "job": latest,
            }
        )
    return cards


def _file_counts(campaign: Campaign) -> dict[str, int]:
    return {
        "topics": campaign.topics.count(),
        "documents": campaign.documents.count(),
        "judgments": campaign.judgments.count(),
    }


@login_required
def files(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    context = {
        "campaign": campaign,
        "cards": _import_cards(campaign),
        "counts": _file_counts(campaign),
        "recent": campaign.jobs.filter(kind__in=IMPORT_KINDS)[:10],
        "limits": Limits.current(),
    }
    return render(request, "campaigns/files.html", context)


@login_required
@require_POST
def upload(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    importer = IMPORTERS.get(kind)
    if importer is None:
        raise Http404("No such kind of file.")
    form = ImportForm(request.POST, request.FILES, importer=importer)
    job = None
    refusals = upload_refusals(request)
    if refusals:
        # A limit was passed while the files streamed in: what did arrive is not stored either,
        # and the refusal replaces whatever the field would say about the files it lacks.
        form.is_valid()
        form.errors.pop("files", None)
        for refusal in refusals:
            form.add_error("files", refusal)
    elif form.is_valid():
        try:
            with transaction.atomic():
                stored = [
                    store_upload(campaign=campaign, kind=kind, file=f, user=request.user)
                    for f in form.files_list()
                ]
                job = jobs.enqueue(
                    kind=f"import_{kind}",
                    task=importer.task_name,
                    campaign=campaign,
                    params={
                        "uploads": [u.pk for u in stored],
                        "files": [u.name for u in stored],
                        "options": form.options(),
                    },
                    user=request.user,
                )
                Upload.objects.filter(pk__in=[u.pk for u in stored]).update(job=job)
        except UploadRefused as exc:
            form.add_error("files", str(exc))
            job = None
        else:
            # New bytes arrive: the expired bytes of failed imports leave (cheap when none).
            purge_expired_bytes()
    if job is not None and not request.htmx:
        messages.info(request, f"{importer.title}: import started.")
        return redirect("campaigns:files", slug=slug)
    if job is not None:
        job.refresh_from_db()
        form = ImportForm(importer=importer)
    card = {
        "importer": importer,
        "form": form,
        "job": job or campaign.jobs.filter(kind=f"import_{kind}").first(),
    }
    if request.htmx:
        return render(
            request,
            "campaigns/files.html#import-card",
            {"campaign": campaign, "card": card, "limits": Limits.current()},
        )
    context = {
        "campaign": campaign,
        "cards": _import_cards(campaign, {kind: form}),
        "counts": _file_counts(campaign),
        "recent": campaign.jobs.filter(kind__in=IMPORT_KINDS)[:10],
        "limits": Limits.current(),
    }
    return render(request, "campaigns/files.html", context, status=400)


# --- Jobs ---------------------------------------------------------------------------------------


def _get_job(request: HttpRequest, slug: str, pk: int) -> tuple[Campaign, Job]:
    campaign = get_campaign_for(request, slug)
    job = campaign.jobs.filter(pk=pk).first()
    if job is None:
        raise Http404("No such job.")
    return campaign, job


@login_required
def job_list(request: HttpRequest, slug: str) -> HttpResponse:
    campaign = get_campaign_for(request, slug)
    page = Paginator(campaign.jobs.select_related("created_by"), 50).get_page(
        request.GET.get("page")
    )
    context = {
        "campaign": campaign,
        "jobs": page,
        "any_active": any(not j.is_final for j in page),
        "workers": jobs.worker_status(),
    }
    template = "campaigns/jobs.html#job-table" if request.htmx else "campaigns/jobs.html"
    response = render(request, template, context)
    # Without a worker the page keeps looking, so that it says so the moment one answers.
    if request.htmx and not context["any_active"] and context["workers"].ok:
        response.status_code = HttpResponseStopPolling.status_code
    return response


@login_required
def job_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """The job's status; as an htmx fragment it polls itself until the job is final."""
    campaign, job = _get_job(request, slug, pk)
    if request.htmx:
        response = render(request, "campaigns/_job.html", {"campaign": campaign, "job": job})
        if job.is_final:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    context = {"campaign": campaign, "job": job, "bytes_kept_until": bytes_kept_until(job)}
    return render(request, "campaigns/job_detail.html", context)


@login_required
@require_POST
def job_cancel(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    _campaign, job = _get_job(request, slug, pk)
    jobs.request_cancel(job)
    messages.info(request, f"Job {job.pk} ({job.kind}): cancellation requested.")
    return redirect(safe_next(request, reverse("campaigns:jobs", args=[slug])))


@login_required
@require_POST
def job_retry(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    _campaign, job = _get_job(request, slug, pk)
    with transaction.atomic():
        sent = jobs.retry(job)
    if sent:
        messages.info(request, f"Job {job.pk} ({job.kind}) queued again.")
    else:
        messages.warning(
            request, f"Job {job.pk} is {job.get_status_display().lower()}; nothing to retry."
        )
    return redirect(safe_next(request, reverse("campaigns:jobs", args=[slug])))
