"""The demo, end to end in real Chromium: ``manage.py demo`` builds the campaign, both assessors log
in with the logins it printed and judge the same documents of the overlap topic with the rubric's
keys, and the organiser reads their agreement and downloads the export bundle.

The demo's pool is built by a job, and so is the bundle: where a broker is configured (CI) both
run in the worker process, and the test waits for the bundle in the page, as an organiser would.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from assess.models import Assignment, AssignmentItem
from campaigns.models import Assessor, Campaign, Judgment
from pooling.models import PoolEntry

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

SLUG = "pydocs"
TOPIC = "013"  # ada's overlap copy, grace's primary topic
JUDGED_BY_ADA = 10
JOB_TIMEOUT = 120_000  # ms: the export job waits for a free worker, then builds


DISAGREEMENTS = 2  # of ada's ten, grace grades this many differently


def ada_label(doc_id: str) -> int:
    """A label that varies over the documents (all four keys get pressed)."""
    return int(doc_id.lstrip("d")) % 4


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def demo(live_server, http_settings, tmp_path) -> dict[str, str]:
    """The demo campaign, built by the command in the test database; its logins by username, as
    the command printed them and kept them in the data directory."""
    http_settings.DATA_DIR = tmp_path
    out = StringIO()
    call_command("demo", url=f"{live_server.url}/", stdout=out)
    logins = json.loads((tmp_path / "local-accounts.json").read_text())
    assert set(logins) == {"organiser", "ada", "grace"}
    for name, password in logins.items():
        assert re.search(rf"^\s*{name}\s+{re.escape(password)}\s", out.getvalue(), re.M)
    return logins


@pytest.fixture
def log_in(live_server, browser, demo):
    """A browser of its own for ``username``, logged in through the login form."""
    contexts = []

    def make(username: str):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", demo[username])
        page.click("button.primary")
        page.wait_for_url(f"{live_server.url}/")
        assert username in page.locator("header").inner_text()
        return page

    yield make
    for context in contexts:
        context.close()


def _label_keys(page) -> dict[int, str]:
    """Label value -> its key, as the label bar shows them."""
    buttons = page.locator("#judge .label-button")
    return {
        int(buttons.nth(i).get_attribute("value")): buttons.nth(i).get_attribute("data-key")
        for i in range(buttons.count())
    }


def _judge_shown_document(page, label_for) -> tuple[str, str, int]:
    """Read the document on screen, press the key of its label, wait for the next document.
    Returns (topic id, doc id, label)."""
    judge = page.locator("#judge")
    item = judge.get_attribute("data-item")
    topic = judge.locator(".topic-card .eyebrow").first.text_content().split()[-1]
    doc_id = judge.locator(".doc-id").text_content().split()[-1]
    keys = _label_keys(page)
    label = label_for(doc_id)
    page.keyboard.press(keys[label])
    page.wait_for_function(
        "token => { const judge = document.querySelector('#judge');"
        " return !judge || judge.dataset.item !== token; }",
        arg=item,
    )
    return topic, doc_id, label


def all_saved(page) -> None:
    """Wait until every verdict the page has sent is answered."""
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")


def _ints(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text.replace(",", ""))]


def test_the_demo_judged_by_two_assessors_agreement_and_export(live_server, log_in):
    base = live_server.url
    campaign = Campaign.objects.get(slug=SLUG)
    rubric_keys = {label.value: label.key for label in campaign.current_rubric().labels.all()}

    # Ada opens her overlap copy (topic 013, grace's topic) and judges ten documents by key ...
    ada = log_in("ada")
    ada.goto(f"{base}/c/{SLUG}/judge/")
    # The card is named by its topic: an assessor is never told it doubles someone's work.
    overlap = ada.locator(
        "section.assignment", has=ada.get_by_role("heading", name=f"Topic {TOPIC}", exact=True)
    )
    assert TOPIC in overlap.locator("tbody").inner_text()
    assert "overlap" not in ada.locator("main").inner_text().lower()
    overlap.get_by_role("link", name="Start judging").click()
    ada.wait_for_selector("#judge[data-item]")
    assert _label_keys(ada) == rubric_keys
    ada_judged: dict[str, int] = {}
    for _ in range(JUDGED_BY_ADA):
        topic, doc_id, label = _judge_shown_document(ada, ada_label)
        assert topic == TOPIC
        ada_judged[doc_id] = label
    assert len(ada_judged) == JUDGED_BY_ADA
    # The test's own queries wait until the page has no verdict in flight: on SQLite the live
    # server shares the test's in-memory database, and a read beside its write fails with
    # "database table is locked" (a flake seen once in a full run).
    all_saved(ada)
    # ... and, keyboard only, on to the end of the topic: the whole topic judged, then done.
    share_of_ada = AssignmentItem.objects.filter(
        assignment__assessor__name="ada", assignment__mode=Assignment.Mode.OVERLAP
    ).count()
    while len(ada_judged) < share_of_ada:
        topic, doc_id, label = _judge_shown_document(ada, ada_label)
        assert topic == TOPIC
        assert doc_id not in ada_judged, "a judged document was served again"
        ada_judged[doc_id] = label
    ada.wait_for_selector("#judge.done-panel")
    all_saved(ada)
    pooled = PoolEntry.objects.filter(topic__campaign=campaign, topic__topic_id=TOPIC).count()
    assert len(ada_judged) == share_of_ada == pooled

    # Grace reaches topic 013 in her primary work (after 011 and 012: she opens its first
    # document directly) and judges on, in her own order, until she has seen ada's ten.
    grace = log_in("grace")
    primary = Assignment.objects.get(assessor__name="grace", mode=Assignment.Mode.PRIMARY)
    share = AssignmentItem.objects.filter(assignment=primary, topic__topic_id=TOPIC)
    first = share.order_by("position").first()
    grace.goto(f"{base}{reverse('assess:judge', args=[SLUG, primary.token, first.token])}")
    grace.wait_for_selector("#judge[data-item]")
    grace_judged: dict[str, int] = {}
    disagreed: set[str] = set()

    def grace_label(doc_id: str) -> int:
        label = ada_label(doc_id)
        if doc_id in ada_judged and len(disagreed) < DISAGREEMENTS:
            disagreed.add(doc_id)
            return (label + 1) % 4
        return label

    share_count = share.count()
    while not set(ada_judged) <= set(grace_judged):
        assert len(grace_judged) < share_count, "grace's share of the topic ran out"
        topic, doc_id, label = _judge_shown_document(grace, grace_label)
        assert topic == TOPIC
        grace_judged[doc_id] = label
    # The next document shows at once; the verdicts are sent behind it, in order.
    all_saved(grace)

    # What the keys recorded: one judgment per document shown, with the label pressed.
    for name, judged in (("ada", ada_judged), ("grace", grace_judged)):
        recorded = dict(Judgment.objects.filter(assessor__name=name).values_list("doc_id", "label"))
        assert recorded == judged
        assert set(
            Judgment.objects.filter(assessor__name=name).values_list("topic__topic_id", flat=True)
        ) == {TOPIC}
    common = sorted(ada_judged)
    same = sum(ada_judged[doc] == grace_judged[doc] for doc in common)
    assert same == len(common) - DISAGREEMENTS

    # The organiser's agreement page: the pair ada & grace over the ten documents both judged.
    organiser = log_in("organiser")
    organiser.goto(f"{base}/c/{SLUG}/reports/agreement/")
    row = organiser.locator(".report-table tbody tr", has_text="ada & grace")
    assert row.count() == 1
    cells = row.locator("td")
    assert _ints(cells.nth(0).inner_text())[0] == len(common) >= JUDGED_BY_ADA
    assert cells.nth(1).inner_text().strip() == f"{same / len(common):.3f}"
    cell = organiser.locator(".kappa-matrix a[title^='ada and grace']")
    assert f"over {len(common)} pairs" in cell.get_attribute("title")

    # The export page builds the bundle (a job) and lists it; the organiser downloads the zip.
    organiser.goto(f"{base}/c/{SLUG}/export/")
    organiser.click("#build button.primary")
    download_link = organiser.locator("#exports a.button.primary[download]").first
    download_link.wait_for(timeout=JOB_TIMEOUT)
    with organiser.expect_download() as info:
        download_link.click()
    download = info.value
    assert download.suggested_filename.endswith(".zip")
    with zipfile.ZipFile(download.path()) as bundle:
        names = bundle.namelist()
        root = names[0].split("/")[0]
        qrels_text = bundle.read(f"{root}/qrels.txt").decode()
        sidecar_text = bundle.read(f"{root}/judgments.tsv").decode()

    # qrels.txt: every judged pair once; grace is topic 013's primary assessor, so the default
    # policy ("primary") gives her label where both judged.
    qrels = {}
    for line in qrels_text.splitlines():
        topic, zero, doc_id, label = line.split()
        assert (topic, zero) == (TOPIC, "0")
        qrels[doc_id] = int(label)
    assert qrels == grace_judged
    assert set(ada_judged) <= set(qrels)

    # judgments.tsv: one row per judgment, both assessors by their pseudonyms.
    pseudonyms = dict(Assessor.objects.filter(campaign=campaign).values_list("pseudonym", "name"))
    rows = list(csv.DictReader(io.StringIO(sidecar_text), delimiter="\t", quoting=csv.QUOTE_NONE))
    by_assessor: dict[str, dict[str, int]] = {}
    for row in rows:
        assert row["topic"] == TOPIC
        by_assessor.setdefault(pseudonyms[row["assessor"]], {})[row["docid"]] = int(row["label"])
    assert by_assessor == {"ada": ada_judged, "grace": grace_judged}
    assert len(rows) == len(ada_judged) + len(grace_judged)
