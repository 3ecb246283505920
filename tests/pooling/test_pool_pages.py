"""The organiser's Runs & pools pages: who may see them, the build form for every strategy, the
errors it shows instead of building, the planner, and a pool's page as judging proceeds."""

from __future__ import annotations

import random
import re

import pytest
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaigns.models import Assessor, Job, Judgment, Topic
from pooling import strategies
from pooling.models import Pool, PoolEntry, Run, RunTopic
from pooling.pools import judging_progress

pytestmark = pytest.mark.django_db

TOPICS = ("401", "402", "403")
TAGS = ("bm25", "dense", "qlm", "splade")


def add_run(campaign, tag: str, ranked: dict[str, list[str]], **fields) -> Run:
    """A run stored as the importer stores it: one row per topic, best first (distinct, falling
    scores, so the given order is the trec_eval order)."""
    run = Run.objects.create(
        campaign=campaign,
        tag=tag,
        source_name=f"{tag}.run",
        line_count=sum(map(len, ranked.values())),
        topic_count=len(ranked),
        **fields,
    )
    for topic_id, docs in ranked.items():
        n = len(docs)
        RunTopic.objects.create(
            run=run,
            topic=Topic.objects.get(campaign=campaign, topic_id=topic_id),
            docids="\n".join(docs),
            scores=RunTopic.pack_scores([float(n - i) for i in range(n)]),
            ranks=RunTopic.pack_ranks(list(range(1, n + 1))),
            length=n,
        )
    return run


def synthetic_lists(seed: int = 7, length: int = 40) -> dict[str, dict[str, list[str]]]:
    """tag -> topic -> 40 documents drawn from 80 per topic, so runs overlap."""
    rng = random.Random(seed)
    return {
        tag: {t: rng.sample([f"d{t}-{i:03d}" for i in range(80)], length) for t in TOPICS}
        for tag in TAGS
    }


@pytest.fixture
def lists():
    return synthetic_lists()


@pytest.fixture
def runs(campaign, lists) -> dict[str, Run]:
    for position, topic_id in enumerate(TOPICS):
        Topic.objects.create(
            campaign=campaign, topic_id=topic_id, title=f"Topic {topic_id}", position=position
        )
    return {tag: add_run(campaign, tag, lists[tag]) for tag in TAGS}


def url(name: str, campaign, *args) -> str:
    return reverse(f"pooling:{name}", args=[campaign.slug, *args])


def form_data(runs: dict[str, Run], /, **overrides) -> dict:
    data = {
        "strategy": "depth",
        "depth": "10",
        "depth_per_run": "",
        "strata": "1-10 : 1\n11-30 : 0.5",
        "seed": "",
        "rrf_budget": "",
        "rrf_k": "60",
        "rrf_depth": "",
        "rbp_budget": "",
        "rbp_p": "0.8",
        "rbp_aggregate": "sum",
        "rbp_depth": "",
        "order": "trec_eval",
        "runs": [str(run.pk) for run in runs.values()],
        "topics": "",
        "note": "",
    }
    data.update(overrides)
    return data


def keyed(lists: dict, runs: dict[str, Run]) -> dict:
    """The lists keyed as pools.ranked_lists keys them: by the run's id as a string."""
    return {str(runs[tag].pk): by_topic for tag, by_topic in lists.items()}


def build_through_the_form(client, campaign, runs, django_capture_on_commit_callbacks, **fields):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("build", campaign), form_data(runs, **fields))
    return response


# --- Who may see what -----------------------------------------------------------------------------


@pytest.fixture
def built_pool(campaign, runs, organiser, django_capture_on_commit_callbacks):
    from pooling.pools import create_pool

    with django_capture_on_commit_callbacks(execute=True):
        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 5})
    pool.refresh_from_db()
    assert pool.status == Pool.Status.BUILT
    return pool


