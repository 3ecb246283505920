"""The progress numbers on a hand-made case, the CSV (and its spreadsheet safety), and the plot."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from assess import dashboard as dash
from assess.assignments import assign, end_assignment
from assess.judging import next_item, submit
from assess.models import Assignment, AssignmentItem, QueueItem
from assess.plots import judgments_over_time
from campaigns.judgments import Timing
from campaigns.models import Judgment, Topic
from tests.factories import small_campaign


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Accounts are made for every test; the production hasher's cost is not what is tested here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.get_fixed_timezone(0))


def _judge(item: AssignmentItem, label: int, seconds: float | None, minutes_ago: float):
    judgment, _ = submit(
        item=item,
        label=label,
        rubric_version=item.assignment.campaign.current_rubric(),
        submission_id=uuid.uuid4(),
        expected_version=0,
        timing=Timing(active_seconds=seconds),
    )
    when = NOW - timedelta(minutes=minutes_ago)
    Judgment.objects.filter(pk=judgment.pk).update(first_judged_at=when, judged_at=when)


class TestPureParts:
    def test_median_ignores_unknown_times(self):
        assert dash.median([]) is None
        assert dash.median([None, None]) is None
        assert dash.median([3.0, None, 1.0, 2.0]) == 2.0
        assert dash.median([1, 2, 3, 4]) == 2.5

    def test_the_finish_is_the_remaining_work_at_the_last_hours_pace(self):
        assert dash.estimate_finish(10, 5, now=NOW) == NOW + timedelta(hours=2)
        assert dash.estimate_finish(3, 4, now=NOW) == NOW + timedelta(minutes=45)
        assert dash.estimate_finish(10, 0, now=NOW) is None  # no pace: unknown, not "never"
        assert dash.estimate_finish(0, 7, now=NOW) is None  # nothing left

    def test_cumulative_series_counts_per_hour_up_to_now(self):
        events = [
            ("alice", NOW - timedelta(minutes=150)),
            ("alice", NOW - timedelta(minutes=90)),
            ("bob", NOW - timedelta(minutes=10)),
        ]
        series, bucket = dash.cumulative_series(events, now=NOW)
        assert bucket == "hour"
        assert [count for _, count in series["alice"]] == [0, 1, 2, 2]
        assert [count for _, count in series["bob"]] == [0, 0, 0, 1]
        assert series["alice"][-1][0] == NOW
        _, bucket = dash.cumulative_series([("a", NOW - timedelta(days=5))], now=NOW)
        assert bucket == "day"

    def test_text_cells_that_would_run_as_formulas_are_neutralised(self):
        assert dash.safe_cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
        assert [dash.safe_cell(v) for v in ["+1", "-1", "@SUM(A1)", "\tx", "301"]] == [
            "'+1",
            "'-1",
            "'@SUM(A1)",
            "'\tx",
            "301",
        ]
        assert dash.safe_cell(-3) == -3
        assert dash.safe_cell(2.5) == 2.5
        assert dash.safe_cell(None) == ""


@pytest.fixture
def case(campaign, assessor_a, assessor_b):
    """Alice judges both topics (6 documents each), Bob doubles half of each for agreement."""
    pool = small_campaign(campaign, docs=6)
    topics = list(campaign.topics.all())
    primary, overlap = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=topics,
        overlap=0.5,
        partner=assessor_b,
        seed=2,
    )
    t301 = campaign.topics.get(topic_id="301")
    alice_items = list(primary.items.filter(topic=t301).order_by("position")[:4])
    for item, label, seconds, ago in zip(
        alice_items, [0, 1, 2, 2], [10.0, 20.0, 30.0, 40.0], [10, 20, 120, 180], strict=True
    ):
        _judge(item, label, seconds, ago)
    bob_item = overlap.items.filter(topic=t301).order_by("position").first()
    _judge(bob_item, 1, 5.0, 5)
    return {"pool": pool, "primary": primary, "overlap": overlap}


@pytest.mark.django_db
class TestDashboard:
    def test_per_topic_numbers(self, campaign, case):
        board = dash.campaign_dashboard(campaign, now=NOW)
        t301, t302 = board.topics
        assert (t301.key, t301.judged, t301.assigned) == ("301", 5, 9)  # 6 primary + 3 overlap
        assert t301.labels == {0: 1, 1: 2, 2: 2}
        assert t301.median_seconds == 20.0  # of 5, 10, 20, 30, 40
        assert t301.last_hour == 3
        assert t301.eta == NOW + timedelta(hours=4 / 3)  # 4 left at 3 an hour
        assert (t302.judged, t302.assigned, t302.median_seconds, t302.eta) == (0, 9, None, None)
        assert t302.labels == {}
        assert t302.counts == [0, 0, 0]

    def test_per_assessor_numbers(self, campaign, case):
        board = dash.campaign_dashboard(campaign, now=NOW)
        alice, bob = board.assessors
        assert (alice.key, alice.judged, alice.assigned) == ("alice", 4, 12)
        assert alice.labels == {0: 1, 1: 1, 2: 2}
        assert alice.median_seconds == 25.0
        assert alice.last_hour == 2
        assert alice.eta == NOW + timedelta(hours=4)
        assert (bob.key, bob.judged, bob.assigned, bob.last_hour) == ("bob", 1, 6, 1)
        assert bob.median_seconds == 5.0
        assert bob.eta == NOW + timedelta(hours=5)

    def test_campaign_totals_and_label_columns(self, campaign, case):
        board = dash.campaign_dashboard(campaign, now=NOW)
        total = board.total
        assert (total.judged, total.assigned, total.remaining, total.last_hour) == (5, 18, 13, 3)
        assert total.median_seconds == 20.0
        assert total.eta == NOW + timedelta(hours=13 / 3)
        assert board.labels == [
            (0, "Not relevant"),
            (1, "Partially relevant"),
            (2, "Highly relevant"),
        ]
        assert total.counts == [1, 2, 2]
        assert board.open_work

    def test_nothing_judged_in_the_last_hour_means_no_estimate(self, campaign, case):
        later = NOW + timedelta(hours=2)
        board = dash.campaign_dashboard(campaign, now=later)
        assert board.total.last_hour == 0
        assert board.total.eta is None

    def test_ended_work_no_longer_counts_but_its_judgments_do(self, campaign, case):
        end_assignment(assignment=case["overlap"])
        board = dash.campaign_dashboard(campaign, now=NOW)
        bob = next(row for row in board.assessors if row.key == "bob")
        assert (bob.judged, bob.assigned) == (1, 1)
        assert board.total.assigned == 13

    def test_a_shared_queue_counts_its_copies_and_has_no_personal_finish(
        self, campaign, case, assessor_a
    ):
        topic = Topic.objects.create(campaign=campaign, topic_id="303", position=3)
        pool = case["pool"]
        # A queue on a topic of its own: 2 documents, plus 1 overlap copy (replica).
        pool.topics.add(topic)
        for order, doc in enumerate(["d01", "d02"]):
            QueueItem.objects.create(pool=pool, topic=topic, doc_id=doc, order=order)
        QueueItem.objects.create(pool=pool, topic=topic, doc_id="d01", order=0, replica=1)
        queue = Assignment.objects.create(
            campaign=campaign, pool=pool, assessor=case["primary"].assessor, mode="queue", seed=1
        )
        queue.topics.add(topic)
        _judge(next_item(queue), 2, 8.0, 1)
        board = dash.campaign_dashboard(campaign, now=NOW)
        row = next(r for r in board.topics if r.key == "303")
        assert (row.judged, row.assigned) == (1, 3)
        alice = next(r for r in board.assessors if r.key == "alice")
        assert alice.shares_queue
        assert alice.eta is None
        assert board.total.assigned == 18 + 3


@pytest.mark.django_db
class TestCsv:
    def test_the_csv_has_the_tables_rows_and_is_an_attachment(
        self, client, organiser, campaign, case
    ):
        client.force_login(organiser)
        response = client.get(reverse("assess:progress", args=[campaign.slug]), {"format": "csv"})
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        disposition = response["Content-Disposition"]
        assert disposition.startswith('attachment; filename="robust04-progress-')
        assert disposition.endswith('.csv"')
        rows = list(csv.reader(io.StringIO(response.content.decode())))
        header = rows[0]
        assert header[:7] == [
            "section",
            "id",
            "title",
            "judged",
            "assigned",
            "remaining",
            "percent_judged",
        ]
        assert header[7:10] == [
            "label 0 Not relevant",
            "label 1 Partially relevant",
            "label 2 Highly relevant",
        ]
        assert header[10:] == [
            "median_active_seconds",
            "judged_last_hour",
            "estimated_finish",
            "skipped_not_judged",
        ]
        sections = [row[0] for row in rows[1:]]
        assert sections == ["topic", "topic", "assessor", "assessor", "total"]
        alice = rows[3]
        assert alice[1] == "alice"
        assert alice[3:6] == ["4", "12", "8"]
        assert alice[7:10] == ["1", "1", "2"]
        assert alice[10] == "25.0"

    def test_hostile_topic_ids_and_titles_cannot_run_in_a_spreadsheet(self, campaign, case):
        Topic.objects.filter(topic_id="301").update(
            topic_id="=cmd|'/C calc'!A0", title="@SUM(1+1)*cmd|' /C calc'!A0"
        )
        Topic.objects.filter(topic_id="302").update(topic_id="-2+3", title='+HYPERLINK("x")')
        text = dash.dashboard_csv(dash.campaign_dashboard(campaign, now=NOW))
        rows = list(csv.reader(io.StringIO(text)))
        cells = [cell for row in rows for cell in row]
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)
        assert rows[1][1] == "'=cmd|'/C calc'!A0"
        assert rows[1][2].startswith("'@SUM")
        assert rows[2][1] == "'-2+3"
        assert rows[2][2] == '\'+HYPERLINK("x")'


class TestPlot:
    def test_no_judgments_no_plot(self):
        assert judgments_over_time({}, bucket="hour") is None

    def test_one_line_per_assessor_with_escaped_names(self):
        series, bucket = dash.cumulative_series(
            [("<b>eve</b>", NOW - timedelta(minutes=30)), ("zed", NOW - timedelta(minutes=5))],
            now=NOW,
        )
        svg = str(judgments_over_time(series, bucket=bucket))
        assert svg.count("<polyline") == 2
        assert "<b>" not in svg
        assert "&lt;b&gt;eve&lt;/b&gt;" in svg
        assert 'role="img"' in svg
        assert "<desc" in svg
        assert "style=" not in svg
