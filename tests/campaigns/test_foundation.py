"""Rubric versions, membership constraints, the health check, the CLI, and production settings."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.urls import reverse

from campaigns.models import Assessor, Campaign, Label, LabelSpec, Membership, RubricVersion, Topic

pytestmark = pytest.mark.django_db


class TestRubricVersions:
    def test_saving_a_rubric_creates_a_new_version_and_keeps_the_old(self, campaign):
        first = campaign.current_rubric()
        labels = [LabelSpec(0, "No", "", "", "n"), LabelSpec(1, "Yes", "", "e.g. a recipe", "y")]
        second = campaign.save_rubric(labels, note="simpler")
        assert second.number == first.number + 1
        assert campaign.current_rubric() == second
        assert [label.name for label in first.labels.all()] == [
            "Not relevant",
            "Partially relevant",
            "Highly relevant",
        ]
        assert [label.key for label in second.labels.all()] == ["n", "y"]

    @pytest.mark.parametrize(
        ("labels", "message"),
        [
            ([LabelSpec(0, "Only", "", "", "0")], "at least two"),
            ([LabelSpec(0, "A", "", "", "0"), LabelSpec(0, "B", "", "", "1")], "same value"),
            ([LabelSpec(0, "A", "", "", "0"), LabelSpec(1, "B", "", "", "0")], "same keyboard"),
            ([LabelSpec(-1, "A", "", "", "0"), LabelSpec(1, "B", "", "", "1")], "0 or more"),
            ([LabelSpec(0, "A", "", "", "?"), LabelSpec(1, "B", "", "", "1")], "navigation"),
        ],
    )
    def test_an_unusable_scale_is_refused_and_nothing_is_saved(self, campaign, labels, message):
        before = RubricVersion.objects.count()
        with pytest.raises(ValueError, match=message):
            campaign.save_rubric(labels)
        assert RubricVersion.objects.count() == before

    def test_the_threshold_must_be_a_label_value(self, campaign):
        with pytest.raises(ValueError, match="threshold 5"):
            campaign.save_rubric(list(campaign.current_rubric().specs()), threshold=5)

    def test_the_database_refuses_two_labels_with_one_value(self, campaign):
        rubric = campaign.current_rubric()
        with pytest.raises(IntegrityError), transaction.atomic():
            Label.objects.create(rubric=rubric, value=0, name="dup", key="x")


class TestConstraints:
    def test_a_topic_id_is_unique_per_campaign_but_not_across(self, campaign, other_campaign):
        Topic.objects.create(campaign=campaign, topic_id="051")
        Topic.objects.create(campaign=other_campaign, topic_id="051")
        with pytest.raises(IntegrityError), transaction.atomic():
            Topic.objects.create(campaign=campaign, topic_id="051")
        assert Topic.objects.get(campaign=campaign).topic_id == "051"

    def test_a_user_has_one_membership_per_campaign(self, campaign, assessor_a):
        with pytest.raises(IntegrityError), transaction.atomic():
            Membership.objects.create(campaign=campaign, user=assessor_a, role="organiser")

    def test_an_assessor_member_gets_a_stable_pseudonymous_identity(self, campaign, assessor_a):
        assessor = Assessor.objects.get(campaign=campaign, user=assessor_a)
        assert assessor.name == "alice"
        assert assessor.pseudonym.startswith("a")
        assert "alice" not in assessor.pseudonym
        assert Assessor.objects.for_user(campaign, assessor_a) == assessor


class TestHealthz:
    def test_it_is_200_when_the_database_answers(self, client):
        response = client.get("/healthz")
        assert response.status_code == 200
        assert response.json()["checks"]["database"] is True

    def test_it_is_503_when_the_database_does_not(self, client, monkeypatch):
        from pooljudge import views

        monkeypatch.setattr(views, "_database_ok", lambda: False)
        response = client.get("/healthz")
        assert response.status_code == 503
        assert response.json()["status"] == "unavailable"

    def test_it_is_503_when_a_configured_broker_does_not_answer(self, client, settings):
        settings.CELERY_TASK_ALWAYS_EAGER = False
        settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
        response = client.get("/healthz")
        assert response.status_code == 503
        assert response.json()["checks"] == {"database": True, "broker": False}

    def test_it_checks_the_configured_broker(self, client):
        response = client.get("/healthz")
        checks = response.json()["checks"]
        assert ("broker" in checks) == (not settings.CELERY_TASK_ALWAYS_EAGER)


class TestPages:
    def test_the_login_page_renders_with_a_csp_and_no_inline_script(self, client):
        response = client.get(reverse("login"))
        assert response.status_code == 200
        csp = response["Content-Security-Policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert b"<script>" not in response.content

    def test_home_lists_an_organisers_campaigns(self, client, organiser, campaign):
        client.force_login(organiser)
        response = client.get(reverse("home"))
        assert campaign.title in response.content.decode()

    def test_an_outsider_gets_404_for_a_campaign(self, client, outsider, campaign):
        client.force_login(outsider)
        assert client.get(reverse("campaigns:detail", args=[campaign.slug])).status_code == 404
        assert client.get(reverse("campaigns:rubric", args=[campaign.slug])).status_code == 404

    def test_an_assessor_cannot_edit_the_rubric(self, client, assessor_a, campaign):
        client.force_login(assessor_a)
        assert client.get(reverse("campaigns:rubric", args=[campaign.slug])).status_code == 404

    def test_the_rubric_editor_saves_a_new_version(self, csrf_client, organiser, campaign):
        csrf_client.force_login(organiser)
        url = reverse("campaigns:rubric", args=[campaign.slug])
        page = csrf_client.get(url)
        token = page.cookies["csrftoken"].value
        data = {
            "labels-TOTAL_FORMS": "3",
            "labels-INITIAL_FORMS": "0",
            "labels-MIN_NUM_FORMS": "0",
            "labels-MAX_NUM_FORMS": "12",
            "labels-0-value": "0",
            "labels-0-name": "Off topic",
            "labels-0-key": "a",
            "labels-1-value": "1",
            "labels-1-name": "On topic",
            "labels-1-key": "s",
            "labels-1-example": "A recipe that uses the ingredient",
            "labels-2-value": "",
            "labels-2-name": "",
            "labels-2-key": "",
            "threshold": "1",
            "note": "two levels",
        }
        assert csrf_client.post(url, data).status_code == 403  # no CSRF token
        response = csrf_client.post(url, {**data, "csrfmiddlewaretoken": token})
        assert response.status_code == 302
        rubric = campaign.current_rubric()
        assert rubric.number == 2
        assert rubric.note == "two levels"
        assert [(label.value, label.key) for label in rubric.labels.all()] == [(0, "a"), (1, "s")]

    def test_the_rubric_editor_shows_errors_next_to_fields(self, client, organiser, campaign):
        client.force_login(organiser)
        url = reverse("campaigns:rubric", args=[campaign.slug])
        data = {
            "labels-TOTAL_FORMS": "2",
            "labels-INITIAL_FORMS": "0",
            "labels-MIN_NUM_FORMS": "0",
            "labels-MAX_NUM_FORMS": "12",
            "labels-0-value": "0",
            "labels-0-name": "A",
            "labels-0-key": "x",
            "labels-1-value": "1",
            "labels-1-name": "B",
            "labels-1-key": "x",
            "threshold": "1",
        }
        response = client.post(url, data)
        assert response.status_code == 200
        assert "same keyboard key" in response.content.decode()
        assert campaign.current_rubric().number == 1


class TestCommands:
    def test_create_campaign_and_add_member(self):
        out = StringIO()
        call_command("create_campaign", "dl-2026", "--title", "DL", "--scale", "trecdl", stdout=out)
        campaign = Campaign.objects.get(slug="dl-2026")
        assert campaign.relevance_threshold == 2
        assert [label.value for label in campaign.current_rubric().labels.all()] == [0, 1, 2, 3]
        call_command(
            "add_member",
            "dl-2026",
            "ann",
            "--role",
            "assessor",
            "--create",
            "--password",
            "a-long-enough-passphrase",
            stdout=out,
        )
        assert Membership.objects.get(campaign=campaign, user__username="ann").role == "assessor"

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["create_campaign", "Bad Slug", "--title", "x"], "slug"),
            (["add_member", "nope", "ann", "--role", "assessor"], "No campaign"),
            (["add_member", "robust04", "ghost", "--role", "assessor"], "No user 'ghost'"),
            (
                [
                    "add_member",
                    "robust04",
                    "ann",
                    "--role",
                    "assessor",
                    "--create",
                    "--password",
                    "123",
                ],
                "too short",
            ),
        ],
    )
    def test_bad_input_is_refused_with_a_message(self, campaign, args, message):
        with pytest.raises(CommandError, match=message):
            call_command(*args, stdout=StringIO())

    def test_a_refused_command_exits_non_zero(self, campaign):
        result = subprocess.run(
            [sys.executable, "manage.py", "create_campaign", "Bad Slug", "--title", "x"],
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "DEBUG": "1"},
        )
        assert result.returncode != 0
        assert "slug" in result.stderr


def test_production_settings_pass_the_deploy_check():
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "x" * 20 + "-production-secret-key-with-plenty-of-entropy-0123456789",
        "ALLOWED_HOSTS": "judge.example.org",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set while browser tests run, never deployed
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