PAGES = [
    ("pools", ()),
    ("planner", ()),
    ("versions", ()),
    ("pool", (1,)),
    ("pool_status", (1,)),
]


class TestAccess:
    @pytest.mark.parametrize("who", ["other_organiser", "assessor_a", "outsider"])
    @pytest.mark.parametrize(("name", "args"), PAGES)
    def test_only_the_campaigns_organisers_see_its_pages(
        self, request, client, campaign, built_pool, who, name, args
    ):
        client.force_login(request.getfixturevalue(who))
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = client.get(url(name, campaign, *args), **headers)
            assert response.status_code == 404
            body = response.content.decode()
            assert "bm25" not in body
            assert "splade" not in body

    @pytest.mark.parametrize(("name", "args"), PAGES)
    def test_anonymous_visitors_are_sent_to_log_in(self, client, campaign, built_pool, name, args):
        response = client.get(url(name, campaign, *args))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))

    @pytest.mark.parametrize("who", ["other_organiser", "assessor_a", "outsider"])
    def test_nobody_else_can_build_a_pool(self, request, client, campaign, runs, who):
        client.force_login(request.getfixturevalue(who))
        response = client.post(url("build", campaign), form_data(runs))
        assert response.status_code == 404
        assert not Pool.objects.exists()

    def test_a_pool_of_another_campaign_is_not_found(
        self, client, other_campaign, other_organiser, built_pool
    ):
        client.force_login(other_organiser)
        assert client.get(url("pool", other_campaign, built_pool.version)).status_code == 404

    def test_the_build_post_needs_a_csrf_token(self, csrf_client, campaign, runs, organiser):
        csrf_client.force_login(organiser)
        page = csrf_client.get(url("pools", campaign))
        token = page.cookies["csrftoken"].value
        response = csrf_client.post(url("build", campaign), form_data(runs))
        assert response.status_code == 403
        assert not Pool.objects.exists()
        assert not Job.objects.exists()
        response = csrf_client.post(
            url("build", campaign), {**form_data(runs), "csrfmiddlewaretoken": token}
        )
        assert response.status_code == 302
        assert Pool.objects.count() == 1

    def test_the_build_url_refuses_get(self, client, campaign, runs, organiser):
        client.force_login(organiser)
        assert client.get(url("build", campaign)).status_code == 405


# --- The Runs & pools page ------------------------------------------------------------------------


class TestRunsAndPoolsPage:
    def test_it_lists_the_runs_the_form_and_the_planner(self, client, campaign, runs, organiser):
        client.force_login(organiser)
        response = client.get(url("pools", campaign))
        assert response.status_code == 200
        body = response.content.decode()
        for tag in TAGS:
            assert tag in body
        assert 'aria-current="page">Runs &amp; pools' in body
        assert 'action="/c/robust04/pools/build/"' in body
        # Every run is ticked by default.
        assert body.count('name="runs"') == len(TAGS)
        assert len(re.findall(r'<input type="checkbox" name="runs"[^>]* checked>', body)) == 4
        # The planner: the six standard depths and an accessible plot.
        table = body[body.index('class="table compact planner-table"') :]
        for depth in (1, 5, 10, 20, 50, 100):
            assert f'<td class="num"><strong>{depth}</strong></td>' in table
        assert 'role="img"' in body
        assert '<title id="depth-plot-title">' in body
        assert "No pool yet" in body

    def test_an_empty_campaign_says_what_to_do_next(self, client, campaign, organiser):
        client.force_login(organiser)
        body = client.get(url("pools", campaign)).content.decode()
        assert "No runs to pool yet" in body
        assert "The planner needs runs" in body
        assert reverse("campaigns:files", args=[campaign.slug]) in body

    def test_superseded_runs_are_kept_apart(self, client, campaign, runs, lists, organiser):
        from django.utils import timezone

        Run.objects.filter(pk=runs["qlm"].pk).update(superseded_at=timezone.now())
        add_run(campaign, "qlm", lists["qlm"])
        client.force_login(organiser)
        body = client.get(url("pools", campaign)).content.decode()
        assert "1 superseded run version" in body
        # The form offers the current run only.
        assert body.count('name="runs"') == len(TAGS)

    def test_the_versions_fragment_polls_while_a_pool_builds(
        self, client, campaign, runs, organiser
    ):
        from pooling.pools import create_pool

        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 3})
        client.force_login(organiser)
        htmx = {"HTTP_HX_REQUEST": "true"}
        response = client.get(url("versions", campaign), **htmx)
        assert response.status_code == 200
        assert 'hx-trigger="every 2s"' in response.content.decode()
        assert "Building" in response.content.decode()
        Pool.objects.filter(pk=pool.pk).update(built_at=timezone.now())  # the build finished
        response = client.get(url("versions", campaign), **htmx)
        assert response.status_code == 286  # stop polling


