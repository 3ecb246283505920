"""`manage.py demo` builds the demo campaign through the real import, pool and assignment paths,
and a second run changes nothing."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from assess.models import Assignment, AssignmentItem
from campaigns.models import Campaign, Document, Membership, Topic
from pooling.models import Pool, PoolEntry, Run

pytestmark = pytest.mark.django_db(transaction=True)


def _snapshot() -> dict:
    return {
        "campaigns": Campaign.objects.count(),
        "topics": Topic.objects.count(),
        "documents": Document.objects.count(),
        "runs": Run.objects.count(),
        "pools": Pool.objects.count(),
        "entries": PoolEntry.objects.count(),
        "assignments": Assignment.objects.count(),
        "items": AssignmentItem.objects.count(),
        "members": Membership.objects.count(),
    }


def test_the_demo_is_a_real_campaign_and_a_second_run_changes_nothing(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    out = StringIO()
    call_command("demo", stdout=out)
    campaign = Campaign.objects.get(slug="pydocs")
    assert campaign.relevance_threshold == 2
    labels = list(campaign.current_rubric().labels.all())
    assert [label.value for label in labels] == [0, 1, 2, 3]
    assert all(label.example for label in labels)
    assert campaign.documents.count() >= 1000
    assert campaign.topics.count() == 20
    assert campaign.runs.count() >= 8
    pool = campaign.pools.get()
    assert pool.status == Pool.Status.BUILT
    assert pool.job.status == "done"
    assert pool.size == PoolEntry.objects.count() > 0
    modes = sorted(Assignment.objects.values_list("assessor__name", "mode"))
    assert modes == [
        ("ada", "overlap"),
        ("ada", "primary"),
        ("grace", "overlap"),
        ("grace", "primary"),
    ]
    overlap_topics = set(
        Assignment.objects.filter(mode="overlap").values_list("topics__topic_id", flat=True)
    )
    assert overlap_topics == {"004", "013"}
    logins = json.loads((tmp_path / "local-accounts.json").read_text())
    assert set(logins) == {"organiser", "ada", "grace"}
    for name, password in logins.items():
        assert password in out.getvalue()
        assert name in out.getvalue()

    before = _snapshot()
    again = StringIO()
    call_command("demo", stdout=again)
    assert _snapshot() == before
    assert "nothing changed" in again.getvalue()
