"""The organiser's Assessors and Progress pages through the client: who may reach them (only the
campaign's organisers), CSRF, every form's errors next to its field, no 500 on any input, and the
flows with and without htmx."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from assess.assignments import assign
from assess.judging import next_item, submit
from assess.models import Assignment, AssignmentItem
from campaigns.judgments import Timing
from campaigns.members import add_member
from campaigns.models import Assessor, Judgment, Membership
from tests.conftest import PASSWORD
from tests.factories import small_campaign


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Accounts are made for every test; the production hasher's cost is not what is tested here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


pytestmark = pytest.mark.django_db
User = get_user_model()


@pytest.fixture
def world(campaign, organiser, assessor_a, assessor_b, other_campaign, other_organiser):
    """Campaign X (robust04) with a pool and Alice's primary assignment on topic 301; campaign Y
    (other) with a pool of its own and Yuri's assignment."""
    pool = small_campaign(campaign, docs=4)
    [mine] = assign(
        campaign=campaign,
        pool=pool,
        user=assessor_a,
        topics=[campaign.topics.get(topic_id="301")],
        seed=1,
    )
    other_pool = small_campaign(other_campaign, topics=("901",), docs=3)
    yuri = User.objects.create_user("yuri", password=PASSWORD)
    add_member(campaign=other_campaign, user=yuri, role="assessor")
    [theirs] = assign(
        campaign=other_campaign,
        pool=other_pool,
        user=yuri,
        topics=list(other_campaign.topics.all()),
    )
    return {"pool": pool, "mine": mine, "theirs": theirs, "other_pool": other_pool, "yuri": yuri}


def _state() -> tuple:
    """Everything a forbidden request must leave unchanged."""
    return (
        User.objects.count(),
        Membership.objects.count(),
        list(Assignment.objects.order_by("pk").values_list("pk", "active", "assessor_id")),
        AssignmentItem.objects.filter(withdrawn=True).count(),
        AssignmentItem.objects.count(),
        Judgment.objects.count(),
    )


def _get_urls(slug: str) -> list[str]:
    base = reverse("assess:assessors", args=[slug])
    progress = reverse("assess:progress", args=[slug])
    return [base, f"{base}?pool=1", progress, f"{progress}?format=csv"]


def _post_urls(slug: str, assignment_pk: int) -> list[tuple[str, dict]]:
    return [
        (
            reverse("assess:assessor_create", args=[slug]),
            {"username": "newbie", "password": "a-long-enough-passphrase"},
        ),
        (reverse("assess:member_add", args=[slug]), {"username": "mallory", "role": "organiser"}),
        (
            reverse("assess:assign", args=[slug, 1]),
            {"assessor": "1", "all_topics": "on", "mode": "primary"},
        ),
        (reverse("assess:move", args=[slug, 1]), {"topic": "1", "from_user": "1", "to_user": "2"}),
        (reverse("assess:rebalance", args=[slug, 1]), {"topic": "1", "users": ["1", "2"]}),
        (reverse("assess:assignment_end", args=[slug, assignment_pk]), {}),
    ]


