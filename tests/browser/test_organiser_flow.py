"""The organiser's whole path in real Chromium: create a campaign, upload topics, documents and
runs, build a depth pool, create two assessors and give out the work with 10% overlap; one
assessor judges with the keyboard in another browser, and the organiser's progress page shows it
without a reload.

Jobs (imports, the pool build) run in the worker process where a broker is configured (CI), so
the test waits for them in the page, as an organiser would, never on the database."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from assess.models import Assignment
from campaigns.models import Campaign, Judgment

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

DEMO = Path(settings.BASE_DIR) / "pooljudge" / "demo"
JOB_TIMEOUT = 120_000  # ms: a job waits for a free worker, then imports
PASSPHRASE = "a-long-enough-passphrase"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def founder(db):
    user = get_user_model().objects.create_user("olivia", password=PASSPHRASE)
    user.user_permissions.add(Permission.objects.get(codename="add_campaign"))
    return user


def _import(page, kind: str, *files: Path) -> None:
    card = f"#import-{kind}"
    page.set_input_files(f"{card} input[type=file]", [str(f) for f in files])
    page.click(f"{card} button.primary")
    # The card swaps in with its job, which polls itself until it is final.
    page.wait_for_selector(f"{card} .job .badge.status-done", timeout=JOB_TIMEOUT)


def test_an_organiser_sets_up_gives_out_work_and_watches_it_move(live_server, login, founder):
    page = login(founder)
    base = live_server.url

    # A campaign, from the browser.
    page.goto(f"{base}/c/new/")
    page.fill("#id_title", "Docstring search")
    page.fill("#id_slug", "docs")
    page.select_option("#id_scale", "graded3")
    page.click("button.primary")
    page.wait_for_url(f"{base}/c/docs/rubric/")
    campaign = Campaign.objects.get(slug="docs")

    # Files: topics, documents and three runs, each an all-or-nothing import job.
    page.goto(f"{base}/c/docs/files/")
    _import(page, "topics", DEMO / "topics.xml")
    _import(page, "documents", DEMO / "documents.jsonl.gz")
    runs = sorted((DEMO / "runs").glob("*.run.gz"))[:3]
    _import(page, "runs", *runs)
    assert campaign.topics.count() == 20
    assert campaign.runs.count() == 3

    # A depth-5 pool, built in the background; its page shows it once built.
    page.goto(f"{base}/c/docs/pools/")
    page.check("input[name=strategy][value=depth]")
    page.fill("#id_depth", "5")
    page.click("#build button.primary")
    page.wait_for_url(f"{base}/c/docs/pools/1/")
    page.wait_for_selector("h1 .badge.status-built", timeout=JOB_TIMEOUT)

    # Two assessor accounts and the work, on the Assessors page (htmx swaps the workspace).
    page.goto(f"{base}/c/docs/assessors/")
    for name in ("ada", "grace"):
        page.fill("#create input[name=username]", name)
        page.fill("#create input[name=password]", PASSPHRASE)
        page.click("#create button.primary")
        page.wait_for_selector(f"text=Created the account {name}")
    page.select_option("#id_assessor", label="ada")
    page.check("#id_all_topics")
    page.check("input[name=mode][value=primary]")
    page.fill("#id_overlap", "10%")
    page.select_option("#id_partner", label="grace")
    page.click("#assign button.primary")
    page.wait_for_selector("text=Pool v1: ada: primary on 20 topics")
    primary = Assignment.objects.get(assessor__name="ada", mode="primary")
    overlap = Assignment.objects.get(assessor__name="grace", mode="overlap")
    assigned = primary.items.count() + overlap.items.count()
    assert overlap.items.count() >= 20  # at least one document of every topic
    assert page.locator("#grid tbody tr").count() == 20

    # The organiser watches the progress page; it must update by itself.
    page.goto(f"{base}/c/docs/progress/")
    total = page.locator("#live .ow-totals .stat strong").first
    assert total.inner_text().replace(" ", "") == f"0/{assigned}"
    page.evaluate("window.__still_this_page = true")

    # Ada judges three documents with the keyboard, in a browser of her own.
    ada = get_user_model().objects.get(username="ada")
    judge = login(ada)
    judge.goto(f"{base}/c/docs/judge/")
    # The organiser typed her password: she replaces it before anything else, then goes on.
    judge.wait_for_selector("h1:has-text('Choose your own password')")
    judge.fill("#id_new_password1", "adas-own-passphrase")
    judge.fill("#id_new_password2", "adas-own-passphrase")
    judge.click("button.primary")
    judge.wait_for_url(f"{base}/c/docs/judge/")
    judge.click("text=Start judging")
    judge.wait_for_selector("#judge[data-item]")
    for key in "120":
        item = judge.locator("#judge").get_attribute("data-item")
        judge.keyboard.press(key)
        judge.wait_for_function(
            "token => document.querySelector('#judge') && "
            "document.querySelector('#judge').dataset.item !== token",
            arg=item,
        )
    # The next document shows at once; the verdicts are sent behind it, in order.
    judge.wait_for_function("() => document.body.dataset.unsaved === '0'")
    assert Judgment.objects.filter(assessor__name="ada").count() == 3

    # Within a few polls, without a reload, the organiser sees them.
    page.wait_for_function(
        "expected => document.querySelector('#live .ow-totals .stat strong')"
        ".textContent.replace(/\\s/g, '') === expected",
        arg=f"3/{assigned}",
        timeout=20_000,
    )
    assert page.evaluate("window.__still_this_page") is True
    ada_row = page.locator("#live table").first.locator("tbody tr", has_text="ada")
    assert "3/" in ada_row.inner_text()
    assert page.locator("#live svg polyline").count() == 1  # one line: ada's
