"""Sessions (ASVS V7): login rotates the id, logout and deactivation end the session, and an idle
session expires while an active one is extended without a write per request."""

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