class TestWhoMayReachThePages:
    @pytest.mark.parametrize("who", ["other_organiser", "assessor_a", "outsider"])
    def test_everyone_but_the_campaigns_organisers_gets_a_404_and_changes_nothing(
        self, client, request, world, campaign, who
    ):
        user = request.getfixturevalue(who)
        client.force_login(user)
        for url in _get_urls(campaign.slug):
            response = client.get(url)
            assert response.status_code == 404, url
            assert campaign.title not in response.content.decode()
        before = _state()
        for url, data in _post_urls(campaign.slug, world["mine"].pk):
            response = client.post(url, data)
            assert response.status_code == 404, url
            assert "alice" not in response.content.decode()
        assert _state() == before

    def test_anonymous_visitors_are_sent_to_log_in(self, client, world, campaign):
        for url in _get_urls(campaign.slug):
            response = client.get(url)
            assert response.status_code == 302
            assert "/accounts/login/" in response["Location"]
        before = _state()
        for url, data in _post_urls(campaign.slug, world["mine"].pk):
            response = client.post(url, data)
            assert response.status_code == 302
            assert "/accounts/login/" in response["Location"]
        assert _state() == before

    def test_the_organiser_reaches_every_page(self, client, organiser, world, campaign):
        client.force_login(organiser)
        for url in _get_urls(campaign.slug):
            assert client.get(url).status_code == 200, url

    def test_another_campaigns_ids_are_404s(self, client, organiser, world, campaign):
        client.force_login(organiser)
        before = _state()
        theirs = world["theirs"]
        response = client.post(reverse("assess:assignment_end", args=[campaign.slug, theirs.pk]))
        assert response.status_code == 404
        for name in ("assign", "move", "rebalance"):
            response = client.post(reverse(f"assess:{name}", args=[campaign.slug, 99]), {})
            assert response.status_code == 404
        # Their campaign through our slug, and our assignment through theirs: both unknown.
        response = client.post(reverse("assess:assignment_end", args=["other", world["mine"].pk]))
        assert response.status_code == 404
        assert _state() == before

    def test_another_campaigns_people_and_topics_are_not_choices(
        self, client, organiser, world, campaign, other_campaign
    ):
        client.force_login(organiser)
        before = _state()
        url = reverse("assess:assign", args=[campaign.slug, 1])
        response = client.post(
            url, {"assessor": world["yuri"].pk, "all_topics": "on", "mode": "primary"}
        )
        assert response.status_code == 400
        assert _field_errors(response, "assessor")
        foreign_topic = other_campaign.topics.get().pk
        alice = User.objects.get(username="alice").pk
        response = client.post(
            url, {"assessor": alice, "topics": [foreign_topic], "mode": "primary"}
        )
        assert response.status_code == 400
        assert _field_errors(response, "topics")
        response = client.post(
            reverse("assess:move", args=[campaign.slug, 1]),
            {"topic": foreign_topic, "from_user": alice, "to_user": world["yuri"].pk},
        )
        assert response.status_code == 400
        assert _field_errors(response, "topic")
        assert _field_errors(response, "to_user")
        assert "yuri" not in response.content.decode()
        assert "901" not in response.content.decode()
        assert _state() == before


def _field_errors(response, name: str) -> list[str]:
    """The error messages rendered inside the field block of ``name``."""
    html = response.content.decode()
    block = re.search(
        rf'<div class="field has-error[^"]*">(?:(?!<div class="field).)*?name="{name}"'
        rf'(?:(?!<div class="field).)*',
        html,
        re.S,
    )
    if block is None:
        return []
    return re.findall(r'<small class="error" role="alert">(.*?)</small>', block.group(0))


class TestCsrf:
    def test_a_post_without_the_token_is_refused_and_changes_nothing(
        self, csrf_client, organiser, world, campaign
    ):
        csrf_client.force_login(organiser)
        before = _state()
        for url, data in _post_urls(campaign.slug, world["mine"].pk):
            assert csrf_client.post(url, data).status_code == 403, url
        assert _state() == before

    def test_with_the_token_the_form_works(self, csrf_client, organiser, world, campaign):
        csrf_client.force_login(organiser)
        page = csrf_client.get(reverse("assess:assessors", args=[campaign.slug]))
        token = page.cookies["csrftoken"].value
        response = csrf_client.post(
            reverse("assess:assignment_end", args=[campaign.slug, world["mine"].pk]),
            {"csrfmiddlewaretoken": token},
        )
        assert response.status_code == 302
        world["mine"].refresh_from_db()
        assert not world["mine"].active

    def test_htmx_sends_the_token_in_a_header_set_once_on_the_body(
        self, csrf_client, organiser, world, campaign
    ):
        csrf_client.force_login(organiser)
        page = csrf_client.get(reverse("assess:assessors", args=[campaign.slug]))
        assert 'hx-headers=\'{"x-csrftoken": "' in page.content.decode()
        token = page.cookies["csrftoken"].value
        response = csrf_client.post(
            reverse("assess:assignment_end", args=[campaign.slug, world["mine"].pk]),
            HTTP_HX_REQUEST="true",
            HTTP_X_CSRFTOKEN=token,
        )
        assert response.status_code == 200


