"""``build_pool`` and ``pool_stats`` on the command line: every strategy, the sizes they print,
bad input refused with a message and nothing recorded, and JSON that parses."""

from __future__ import annotations

import json
import random
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from campaigns.models import Job, Topic
from pooling import strategies
from pooling.models import Pool, Run, RunTopic

# The jobs are sent when create_pool's transaction commits, and --wait polls until they end.
pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ("301", "302", "303")
TAGS = ("bm25", "dense", "qlm")


@pytest.fixture
def lists(campaign) -> dict[str, dict[str, list[str]]]:
    """tag -> topic -> 50 documents out of 120; stored as the importer stores runs."""
    rng = random.Random(3)
    for position, topic_id in enumerate(TOPICS):
        Topic.objects.create(campaign=campaign, topic_id=topic_id, position=position)
    lists = {}
    for tag in TAGS:
        by_topic = {t: rng.sample([f"{t}-{i:03d}" for i in range(120)], 50) for t in TOPICS}
        run = Run.objects.create(campaign=campaign, tag=tag, line_count=150, topic_count=3)
        for topic_id, docs in by_topic.items():
            RunTopic.objects.create(
                run=run,
                topic=Topic.objects.get(campaign=campaign, topic_id=topic_id),
                docids="\n".join(docs),
                scores=RunTopic.pack_scores([50.0 - i for i in range(50)]),
                ranks=RunTopic.pack_ranks(list(range(1, 51))),
                length=50,
            )
        lists[tag] = by_topic
    return lists


def keyed(lists) -> dict:
    tags = dict(Run.objects.values_list("tag", "pk"))
    return {str(tags[tag]): by_topic for tag, by_topic in lists.items()}


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def size(built: strategies.Pool) -> int:
    return sum(map(len, built.values()))


class TestBuildPool:
    def test_a_depth_pool_waits_and_prints_its_size(self, campaign, lists):
        out = run("build_pool", campaign.slug, "--strategy", "depth", "--depth", "5", "--wait")
        pool = Pool.objects.get()
        expected = size(strategies.depth_pool(keyed(lists), depth=5))
        assert pool.status == Pool.Status.BUILT
        assert pool.size == expected
        assert f"Pool v1 (id {pool.pk}): job {pool.job_id} queued." in out
        assert f"Pool v1 built: {expected:,} documents over 3 topics" in out
        share = expected / (3 * 3 * 5)
        assert f"({share:.0%} of runs x k distinct)" in out

    def test_per_run_depths_chosen_runs_and_topics(self, campaign, lists):
        run(
            "build_pool",
            campaign.slug,
            "--depth",
            "5",
            "--depth-per-run",
            "bm25=12,dense=0",
            "--runs",
            "bm25",
            "dense",
            "--topics",
            "301,303",
            "--note",
            "subset",
            "--wait",
        )
        pool = Pool.objects.get()
        assert sorted(pool.runs.values_list("tag", flat=True)) == ["bm25", "dense"]
        assert sorted(pool.topics.values_list("topic_id", flat=True)) == ["301", "303"]
        assert pool.note == "subset"
        depths = pool.params["depth_per_run"]
        subset = {key: docs for key, docs in keyed(lists).items() if key in depths}
        expected = strategies.depth_pool(subset, depth=depths, topics=["301", "303"])
        # bm25's top 12 of two topics; dense contributes nothing at depth 0.
        assert pool.size == size(expected) == 2 * 12

    def test_a_stratified_sample(self, campaign, lists):
        out = run(
            "build_pool",
            campaign.slug,
            "--strategy",
            "sample",
            "--strata",
            "1-5:1,6-30:0.2",
            "--seed",
            "11",
            "--wait",
        )
        pool = Pool.objects.get()
        assert pool.seed == 11
        expected = strategies.sample_pool(
            keyed(lists),
            strata=[strategies.Stratum(1, 5, 1.0), strategies.Stratum(6, 30, 0.2)],
            seed=11,
        )
        assert pool.size == size(expected)
        assert pool.entries.filter(sampled=True).count() == sum(
            e.sampled for entries in expected.values() for e in entries
        )
        assert "built:" in out

    @pytest.mark.parametrize(
        ("args", "expected"),
        [
            (
                ["--strategy", "rrf", "--budget", "8", "--k", "10"],
                lambda runs: strategies.rrf_pool(runs, budget=8, k=10),
            ),
            (
                ["--strategy", "rbp", "--budget", "8", "--p", "0.6", "--aggregate", "max"],
                lambda runs: strategies.rbp_pool(runs, budget=8, p=0.6, aggregate="max"),
            ),
            (
                ["--strategy", "rbp", "--budget", "8", "--depth", "20"],
                lambda runs: strategies.rbp_pool(runs, budget=8, depth=20),
            ),
        ],
    )
    def test_the_fusion_pools(self, campaign, lists, args, expected):
        run("build_pool", campaign.slug, *args, "--wait")
        pool = Pool.objects.get()
        built = expected(keyed(lists))
        assert pool.size == 3 * 8
        assert sorted(pool.entries.values_list("topic__topic_id", "doc_id")) == sorted(
            (t, e.doc_id) for t, entries in built.items() for e in entries
        )

    def test_an_rrf_constant_of_zero_is_kept(self, campaign, lists):
        run("build_pool", campaign.slug, "--strategy", "rrf", "--budget", "5", "--k", "0", "--wait")
        assert Pool.objects.get().params["k"] == 0

    def test_residual_and_file_rank_order_are_recorded(self, campaign, lists):
        run(
            "build_pool",
            campaign.slug,
            "--depth",
            "3",
            "--residual",
            "--order",
            "file_rank",
            "--wait",
        )
        pool = Pool.objects.get()
        assert pool.params["residual"] is True
        assert pool.params["order"] == "file_rank"
        assert pool.describe() == "depth 3, file rank order, residual"

    def test_without_wait_it_only_queues(self, campaign, lists):
        out = run("build_pool", campaign.slug, "--depth", "2")
        assert "queued" in out
        assert "built:" not in out

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--runs", "bm25", "nosuch"], "No run tagged nosuch in robust04"),
            (["--topics", "301,999"], "No topic 999 in robust04"),
            (["--strategy", "sample", "--strata", "1-10"], "is not FIRST-LAST:RATE"),
            (["--strategy", "sample", "--strata", "one-ten:1"], "is not FIRST-LAST:RATE"),
            (["--strategy", "sample", "--strata", "1-10:1,5-20:0.5"], "must not overlap"),
            (["--strategy", "sample", "--strata", "1-10:0"], "above 0"),
            (["--strategy", "sample"], "at least one stratum"),
            (["--strategy", "rrf"], "The budget is required"),
            (["--strategy", "rbp", "--budget", "5", "--p", "1.5"], "between 0 and 1"),
            (["--strategy", "rbp", "--budget", "5", "--p", "0"], "between 0 and 1"),
            (["--strategy", "rrf", "--budget", "5", "--k", "-1"], "0 or more"),
            (["--strategy", "depth"], "The depth is required"),
            (["--depth", "-4"], "at least 1"),
            (["--depth", "5", "--depth-per-run", "bm25"], "is not TAG=K"),
            (["--depth", "5", "--depth-per-run", "ghost=3"], "No contributing run 'ghost'"),
        ],
    )
    def test_bad_input_is_refused_with_a_message_and_records_nothing(
        self, campaign, lists, args, message
    ):
        with pytest.raises(CommandError, match=message):
            run("build_pool", campaign.slug, *args, "--wait")
        assert not Pool.objects.exists()
        assert not Job.objects.exists()

    def test_an_unknown_campaign(self, db):
        with pytest.raises(CommandError, match="No campaign with slug 'nope'"):
            run("build_pool", "nope", "--depth", "5")

    def test_a_campaign_without_runs(self, campaign):
        with pytest.raises(CommandError, match="no runs to pool"):
            run("build_pool", campaign.slug, "--depth", "5")
        assert not Pool.objects.exists()


