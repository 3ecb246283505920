"""Sessions (ASVS V7): login rotates the id, logout and deactivation end the session, an idle
session expires while an active one is extended without a write per request, every session ends
at its absolute lifetime however active, and no page of a logged-in user is stored by a browser
or a proxy."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.urls import reverse

from pooljudge.middleware import LAST_SEEN
from tests.conftest import PASSWORD, HttpsClient

pytestmark = pytest.mark.django_db


def _login(client, user) -> str:
    page = client.get(reverse("login"))
    response = client.post(
        reverse("login"),
        {
            "username": user.username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": page.cookies["csrftoken"].value,
        },
    )
    assert response.status_code == 302
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def _as_old_cookie(session_key: str) -> HttpsClient:
    stolen = HttpsClient()
    stolen.cookies[settings.SESSION_COOKIE_NAME] = session_key
    return stolen


def test_login_rotates_the_session_id(client, organiser):
    client.get(reverse("login"))
    client.session.save()
    before = client.session.session_key
    after = _login(client, organiser)
    assert before != after
    assert not Session.objects.filter(session_key=before).exists()


def test_logout_ends_the_session_and_the_old_cookie_is_refused(client, organiser):
    key = _login(client, organiser)
    assert _as_old_cookie(key).get(reverse("home")).status_code == 200
    client.post(reverse("logout"), {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    response = _as_old_cookie(key).get(reverse("home"))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_deactivating_an_account_ends_its_sessions(client, organiser):
    key = _login(client, organiser)
    organiser.is_active = False
    organiser.save()
    response = _as_old_cookie(key).get(reverse("home"))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_an_idle_timeout_is_configured_and_sessions_expire_after_it(client, organiser):
    assert 0 < settings.SESSION_COOKIE_AGE <= 12 * 3600
    assert settings.SESSION_COOKIE_HTTPONLY
    key = _login(client, organiser)
    Session.objects.filter(session_key=key).update(expire_date="2000-01-01T00:00:00Z")
    response = _as_old_cookie(key).get(reverse("home"))
    assert response.status_code == 302


def test_an_active_session_is_extended_at_most_once_per_refresh_interval(client, organiser):
    key = _login(client, organiser)
    first = Session.objects.get(session_key=key).expire_date
    client.get(reverse("home"))
    assert Session.objects.get(session_key=key).expire_date == first  # no write per request
    session = Session.objects.get(session_key=key)
    data = session.get_decoded()
    data[LAST_SEEN] = int(time.time()) - settings.SESSION_REFRESH_SECONDS - 1
    session.session_data = Session.objects.encode(data)
    session.save()
    client.get(reverse("home"))
    assert Session.objects.get(session_key=key).expire_date > first


def _age_login(key: str, seconds: int) -> None:
    """Move the session's login time ``seconds`` into the past."""
    from pooljudge.middleware import LOGIN_AT

    session = Session.objects.get(session_key=key)
    data = session.get_decoded()
    data[LOGIN_AT] -= seconds
    session.session_data = Session.objects.encode(data)
    session.save()


def test_an_absolute_lifetime_is_configured_beside_the_idle_timeout():
    assert 0 < settings.SESSION_ABSOLUTE_SECONDS <= 7 * 24 * 3600
    assert settings.SESSION_ABSOLUTE_SECONDS >= settings.SESSION_COOKIE_AGE


def test_a_session_ends_at_its_absolute_lifetime_however_active(client, organiser, settings):
    settings.SESSION_REFRESH_SECONDS = 0  # every request counts as activity and is saved
    key = _login(client, organiser)
    _age_login(key, settings.SESSION_ABSOLUTE_SECONDS - 60)
    assert client.get(reverse("home")).status_code == 200  # a minute left: still in
    _age_login(key, 61)
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
    assert not Session.objects.filter(session_key=key).exists()
    page = client.get(response["Location"]).content.decode()
    assert "a login lasts at most 12 hours" in page
    assert "lasts at most" not in client.get(reverse("login")).content.decode()  # said once
    assert _as_old_cookie(key).get(reverse("home")).status_code == 302


def test_logging_in_again_starts_a_new_lifetime(client, organiser, settings):
    key = _login(client, organiser)
    _age_login(key, settings.SESSION_ABSOLUTE_SECONDS + 1)
    assert client.get(reverse("home")).status_code == 302
    _login(client, organiser)
    assert client.get(reverse("home")).status_code == 200


def test_pages_of_a_logged_in_user_are_never_stored(client, organiser, campaign):
    client.force_login(organiser)
    for path, extra in (
        (reverse("home"), {}),
        (reverse("campaigns:detail", args=[campaign.slug]), {}),
        (reverse("campaigns:jobs", args=[campaign.slug]), {"HTTP_HX_REQUEST": "true"}),
        (reverse("assess:progress", args=[campaign.slug]) + "?format=csv", {}),
        ("/c/no-such-campaign/", {}),
    ):
        response = client.get(path, **extra)
        directives = {d.strip() for d in response.get("Cache-Control", "").split(",")}
        assert {"no-store", "private"} <= directives, (path, response.get("Cache-Control"))


# --- The raw reads of every logged-in request (pooljudge/sessions.py, accounts/backends.py) ---


def test_the_session_store_reads_what_it_saved_and_nothing_expired():
    from datetime import timedelta

    from django.utils import timezone

    from pooljudge.sessions import SessionStore

    assert settings.SESSION_ENGINE == "pooljudge.sessions"
    store = SessionStore()
    store["answer"] = 42
    store.save()
    assert SessionStore(store.session_key).load() == {"answer": 42}

    Session.objects.filter(session_key=store.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    expired = SessionStore(store.session_key)
    assert expired.load() == {}
    assert expired.session_key is None  # dropped, as Django's store drops it
    assert SessionStore("no-such-key-" + "x" * 20).load() == {}


def test_the_backend_finds_the_user_as_the_orm_does(organiser):
    from django.contrib.auth import get_user_model

    from accounts.backends import ThrottledModelBackend

    backend = ThrottledModelBackend()
    found = backend.get_user(str(organiser.pk))  # the session keeps the id as text
    stored = get_user_model().objects.get(pk=organiser.pk)
    assert {k: v for k, v in vars(found).items() if k != "_state"} == {
        k: v for k, v in vars(stored).items() if k != "_state"
    }
    assert backend.get_user("not-a-number") is None
    assert backend.get_user(str(organiser.pk + 1000)) is None
    organiser.is_active = False
    organiser.save(update_fields=["is_active"])
    assert backend.get_user(str(organiser.pk)) is None


def test_a_logged_in_request_reads_its_session_and_user_in_two_statements(
    client, organiser, django_assert_num_queries
):
    _login(client, organiser)
    with django_assert_num_queries(2):  # the session, then the user; the page needs nothing else
        assert client.get(reverse("password_change")).status_code == 200