class TestPeople:
    def test_creating_an_assessor_account(self, client, organiser, world, campaign):
        client.force_login(organiser)
        url = reverse("assess:assessor_create", args=[campaign.slug])
        response = client.post(
            url,
            {
                "username": "carol",
                "password": "a-long-enough-passphrase",
                "email": "carol@example.org",
            },
        )
        assert response.status_code == 302
        assert response["Location"] == reverse("assess:assessors", args=[campaign.slug]) + "?pool=1"
        carol = User.objects.get(username="carol")
        assert carol.check_password("a-long-enough-passphrase")
        assert carol.email == "carol@example.org"
        assert campaign.role_of(carol) == "assessor"
        assert Assessor.objects.filter(campaign=campaign, user=carol).exists()
        page = client.get(response["Location"])
        assert "Created the account carol" in page.content.decode()

    @pytest.mark.parametrize(
        ("data", "field", "message"),
        [
            ({"username": "carol", "password": "short"}, "password", "too short"),
            ({"username": "carol", "password": "carol123"}, "password", "similar"),
            ({"username": "alice", "password": "a-long-enough-passphrase"}, "username", "already"),
            ({"username": "ALICE", "password": "a-long-enough-passphrase"}, "username", "already"),
            (
                {"username": "bad name!", "password": "a-long-enough-passphrase"},
                "username",
                "valid username",
            ),
            (
                {"username": "carol", "password": "a-long-enough-passphrase", "email": "nope"},
                "email",
                "valid email",
            ),
            ({"username": "", "password": ""}, "username", "required"),
        ],
    )
    def test_account_errors_are_next_to_the_field(
        self, client, organiser, world, campaign, data, field, message
    ):
        client.force_login(organiser)
        users = User.objects.count()
        response = client.post(reverse("assess:assessor_create", args=[campaign.slug]), data)
        assert response.status_code == 400
        assert any(message in error.lower() for error in _field_errors(response, field)), (
            _field_errors(response, field)
        )
        assert User.objects.count() == users

    def test_a_name_used_by_imported_judgments_is_refused(self, client, organiser, world, campaign):
        Assessor.objects.create(campaign=campaign, name="NIST", kind="imported")
        client.force_login(organiser)
        response = client.post(
            reverse("assess:assessor_create", args=[campaign.slug]),
            {"username": "NIST", "password": "a-long-enough-passphrase"},
        )
        assert response.status_code == 400
        assert _field_errors(response, "username")

    def test_adding_an_existing_user(self, client, organiser, outsider, world, campaign):
        client.force_login(organiser)
        url = reverse("assess:member_add", args=[campaign.slug])
        response = client.post(url, {"username": "mallory", "role": "assessor"})
        assert response.status_code == 302
        assert campaign.role_of(outsider) == "assessor"
        for data, message in [
            ({"username": "nobody", "role": "assessor"}, "no account"),
            ({"username": "olivia", "role": "assessor"}, "already organiser"),
            ({"username": "alice", "role": "organiser"}, "already assessor"),
            ({"username": "mallory", "role": "boss"}, "valid choice"),
        ]:
            response = client.post(url, data)
            assert response.status_code == 400
            errors = _field_errors(response, "username") + _field_errors(response, "role")
            assert any(message in e.lower() for e in errors), (data, errors)
        assert campaign.role_of(organiser) == "organiser"  # never demoted by a form

    def test_the_people_table_lists_roles_work_and_progress(
        self, client, organiser, world, campaign
    ):
        item = next_item(world["mine"])
        submit(
            item=item,
            label=1,
            rubric_version=campaign.current_rubric(),
            submission_id=None,
            expected_version=0,
            timing=Timing(),
        )
        client.force_login(organiser)
        html = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
        people = html[html.index('id="people"') : html.index('id="create"')]
        assert "alice" in people
        assert "bob" in people
        assert "olivia" in people
        assert "Primary" in people
        assert "1/4" in people
        assert "Nothing yet" in people  # bob