class TestPoolStats:
    def test_json_parses_and_describes_the_latest_built_pool(self, campaign, lists):
        run("build_pool", campaign.slug, "--depth", "5", "--wait")
        run("build_pool", campaign.slug, "--strategy", "rrf", "--budget", "4", "--wait")
        data = json.loads(run("pool_stats", campaign.slug, "--json"))
        assert data["pool"]["version"] == 2
        assert data["pool"]["strategy"] == "rrf"
        assert data["pool"]["size"] == 12
        assert data["pool"]["stats"]["totals"]["topics"] == 3
        planner = data["planner"]
        assert [row["depth"] for row in planner["rows"]] == [1, 5, 10, 20, 50, 100]
        assert (planner["runs"], planner["topics"]) == (3, 3)
        expected = strategies.plan_depths(keyed(lists), [1, 5, 10, 20, 50, 100])
        assert [row["total_docs"] for row in planner["rows"]] == [r.total_docs for r in expected]
        assert planner["seconds_per_judgment"] == 30.0
        assert planner["seconds_measured"] is False

    def test_json_names_runs_by_tag_with_their_database_id_beside(self, campaign, lists):
        ids = dict(Run.objects.values_list("tag", "pk"))
        bm25 = ids["bm25"]
        run("build_pool", campaign.slug, "--depth", "5", "--depth-per-run", "bm25=7", "--wait")
        data = json.loads(run("pool_stats", campaign.slug, "--json"))
        per_run = data["pool"]["stats"]["per_run"]
        assert set(per_run) == set(TAGS)
        assert (per_run["bm25"]["run"], per_run["bm25"]["run_id"]) == ("bm25", bm25)
        assert (per_run["bm25"]["depth"], per_run["bm25"]["proposals"]) == (7, 21)
        assert data["pool"]["params"]["depth_per_run"] == {"bm25": 7}
        assert data["pool"]["runs"] == list(TAGS)

    def test_a_chosen_version_depths_and_seconds(self, campaign, lists):
        run("build_pool", campaign.slug, "--depth", "5", "--wait")
        run("build_pool", campaign.slug, "--depth", "9", "--wait")
        data = json.loads(
            run(
                "pool_stats",
                campaign.slug,
                "--pool",
                "1",
                "--depths",
                "3,7",
                "--seconds",
                "12",
                "--json",
            )
        )
        assert data["pool"]["params"]["depth"] == 5
        assert [row["depth"] for row in data["planner"]["rows"]] == [3, 7]
        row = data["planner"]["rows"][1]
        assert row["assessor_hours"] == pytest.approx(row["new_docs"] * 12 / 3600)

    def test_the_text_report(self, campaign, lists):
        run("build_pool", campaign.slug, "--depth", "5", "--wait")
        out = run("pool_stats", campaign.slug)
        assert "Pool v1: depth 5" in out
        for tag in TAGS:
            assert tag in out
        assert "Planner (3 runs, 3 topics, 30 s per judgment assumed)" in out

    def test_without_a_pool_it_still_plans(self, campaign, lists):
        data = json.loads(run("pool_stats", campaign.slug, "--json"))
        assert data["pool"] is None
        assert len(data["planner"]["rows"]) == 6

    @pytest.mark.parametrize(
        ("args", "message"),
        [(["--pool", "4"], "No built pool v4"), (["--depths", "5,x"], "comma-separated")],
    )
    def test_bad_input(self, campaign, lists, args, message):
        with pytest.raises(CommandError, match=message):
            run("pool_stats", campaign.slug, *args)
