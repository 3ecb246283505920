"""Redirects from input and reserved addresses (ASVS V3.7, V15): the audit found that a job's
Cancel and Retry followed any ``next`` (``https://evil.example`` -> 302 there;
``javascript:…`` -> a 500 after the action had run) and that a campaign could be called ``new``,
which /c/new/ (the new-campaign page) makes unreachable."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Campaign, Job

pytestmark = pytest.mark.django_db

FOREIGN = [
    "https://evil.example/",
    "//evil.example/",
    "/\\evil.example/",
    "http://testserver/c/robust04/jobs/",  # this site, but downgraded from HTTPS
    "javascript:alert(document.domain)",
    "data:text/html,<script>alert(1)</script>",
    " javascript:alert(1)",
]


@pytest.fixture
def job(campaign, organiser) -> Job:
    return Job.objects.create(
        campaign=campaign,
        kind="import_topics",
        task_name="campaigns.tasks.import_topics_task",
        status=Job.Status.FAILED,
        error="boom",
        params={"uploads": [], "files": [], "options": {}},
        finished_at=timezone.now(),
        created_by=organiser,
    )


@pytest.mark.parametrize("action", ["job_cancel", "job_retry"])
@pytest.mark.parametrize("target", FOREIGN)
def test_job_actions_never_follow_a_next_to_another_site_or_a_script(
    client, campaign, organiser, job, action, target
):
    client.force_login(organiser)
    url = reverse(f"campaigns:{action}", args=[campaign.slug, job.pk])
    response = client.post(url, {"next": target})
    assert response.status_code == 302
    assert response["Location"] == reverse("campaigns:jobs", args=[campaign.slug])


@pytest.mark.parametrize("action", ["job_cancel", "job_retry"])
def test_job_actions_follow_a_next_on_this_site(client, campaign, organiser, job, action):
    client.force_login(organiser)
    here = reverse("campaigns:job", args=[campaign.slug, job.pk])
    url = reverse(f"campaigns:{action}", args=[campaign.slug, job.pk])
    assert client.post(url, {"next": here})["Location"] == here


def test_the_login_page_never_sends_a_user_to_another_site(client, organiser):
    from tests.conftest import PASSWORD

    for target in FOREIGN:
        response = client.post(
            reverse("login") + "?next=" + target,
            {"username": "olivia", "password": PASSWORD, "next": target},
        )
        assert response.status_code == 302
        assert response["Location"] == reverse("home"), target
        client.post(reverse("logout"))


def test_no_view_redirects_to_a_next_without_checking_it():
    """Every ``next`` (or other address) read from a request and redirected to goes through
    ``accounts.redirects.safe_next`` (or Django's own checked views): a grep for the pattern."""
    root = Path(settings.BASE_DIR)
    unchecked = []
    for path in root.glob("*/*.py"):
        if path.parts[-2] in {"tests", "bench", "scripts", ".venv"}:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(r"redirect\(\s*request\.(POST|GET|META|headers)", line) or re.search(
                r"(HttpResponseRedirect|HttpResponseClientRedirect)\(\s*request\.", line
            ):
                unchecked.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not unchecked, "\n".join(unchecked)


# --- Reserved slugs --------------------------------------------------------------------------


def test_every_word_the_addresses_under_c_use_is_reserved():
    from campaigns.models import reserved_slugs

    words = reserved_slugs()
    assert {"new", "jobs", "judge", "assessors", "pools", "export", "reports"} <= words
    assert all(re.fullmatch(r"[a-z0-9-]+", word) for word in words), words


@pytest.mark.parametrize("slug", ["new", "jobs", "judge", "pool-bias"])
def test_a_reserved_slug_is_refused_on_the_new_campaign_page(client, slug):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    creator = get_user_model().objects.create_user("creator", password="x")
    creator.user_permissions.add(Permission.objects.get(codename="add_campaign"))
    client.force_login(creator)
    response = client.post(
        reverse("campaigns:create"), {"title": "A campaign", "slug": slug, "scale": "binary"}
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert f"“{slug}” is reserved" in text
    assert not Campaign.objects.filter(slug=slug).exists()


def test_the_campaign_called_new_is_refused_with_the_reason(client):
    with pytest.raises(CommandError, match=r"/c/new/ is the page that creates campaigns"):
        call_command("create_campaign", "new", "--title", "New", stdout=StringIO())
    assert not Campaign.objects.filter(slug="new").exists()


def test_an_ordinary_slug_is_still_accepted(client):
    call_command("create_campaign", "newsroom", "--title", "Newsroom", stdout=StringIO())
    assert Campaign.objects.filter(slug="newsroom").exists()