class TestGivingOutWork:
    def _post(self, client, campaign, data, **headers):
        return client.post(reverse("assess:assign", args=[campaign.slug, 1]), data, **headers)

    def test_primary_with_overlap_for_a_partner(self, client, organiser, world, campaign):
        client.force_login(organiser)
        bob = User.objects.get(username="bob")
        alice = User.objects.get(username="alice")
        topic = campaign.topics.get(topic_id="302")
        response = self._post(
            client,
            campaign,
            {
                "assessor": bob.pk,
                "topics": [topic.pk],
                "mode": "primary",
                "overlap": "50%",
                "partner": alice.pk,
                "interleave": "on",
                "seed": "42",
            },
        )
        assert response.status_code == 302
        primary = Assignment.objects.get(assessor__user=bob, mode="primary")
        overlap = Assignment.objects.get(assessor__user=alice, mode="overlap")
        assert primary.seed == 42
        assert primary.interleave
        assert primary.items.count() == 4
        assert overlap.overlap_fraction == 0.5
        assert overlap.items.count() == 2
        page = client.get(response["Location"]).content.decode()
        assert "Pool v1: bob: primary on 1 topic, 4 documents; alice: overlap" in page

    def test_a_shared_queue_with_replica_copies(self, client, organiser, world, campaign):
        client.force_login(organiser)
        bob = User.objects.get(username="bob")
        response = self._post(
            client,
            campaign,
            {
                "assessor": bob.pk,
                "topics": [campaign.topics.get(topic_id="302").pk],
                "mode": "queue",
                "overlap": "0.25",
            },
        )
        assert response.status_code == 302
        assert Assignment.objects.get(assessor__user=bob).mode == "queue"
        from assess.models import QueueItem

        assert QueueItem.objects.filter(replica=1).count() == 1

    def test_with_htmx_the_workspace_comes_back_with_the_message(
        self, client, organiser, world, campaign
    ):
        client.force_login(organiser)
        bob = User.objects.get(username="bob")
        response = self._post(
            client,
            campaign,
            {
                "assessor": bob.pk,
                "topics": [campaign.topics.get(topic_id="302").pk],
                "mode": "primary",
            },
            HTTP_HX_REQUEST="true",
        )
        html = response.content.decode()
        assert response.status_code == 200
        assert html.lstrip().startswith('<div id="workspace"')
        assert "<html" not in html
        assert "bob: primary on 1 topic" in html
        grid = html[html.index('id="grid"') :]
        assert "4/4" not in grid
        assert "0/4" in grid

    @pytest.mark.parametrize(
        ("data", "field", "message"),
        [
            ({"mode": "primary"}, "topics", "choose topics"),
            ({"mode": "primary", "all_topics": "on", "overlap": "abc"}, "overlap", "fraction"),
            ({"mode": "primary", "all_topics": "on", "overlap": "1.5"}, "overlap", "at most 1"),
            ({"mode": "primary", "all_topics": "on", "overlap": "150%"}, "overlap", "at most 1"),
            ({"mode": "primary", "all_topics": "on", "overlap": "nan"}, "overlap", "fraction"),
            ({"mode": "primary", "all_topics": "on", "overlap": "-0.2"}, "overlap", "fraction"),
            (
                {"mode": "primary", "all_topics": "on", "overlap": "0.1"},
                "partner",
                "needs a partner",
            ),
            ({"mode": "queue", "all_topics": "on", "partner": "self"}, "partner", "no partner"),
            (
                {"mode": "primary", "all_topics": "on", "overlap": "0.1", "partner": "self"},
                "partner",
                "another assessor",
            ),
            ({"mode": "overlap", "all_topics": "on"}, "mode", "valid choice"),
            ({"mode": "primary", "all_topics": "on", "seed": "-1"}, "seed", "greater than"),
            ({"mode": "primary", "all_topics": "on", "seed": "9" * 30}, "seed", "less than"),
            ({"mode": "primary", "topics": ["abc"]}, "topics", "not a valid value"),
            ({"mode": "primary", "topics": ["999999"]}, "topics", "valid choice"),
        ],
    )
    def test_errors_are_next_to_the_field_and_nothing_is_given_out(
        self, client, organiser, world, campaign, data, field, message
    ):
        client.force_login(organiser)
        bob = User.objects.get(username="bob")
        data = {key: (bob.pk if value == "self" else value) for key, value in data.items()}
        before = _state()
        response = self._post(client, campaign, {"assessor": bob.pk, **data})
        assert response.status_code == 400
        errors = _field_errors(response, field)
        assert any(message in e.lower() for e in errors), errors
        assert _state() == before

    def test_a_topic_with_a_primary_assessor_is_refused_next_to_the_topics(
        self, client, organiser, world, campaign
    ):
        client.force_login(organiser)
        bob = User.objects.get(username="bob")
        response = self._post(
            client, campaign, {"assessor": bob.pk, "all_topics": "on", "mode": "primary"}
        )
        assert response.status_code == 400
        assert any(
            "already have a primary assessor" in e for e in _field_errors(response, "topics")
        )

    def test_the_grid_shows_who_has_what(self, client, organiser, world, campaign):
        client.force_login(organiser)
        html = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
        grid = html[html.index('id="grid"') : html.index('id="move"')]
        assert re.search(r"<abbr[^>]*>P</abbr> 0/4", grid)
        assert "not given out" in grid  # topic 302
        assert 'class="ow-sticky-col' in grid