# --- Building from the form -----------------------------------------------------------------------


class TestBuildingFromTheForm:
    def test_a_depth_pool(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        response = build_through_the_form(
            client, campaign, runs, django_capture_on_commit_callbacks, depth="7", note="round 1"
        )
        pool = Pool.objects.get()
        assert response.status_code == 302
        assert response["Location"] == url("pool", campaign, pool.version)
        assert pool.status == Pool.Status.BUILT
        assert pool.params == {"order": "trec_eval", "residual": False, "depth": 7}
        assert pool.note == "round 1"
        assert pool.created_by == organiser
        expected = strategies.depth_pool(keyed(lists, runs), depth=7)
        assert pool.size == sum(map(len, expected.values()))
        stored = set(pool.entries.values_list("topic__topic_id", "doc_id"))
        assert stored == {(t, e.doc_id) for t, entries in expected.items() for e in entries}

    def test_a_depth_pool_with_per_run_depths_and_chosen_runs_and_topics(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        chosen = {tag: runs[tag] for tag in ("bm25", "dense", "qlm")}
        with django_capture_on_commit_callbacks(execute=True):
            client.post(
                url("build", campaign),
                form_data(chosen, depth="5", depth_per_run="bm25 = 20\nqlm=0", topics="402, 403"),
            )
        pool = Pool.objects.get()
        assert pool.status == Pool.Status.BUILT
        assert sorted(pool.runs.values_list("tag", flat=True)) == ["bm25", "dense", "qlm"]
        assert sorted(pool.topics.values_list("topic_id", flat=True)) == ["402", "403"]
        assert pool.params["depth_per_run"] == {str(runs["bm25"].pk): 20, str(runs["qlm"].pk): 0}
        depths = {str(runs["bm25"].pk): 20, str(runs["dense"].pk): 5, str(runs["qlm"].pk): 0}
        subset = {key: keyed(lists, runs)[key] for key in depths}
        expected = strategies.depth_pool(subset, depth=depths, topics=["402", "403"])
        assert pool.size == sum(map(len, expected.values()))

    def test_a_stratified_sample(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        build_through_the_form(
            client,
            campaign,
            runs,
            django_capture_on_commit_callbacks,
            strategy="sample",
            strata="1-5 : 100%, 6-30 : 0.25",
            seed="42",
        )
        pool = Pool.objects.get()
        assert pool.status == Pool.Status.BUILT
        assert pool.seed == 42
        assert pool.params["strata"] == [
            {"first_rank": 1, "last_rank": 5, "rate": 1.0},
            {"first_rank": 6, "last_rank": 30, "rate": 0.25},
        ]
        expected = strategies.sample_pool(
            keyed(lists, runs),
            strata=[strategies.Stratum(1, 5, 1.0), strategies.Stratum(6, 30, 0.25)],
            seed=42,
        )
        sampled = {(e.topic_id, e.doc_id) for es in expected.values() for e in es if e.sampled}
        stored = set(pool.entries.filter(sampled=True).values_list("topic__topic_id", "doc_id"))
        assert stored == sampled

    def test_a_sample_without_a_seed_records_the_one_it_drew(
        self, client, campaign, runs, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        build_through_the_form(
            client, campaign, runs, django_capture_on_commit_callbacks, strategy="sample"
        )
        assert Pool.objects.get().seed is not None

    def test_a_reciprocal_rank_fusion_pool(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        build_through_the_form(
            client,
            campaign,
            runs,
            django_capture_on_commit_callbacks,
            strategy="rrf",
            rrf_budget="12",
            rrf_k="20",
            rrf_depth="30",
        )
        pool = Pool.objects.get()
        assert pool.status == Pool.Status.BUILT
        assert pool.params["budget"] == 12
        assert pool.params["k"] == 20
        expected = strategies.rrf_pool(keyed(lists, runs), budget=12, k=20, depth=30)
        assert set(pool.entries.values_list("topic__topic_id", "doc_id")) == {
            (t, e.doc_id) for t, es in expected.items() for e in es
        }
        assert pool.size == 12 * len(TOPICS)

    def test_a_rank_biased_precision_pool(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        build_through_the_form(
            client,
            campaign,
            runs,
            django_capture_on_commit_callbacks,
            strategy="rbp",
            rbp_budget="9",
            rbp_p="0.5",
            rbp_aggregate="max",
        )
        pool = Pool.objects.get()
        assert pool.status == Pool.Status.BUILT
        assert (pool.params["p"], pool.params["aggregate"]) == (0.5, "max")
        expected = strategies.rbp_pool(keyed(lists, runs), budget=9, p=0.5, aggregate="max")
        assert set(pool.entries.values_list("topic__topic_id", "doc_id")) == {
            (t, e.doc_id) for t, es in expected.items() for e in es
        }

    def test_a_residual_pool_leaves_out_judged_pairs(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        assessor = Assessor.objects.create(campaign=campaign, name="earlier")
        first = lists["bm25"]["401"][0]
        Judgment.objects.create(
            campaign=campaign,
            topic=Topic.objects.get(campaign=campaign, topic_id="401"),
            doc_id=first,
            assessor=assessor,
            label=0,
        )
        client.force_login(organiser)
        build_through_the_form(
            client, campaign, runs, django_capture_on_commit_callbacks, depth="3", residual="on"
        )
        pool = Pool.objects.get()
        assert pool.is_residual
        assert not pool.entries.filter(doc_id=first).exists()
        full = strategies.depth_pool(keyed(lists, runs), depth=3)
        assert pool.size == sum(map(len, full.values())) - 1

    def test_a_models_labels_do_not_make_a_pair_judged(
        self, client, campaign, runs, lists, organiser, django_capture_on_commit_callbacks
    ):
        """Issue 20: people must still be sent the pairs only a model labelled."""
        model = Assessor.objects.create(campaign=campaign, name="umbrela", kind=Assessor.Kind.MODEL)
        first = lists["bm25"]["401"][0]
        Judgment.objects.create(
            campaign=campaign,
            topic=Topic.objects.get(campaign=campaign, topic_id="401"),
            doc_id=first,
            assessor=model,
            label=2,
        )
        client.force_login(organiser)
        build_through_the_form(
            client, campaign, runs, django_capture_on_commit_callbacks, depth="3", residual="on"
        )
        pool = Pool.objects.get()
        assert pool.entries.filter(doc_id=first).exists()
        full = strategies.depth_pool(keyed(lists, runs), depth=3)
        assert pool.size == sum(map(len, full.values()))
        progress = judging_progress(pool=pool)
        assert progress["per_topic"]["401"]["judged"] == 0

    def test_the_file_rank_order_is_recorded(
        self, client, campaign, runs, organiser, django_capture_on_commit_callbacks
    ):
        client.force_login(organiser)
        build_through_the_form(
            client, campaign, runs, django_capture_on_commit_callbacks, order="file_rank"
        )
        pool = Pool.objects.get()
        assert pool.params["order"] == "file_rank"
        assert "file rank order" in pool.describe()


# --- Refusing bad input ---------------------------------------------------------------------------

BAD_INPUT = [
    ({"depth": "-3"}, "depth", "greater than or equal to 1"),
    ({"depth": ""}, "depth", "Give the depth k"),
    ({"depth": "ten"}, "depth", "Enter a whole number"),
    ({"depth": "1e400"}, "depth", "Enter a whole number"),
    ({"depth": "99999999999999999999999"}, "depth", "less than or equal to"),
    ({"depth_per_run": "nosuchrun = 5"}, "depth_per_run", "No contributing run"),
    ({"depth_per_run": "bm25 = -1"}, "depth_per_run", "is not TAG = k"),
    ({"strategy": "sample", "strata": "1-10 : 0"}, "strata", "above 0"),
    ({"strategy": "sample", "strata": "1-10 : 1\n5-20 : 0.5"}, "strata", "must not overlap"),
    ({"strategy": "sample", "strata": "1-10 : 1\n12-20 : 0.5"}, "strata", "contiguous"),
    ({"strategy": "sample", "strata": "10-1 : 1"}, "strata", "ends before it starts"),
    ({"strategy": "sample", "strata": "1-10 : 2"}, "strata", "at most 1"),
    ({"strategy": "sample", "strata": "1-10 : nan"}, "strata", "not a number"),
    ({"strategy": "sample", "strata": "ranks one to ten"}, "strata", "is not first-last"),
    ({"strategy": "sample", "strata": ""}, "strata", "at least one stratum"),
    ({"strategy": "sample", "seed": "-1"}, "seed", "greater than or equal to 0"),
    ({"strategy": "rrf"}, "rrf_budget", "Give the number of documents"),
    ({"strategy": "rrf", "rrf_budget": "0"}, "rrf_budget", "greater than or equal to 1"),
    ({"strategy": "rrf", "rrf_budget": "5", "rrf_k": "-1"}, "rrf_k", "greater than"),
    ({"strategy": "rrf", "rrf_budget": "5", "rrf_k": "inf"}, "rrf_k", "Enter a number"),
    ({"strategy": "rbp", "rbp_budget": ""}, "rbp_budget", "Give the number of documents"),
    ({"strategy": "rbp", "rbp_budget": "5", "rbp_p": "1"}, "rbp_p", "above 0 and below 1"),
    ({"strategy": "rbp", "rbp_budget": "5", "rbp_aggregate": "mean"}, "rbp_aggregate", "valid"),
    ({"strategy": "nonsense"}, "strategy", "Select a valid choice"),
    ({"order": "alphabetical"}, "order", "Select a valid choice"),
    ({"runs": []}, "runs", "Choose at least one run"),
    ({"runs": ["999999"]}, "runs", "not one of this campaign"),
    ({"runs": ["abc"]}, "runs", "not one of this campaign"),
    ({"topics": "401 999"}, "topics", "Not a topic of this campaign: 999"),
    ({"note": "x" * 201}, "note", "at most 200 characters"),
]


class TestRefusals:
    @pytest.mark.parametrize(("fields", "field", "message"), BAD_INPUT)
    def test_bad_input_is_shown_next_to_its_field_and_builds_nothing(
        self, client, campaign, runs, organiser, fields, field, message
    ):
        client.force_login(organiser)
        response = client.post(url("build", campaign), form_data(runs, **fields))
        assert response.status_code == 400
        body = response.content.decode()
        block = re.search(
            rf'<div class="field has-error[^"]*">(?:(?!<div class="field).)*?id="id_{field}[_"]'
            r"(?:(?!<div class=\"field).)*",
            body,
            re.S,
        )
        assert block is not None, f"no error block for {field}"
        assert message in block.group(0).replace("&#x27;", "'")
        assert not Pool.objects.exists()
        assert not Job.objects.exists()

    def test_a_run_of_another_campaign_cannot_be_chosen(
        self, client, campaign, other_campaign, runs, organiser
    ):
        Topic.objects.create(campaign=other_campaign, topic_id="401")
        foreign = add_run(other_campaign, "theirs", {"401": ["x1", "x2"]})
        client.force_login(organiser)
        response = client.post(url("build", campaign), form_data(runs, runs=[str(foreign.pk)]))
        assert response.status_code == 400
        assert not Pool.objects.exists()

    def test_a_definition_the_domain_refuses_is_shown_above_the_form(
        self, client, campaign, organiser
    ):
        """Runs that rank no topic at all: create_pool's PoolDefinitionError."""
        empty = Run.objects.create(campaign=campaign, tag="empty")
        client.force_login(organiser)
        response = client.post(url("build", campaign), form_data({"empty": empty}))
        assert response.status_code == 400
        assert "rank no documents for any topic" in response.content.decode()
        assert not Pool.objects.exists()

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        values=st.fixed_dictionaries(
            {
                name: st.one_of(
                    st.text(max_size=12),
                    st.integers(-(10**30), 10**30).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(str),
                    st.sampled_from(["", "0", "1", "-1", "1-10:1", "sum", "sample", "rrf"]),
                )
                for name in (
                    "strategy",
                    "depth",
                    "depth_per_run",
                    "strata",
                    "seed",
                    "rrf_budget",
                    "rrf_k",
                    "rrf_depth",
                    "rbp_budget",
                    "rbp_p",
                    "rbp_aggregate",
                    "rbp_depth",
                    "order",
                    "topics",
                )
            }
        )
    )
    def test_no_input_gives_a_server_error(self, client, campaign, runs, organiser, values):
        client.force_login(organiser)
        # Text with NUL bytes is refused by the test client's encoder, not by the view.
        values = {k: v.replace("\x00", "") for k, v in values.items()}
        response = client.post(url("build", campaign), form_data(runs, **values))
        assert response.status_code in (302, 400)
        Pool.objects.all().delete()
        Job.objects.all().delete()


# --- The planner ----------------------------------------------------------------------------------


class TestPlanner:
    def test_it_adds_the_depths_the_organiser_types(self, client, campaign, runs, organiser):
        client.force_login(organiser)
        body = client.get(url("planner", campaign), {"depths": "7, 300"}).content.decode()
        for depth in (1, 5, 7, 10, 20, 50, 100, 300):
            assert f'<td class="num"><strong>{depth}</strong></td>' in body
        # Beyond 200 the depth axis turns logarithmic.
        assert "Pool depth k (log scale)" in body

    def test_its_numbers_are_the_strategies_plan(self, client, campaign, runs, lists, organiser):
        client.force_login(organiser)
        response = client.get(url("planner", campaign), {"seconds": "45"})
        rows = response.context["planner"]["rows"]
        expected = strategies.plan_depths(
            keyed(lists, runs), (1, 5, 10, 20, 50, 100), seconds_per_judgment=45
        )
        assert rows == expected
        assert "45 s" in response.content.decode()
        assert "as typed" in response.content.decode()

    def test_it_uses_the_stated_default_until_judgments_are_timed(
        self, client, campaign, runs, organiser
    ):
        client.force_login(organiser)
        response = client.get(url("planner", campaign))
        assert response.context["planner"]["seconds_per_judgment"] == 30.0
        assert "the stated default" in response.content.decode()

    def test_it_reports_relevant_documents_found_when_qrels_exist(
        self, client, campaign, runs, lists, organiser
    ):
        assessor = Assessor.objects.create(
            campaign=campaign, name="qrels", kind=Assessor.Kind.IMPORTED
        )
        topic = Topic.objects.get(campaign=campaign, topic_id="401")
        for doc in lists["bm25"]["401"][:4]:
            Judgment.objects.create(
                campaign=campaign,
                topic=topic,
                doc_id=doc,
                assessor=assessor,
                label=2,
                source=Judgment.Source.IMPORTED,
            )
        client.force_login(organiser)
        response = client.get(url("planner", campaign))
        assert "Relevant found" in response.content.decode()
        rows = response.context["planner"]["rows"]
        assert rows[-1].relevant_found == 1.0

    @pytest.mark.parametrize(
        ("query", "message"),
        [
            ({"depths": "0"}, "is not a depth"),
            ({"depths": "ten"}, "is not a depth"),
            ({"depths": "1000000"}, "is not a depth"),
            ({"depths": " ".join(str(d) for d in range(2, 40))}, "At most 12"),
            ({"seconds": "-4"}, "greater than or equal to 0"),
            ({"seconds": "nan"}, "Enter a number"),
        ],
    )
    def test_bad_settings_are_explained_and_the_standard_depths_still_shown(
        self, client, campaign, runs, organiser, query, message
    ):
        client.force_login(organiser)
        response = client.get(url("planner", campaign), query)
        assert response.status_code == 200
        body = response.content.decode()
        assert message in body
        assert [row.depth for row in response.context["planner"]["rows"]] == [1, 5, 10, 20, 50, 100]

    def test_htmx_gets_the_card_alone_with_the_heading_of_the_page_it_is_on(
        self, client, campaign, runs, organiser
    ):
        client.force_login(organiser)
        planner_url = url("planner", campaign)
        for current, heading in (
            (f"https://testserver{url('pools', campaign)}", "<h2>Depth planner</h2>"),
            (f"https://testserver{planner_url}?depths=9", "<h2>Documents and hours per depth</h2>"),
        ):
            response = client.get(
                planner_url, {"depths": "3"}, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=current
            )
            body = response.content.decode()
            assert '<section class="card planner" id="planner">' in body
            assert heading in body
            assert "<html" not in body
            assert '<td class="num"><strong>3</strong></td>' in body


# --- One pool's page ------------------------------------------------------------------------------


class TestPoolPage:
    def test_it_records_how_the_pool_was_built(self, client, campaign, built_pool, organiser):
        client.force_login(organiser)
        body = client.get(url("pool", campaign, built_pool.version)).content.decode()
        assert "Pool v1" in body
        assert "depth 5" in body
        assert "trec_eval (score descending" in body
        for tag in TAGS:
            assert tag in body
        assert "Pooljudge 0.1.0" in body
        assert "Per topic" in body
        assert "Per run" in body
        assert 'id="progress-plot-title"' in body

    def test_judged_and_relevant_counts_follow_the_judging(
        self, client, campaign, built_pool, organiser
    ):
        client.force_login(organiser)
        page = url("pool", campaign, built_pool.version)
        before = client.get(page).context
        assert before["live"]["judged"] == 0
        entries = list(
            PoolEntry.objects.filter(pool=built_pool, topic__topic_id="402").order_by("doc_id")
        )
        a = Assessor.objects.create(campaign=campaign, name="a")
        b = Assessor.objects.create(campaign=campaign, name="b")
        assert campaign.relevance_threshold == 1
        for entry, label in zip(entries[:3], (0, 0, 2), strict=True):
            Judgment.objects.create(
                campaign=campaign, topic=entry.topic, doc_id=entry.doc_id, assessor=a, label=label
            )
        # A second assessor on the same pair counts once (relevant for either makes it
        # relevant); -1 (not judged) is no verdict.
        Judgment.objects.create(
            campaign=campaign,
            topic=entries[0].topic,
            doc_id=entries[0].doc_id,
            assessor=b,
            label=1,
        )
        Judgment.objects.create(
            campaign=campaign,
            topic=entries[3].topic,
            doc_id=entries[3].doc_id,
            assessor=a,
            label=-1,
        )
        context = client.get(page).context
        rows = {row["topic"].topic_id: row for row in context["topic_rows"]}
        assert (rows["402"]["judged"], rows["402"]["relevant"]) == (3, 2)
        assert (rows["401"]["judged"], rows["401"]["relevant"]) == (0, 0)
        assert rows["402"]["already_judged"] == 0  # at build time
        assert context["live"]["judged"] == 3
        judged_by_run = {row["run"].tag: row["judged_now"] for row in context["run_rows"]}
        contributions = dict.fromkeys(TAGS, 0)
        by_pk = {str(run.pk): run.tag for run in Run.objects.all()}
        for entry in entries[:3]:
            for run_id, _rank in entry.provenance:
                contributions[by_pk[str(run_id)]] += 1
        assert judged_by_run == contributions

    def test_a_building_pool_shows_its_job_and_then_reloads(
        self, client, campaign, runs, organiser, django_capture_on_commit_callbacks
    ):
        from pooling.pools import create_pool
        from pooling.tasks import build_pool_task

        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 3})
        client.force_login(organiser)
        body = client.get(url("pool", campaign, pool.version)).content.decode()
        assert f'hx-get="/c/robust04/jobs/{pool.job_id}/"' in body  # campaigns/_job.html
        assert 'hx-get="/c/robust04/pools/1/status/"' in body
        assert "Cancel the build" in body
        status = client.get(url("pool_status", campaign, 1), HTTP_HX_REQUEST="true")
        assert status.status_code == 204
        build_pool_task.apply(args=[pool.job_id])
        status = client.get(url("pool_status", campaign, 1), HTTP_HX_REQUEST="true")
        assert status.status_code == 200
        assert status["HX-Refresh"] == "true"
        body = client.get(url("pool", campaign, pool.version)).content.decode()
        assert "Per topic" in body

    def test_a_cancelled_build_says_why_and_building_again_once_retried(
        self, client, campaign, runs, organiser
    ):
        from campaigns import jobs
        from pooling.pools import create_pool
        from pooling.tasks import build_pool_task

        pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 3})
        jobs.request_cancel(pool.job)
        build_pool_task.apply(args=[pool.job_id])
        pool.refresh_from_db()
        assert pool.status == Pool.Status.CANCELLED
        client.force_login(organiser)
        body = client.get(url("pool", campaign, pool.version)).content.decode()
        assert "Not built" in body
        assert "Cancelled before it ran." in body
        versions = client.get(url("pools", campaign)).content.decode()
        assert "status-cancelled" in versions

        assert jobs.retry(pool.job)  # the Retry button of the job page; sent on commit
        body = client.get(url("pool", campaign, pool.version)).content.decode()
        assert "status-building" in body
        build_pool_task.apply(args=[pool.job_id])  # the delivery the commit would send
        pool.refresh_from_db()
        assert pool.status == Pool.Status.BUILT
        assert "Per topic" in client.get(url("pool", campaign, pool.version)).content.decode()

    def test_an_unknown_version_is_not_found(self, client, campaign, runs, organiser):
        client.force_login(organiser)
        assert client.get(url("pool", campaign, 7)).status_code == 404

    def test_a_pool_of_200_topics_renders_in_a_scrolling_table(
        self, client, campaign, organiser, django_capture_on_commit_callbacks
    ):
        from pooling.pools import create_pool

        Topic.objects.bulk_create(
            Topic(campaign=campaign, topic_id=f"{i:03d}", position=i) for i in range(200)
        )
        add_run(campaign, "r1", {f"{i:03d}": [f"d{i}-{j}" for j in range(5)] for i in range(200)})
        with django_capture_on_commit_callbacks(execute=True):
            pool = create_pool(campaign=campaign, strategy="depth", params={"depth": 5})
        client.force_login(organiser)
        response = client.get(url("pool", campaign, pool.version))
        assert len(response.context["topic_rows"]) == 200
        assert response.content.decode().count('<div class="table-scroll tall">') == 2
