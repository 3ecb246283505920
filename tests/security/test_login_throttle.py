"""Login throttling (ASVS V6.3): the audit's 150 wrong passwords on /accounts/login/ and
/admin/login/ were all answered normally, after which the right one worked, and nothing was
logged. Now five failures lock the username (and fifty the client address) for the window, the
right password included, with one message whether or not the account exists; every failure is
logged with the username and address, never the password.

The new modules are imported inside the tests that need them, so that this file also runs
against the code from before the throttle, where its HTTP tests fail as they should."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from tests.conftest import PASSWORD, HttpsClient

pytestmark = pytest.mark.django_db

User = get_user_model()
WRONG = "not-the-password"
LOCKED_TEXT = "Too many failed logins for this username or from your network"


@pytest.fixture(autouse=True)
def _policy(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.LOGIN_FAILURES_PER_ACCOUNT = 5
    settings.LOGIN_FAILURES_PER_ADDRESS = 50
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 900
    settings.TRUSTED_PROXY_COUNT = 0


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", password=PASSWORD)


def _login(client, username: str, password: str, *, url: str | None = None, **extra):
    return client.post(
        url or reverse("login"), {"username": username, "password": password}, **extra
    )


def _logged_in(client) -> bool:
    return client.get(reverse("home")).status_code == 200


def test_five_wrong_passwords_lock_the_username_and_the_right_one_is_refused_too(client, alice):
    for _ in range(5):
        response = _login(client, "alice", WRONG)
        assert response.status_code == 200
        assert "do not match an active account" in response.content.decode()
    locked = _login(client, "alice", PASSWORD)
    assert locked.status_code == 429
    assert LOCKED_TEXT in locked.content.decode()
    assert 0 < int(locked["Retry-After"]) <= 900
    assert not _logged_in(client)


def test_the_lock_lifts_when_its_failures_leave_the_window(client, alice):
    for _ in range(5):
        _login(client, "alice", WRONG)
    assert _login(client, "alice", PASSWORD).status_code == 429
    from accounts.models import Attempt

    # Fifteen minutes and a second later (the failures age, nothing else changes).
    Attempt.objects.update(at=timezone.now() - timedelta(seconds=901))
    response = _login(client, "alice", PASSWORD)
    assert response.status_code == 302
    assert _logged_in(client)


def test_a_lock_is_not_extended_by_the_attempts_it_refuses(client, alice):
    for _ in range(5):
        _login(client, "alice", WRONG)
    for _ in range(20):
        assert _login(client, "alice", WRONG).status_code == 429
    from accounts.models import Attempt

    assert Attempt.objects.count() == 5


def test_an_unknown_username_is_locked_and_answered_exactly_like_a_real_one(alice):
    answers = {}
    for name in ("alice", "nobody-has-this-name"):
        client = HttpsClient(REMOTE_ADDR=f"10.0.0.{len(answers) + 1}")
        for _ in range(5):
            _login(client, name, WRONG)
        response = _login(client, name, PASSWORD)
        page = response.content.decode().replace(name, "NAME")
        # The CSRF token differs on every page, whoever asks.
        page = re.sub(r'(csrfmiddlewaretoken" value=|"x-csrftoken": )"[^"]+"', r"\1TOKEN", page)
        answers[name] = (response.status_code, page)
    assert answers["alice"] == answers["nobody-has-this-name"]
    assert answers["alice"][0] == 429


def test_the_admin_login_is_throttled_as_well(client):
    User.objects.create_superuser("root", password=PASSWORD)
    url = reverse("admin:login")
    for _ in range(5):
        assert _login(client, "root", WRONG, url=url).status_code == 200
    locked = _login(client, "root", PASSWORD, url=url)
    assert locked.status_code == 429
    assert LOCKED_TEXT in locked.content.decode()
    assert client.get(reverse("admin:index")).status_code == 302  # still not logged in


def test_the_lock_holds_across_the_login_and_admin_forms(client, alice):
    for _ in range(5):
        _login(client, "alice", WRONG, url=reverse("admin:login"))
    assert _login(client, "alice", PASSWORD).status_code == 429


def test_many_usernames_from_one_address_lock_that_address(settings, alice):
    settings.LOGIN_FAILURES_PER_ADDRESS = 8
    attacker = HttpsClient(REMOTE_ADDR="203.0.113.9")
    for i in range(8):
        _login(attacker, f"guess-{i}", WRONG)
    assert _login(attacker, "alice", PASSWORD).status_code == 429
    # Alice, from her own address, is not affected.
    assert _login(HttpsClient(REMOTE_ADDR="198.51.100.7"), "alice", PASSWORD).status_code == 302


def test_a_successful_login_clears_the_usernames_failures(client, alice):
    for _ in range(4):
        _login(client, "alice", WRONG)
    assert _login(client, "alice", PASSWORD).status_code == 302
    client.post(reverse("logout"))
    for _ in range(4):
        _login(client, "alice", WRONG)
    assert _login(client, "alice", PASSWORD).status_code == 302


def test_usernames_are_counted_whatever_their_case_or_spaces(client, alice):
    for name in ("alice", "Alice", " ALICE ", "alice", "aLiCe"):
        _login(client, name, WRONG)
    assert _login(client, "alice", PASSWORD).status_code == 429


def test_counts_live_in_the_database_so_every_worker_sees_them(client, alice):
    """Five failures recorded by other web processes or machines (rows written there) lock the
    username here: nothing is kept in this process's memory."""
    from accounts.models import Attempt

    now = timezone.now()
    Attempt.objects.bulk_create(
        Attempt(kind="login", account="alice", address=f"192.0.2.{i}", at=now) for i in range(5)
    )
    assert _login(client, "alice", PASSWORD).status_code == 429