class TestMovingWork:
    def test_moving_a_topic_keeps_judgments(self, client, organiser, world, campaign):
        item = next_item(world["mine"])
        submit(
            item=item,
            label=2,
            rubric_version=campaign.current_rubric(),
            submission_id=None,
            expected_version=0,
            timing=Timing(),
        )
        client.force_login(organiser)
        alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
        topic = campaign.topics.get(topic_id="301")
        response = client.post(
            reverse("assess:move", args=[campaign.slug, 1]),
            {"topic": topic.pk, "from_user": alice.pk, "to_user": bob.pk},
        )
        assert response.status_code == 302
        assert Judgment.objects.get().assessor.user == alice
        assert Assignment.objects.get(assessor__user=bob).items.count() == 3
        page = client.get(response["Location"]).content.decode()
        assert "moved 3 unjudged documents from alice to bob" in page

    def test_move_errors_are_sentences_next_to_the_field(self, client, organiser, world, campaign):
        client.force_login(organiser)
        alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
        t302 = campaign.topics.get(topic_id="302")
        url = reverse("assess:move", args=[campaign.slug, 1])
        response = client.post(url, {"topic": t302.pk, "from_user": alice.pk, "to_user": bob.pk})
        assert response.status_code == 400
        assert any("nothing left to judge" in e for e in _field_errors(response, "topic"))
        response = client.post(url, {"topic": t302.pk, "from_user": alice.pk, "to_user": alice.pk})
        assert response.status_code == 400
        assert _field_errors(response, "to_user")

    def test_rebalancing_through_the_page(self, client, organiser, world, campaign):
        client.force_login(organiser)
        alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
        topic = campaign.topics.get(topic_id="301")
        url = reverse("assess:rebalance", args=[campaign.slug, 1])
        response = client.post(
            url, {"topic": topic.pk, "users": [alice.pk, bob.pk]}, HTTP_HX_REQUEST="true"
        )
        assert response.status_code == 200
        assert "Topic 301 rebalanced; left to judge: alice 2, bob 2." in response.content.decode()
        response = client.post(
            url, {"topic": campaign.topics.get(topic_id="302").pk, "users": [alice.pk]}
        )
        assert response.status_code == 400
        assert any("no unjudged documents" in e for e in _field_errors(response, "topic"))
        response = client.post(url, {"topic": topic.pk})
        assert response.status_code == 400
        assert _field_errors(response, "users")

    def test_removing_an_assignment_keeps_its_judgments(self, client, organiser, world, campaign):
        item = next_item(world["mine"])
        submit(
            item=item,
            label=2,
            rubric_version=campaign.current_rubric(),
            submission_id=None,
            expected_version=0,
            timing=Timing(),
        )
        client.force_login(organiser)
        url = reverse("assess:assignment_end", args=[campaign.slug, world["mine"].pk])
        response = client.post(url, {"pool": "1"})
        assert response.status_code == 302
        world["mine"].refresh_from_db()
        assert not world["mine"].active
        assert Judgment.objects.count() == 1
        assert world["mine"].items.filter(withdrawn=True).count() == 3
        response = client.post(url, {"pool": "1"})  # again: nothing more happens
        assert response.status_code == 302
        assert world["mine"].items.filter(withdrawn=True).count() == 3