def test_failed_logins_are_logged_with_username_and_address_never_the_password(
    client, alice, caplog
):
    caplog.set_level(logging.INFO, logger="pooljudge.accounts")
    secret = "hunter2-is-my-secret"
    client = HttpsClient(REMOTE_ADDR="198.51.100.23")
    for _ in range(5):
        _login(client, "alice", secret)
    _login(client, "alice", secret)
    failures = [r for r in caplog.records if r.getMessage().startswith("login failed")]
    assert len(failures) == 5
    first = failures[0]
    assert first.levelno == logging.WARNING
    assert "username='alice'" in first.getMessage()
    assert "address=198.51.100.23" in first.getMessage()
    assert "1 of 5 for this account" in first.getMessage()
    refused = [r for r in caplog.records if r.getMessage().startswith("login refused")]
    assert len(refused) == 1
    assert all(secret not in r.getMessage() for r in caplog.records)
    # A newline in a typed username cannot forge a log line.
    _login(HttpsClient(REMOTE_ADDR="198.51.100.24"), "x\nlogin: username='root'", WRONG)
    assert all("\n" not in r.getMessage() for r in caplog.records)


def test_a_wrong_current_password_on_the_change_form_counts_as_a_failed_login(client, alice):
    client.force_login(alice)
    url = reverse("password_change")
    new = {"new_password1": "a-brand-new-passphrase", "new_password2": "a-brand-new-passphrase"}
    for _ in range(5):
        response = client.post(url, {"old_password": WRONG, **new})
        assert response.status_code == 400
    locked = client.post(url, {"old_password": PASSWORD, **new})
    assert locked.status_code == 429
    assert LOCKED_TEXT in locked.content.decode()
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


@pytest.mark.parametrize(
    ("proxies", "meta", "expected"),
    [
        (0, {"REMOTE_ADDR": "192.0.2.1", "HTTP_X_FORWARDED_FOR": "203.0.113.5"}, "192.0.2.1"),
        # One proxy appends what it saw; what the client wrote before it is not trusted.
        (
            1,
            {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "1.2.3.4, 203.0.113.5"},
            "203.0.113.5",
        ),
        (
            2,
            {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "203.0.113.5, 10.0.0.9"},
            "203.0.113.5",
        ),
        # Fewer entries than proxies, or garbage: the direct peer.
        (2, {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "203.0.113.5"}, "10.0.0.2"),
        (1, {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "not-an-ip"}, "10.0.0.2"),
        # An IPv6 client is counted by its /64; an IPv4-mapped one as IPv4.
        (0, {"REMOTE_ADDR": "2001:db8:1:2:aaaa::1"}, "2001:db8:1:2::/64"),
        (0, {"REMOTE_ADDR": "::ffff:192.0.2.8"}, "192.0.2.8"),
    ],
)
def test_the_client_address_is_the_one_the_trusted_proxy_saw(settings, proxies, meta, expected):
    from accounts import throttle

    settings.TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().get("/", **meta)
    assert throttle.client_address(request) == expected