class TestNoServerErrors:
    GARBAGE = [
        {},
        {"assessor": "x", "topics": ["1", "x", "-5"], "mode": ["primary", "queue"]},
        {
            "assessor": "99999999999999999999999",
            "topic": "99999999999999999999",
            "users": ["99999999999999999999"],
            "from_user": "0",
            "to_user": "-1",
        },
        {
            "assessor": "\x00",
            "topic": "\x00",
            "username": "\x00",
            "password": "\x00",
            "role": "\x00",
            "overlap": "\x00",
            "seed": "1e9",
            "pool": "\x00",
        },
        {
            "username": "a" * 500,
            "password": "b" * 5000,
            "email": "c" * 500 + "@x.org",
            "overlap": "9" * 400,
            "pool": "9" * 40,
        },
    ]

    def test_any_input_gets_an_answer_never_a_500(self, client, organiser, world, campaign):
        client.force_login(organiser)
        for url, _ in _post_urls(campaign.slug, world["mine"].pk)[:-1]:
            for data in self.GARBAGE:
                response = client.post(url, data)
                assert response.status_code in (302, 400), (url, data, response.status_code)
        for query in ["?pool=abc", "?pool=99999999999999999999", "?pool=-1", "?format=xml"]:
            assert (
                client.get(reverse("assess:assessors", args=[campaign.slug]) + query).status_code
                == 200
            )
            assert (
                client.get(reverse("assess:progress", args=[campaign.slug]) + query).status_code
                == 200
            )


class TestProgressPage:
    def test_it_polls_while_work_is_open_and_stops_when_all_is_judged(
        self, client, organiser, world, campaign
    ):
        client.force_login(organiser)
        url = reverse("assess:progress", args=[campaign.slug])
        page = client.get(url).content.decode()
        assert 'hx-trigger="every 5s"' in page
        assert "0/4" in page
        fragment = client.get(url, HTTP_HX_REQUEST="true")
        assert fragment.status_code == 200
        assert "<html" not in fragment.content.decode()
        assert 'id="live"' in fragment.content.decode()
        while (item := next_item(world["mine"])) is not None:
            submit(
                item=item,
                label=1,
                rubric_version=campaign.current_rubric(),
                submission_id=None,
                expected_version=0,
                timing=Timing(active_seconds=3.0),
            )
        done = client.get(url, HTTP_HX_REQUEST="true")
        assert done.status_code == 286  # htmx stops polling
        assert "hx-trigger" not in done.content.decode()
        assert "4/4" in done.content.decode()

    def test_back_button_history_restores_get_the_whole_page(
        self, client, organiser, world, campaign
    ):
        client.force_login(organiser)
        for name in ("assess:progress", "assess:assessors"):
            response = client.get(
                reverse(name, args=[campaign.slug]),
                HTTP_HX_REQUEST="true",
                HTTP_HX_HISTORY_RESTORE_REQUEST="true",
            )
            assert "<html" in response.content.decode()
            assert "HX-Request" in response["Vary"]

    def test_the_page_names_the_numbers_and_plots_them(self, client, organiser, world, campaign):
        item = next_item(world["mine"])
        submit(
            item=item,
            label=2,
            rubric_version=campaign.current_rubric(),
            submission_id=None,
            expected_version=0,
            timing=Timing(active_seconds=12.5),
        )
        client.force_login(organiser)
        html = client.get(reverse("assess:progress", args=[campaign.slug])).content.decode()
        assert "12.5 s" in html
        assert "1/4" in html
        assert "<svg" in html
        assert "<polyline" in html
        assert "alice (1)" in html
        assert "SECRET-RUN" not in html  # runs have no place on this page

    def test_empty_states_say_what_to_do_next(self, client, organiser, campaign):
        client.force_login(organiser)
        html = client.get(reverse("assess:progress", args=[campaign.slug])).content.decode()
        assert "Nothing given out yet" in html
        assert reverse("pooling:pools", args=[campaign.slug]) in html
        html = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
        assert "No pool to give out yet" in html


def test_the_overview_is_the_campaigns_hub(client, organiser, world, campaign):
    client.force_login(organiser)
    html = client.get(reverse("campaigns:detail", args=[campaign.slug])).content.decode()
    for url in [
        reverse("campaigns:rubric", args=[campaign.slug]),
        reverse("campaigns:files", args=[campaign.slug]),
        reverse("pooling:pools", args=[campaign.slug]),
        reverse("assess:assessors", args=[campaign.slug]),
        reverse("assess:progress", args=[campaign.slug]),
        reverse("qrels:export", args=[campaign.slug]),
    ]:
        assert f'href="{url}"' in html, url
