"""Real Chromium (Debian's /usr/bin/chromium) driven by Playwright against a live server. In CI a
missing browser is a failure, never a skip."""

from __future__ import annotations

import os
import shutil

import pytest
from pytest_django import live_server_helper

from tests.conftest import require

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# The live server speaks plain HTTP on localhost. With DEBUG off (as in CI) the production
# settings would redirect every page to HTTPS and mark cookies Secure-only; everything else
# (CSP, nosniff, CSRF, sessions) stays as deployed.
PLAIN_HTTP = {
    "SECURE_SSL_REDIRECT": False,
    "SESSION_COOKIE_SECURE": False,
    "CSRF_COOKIE_SECURE": False,
    "SECURE_HSTS_SECONDS": 0,
}


@pytest.fixture(scope="session")
def live_server(request):
    """pytest-django's live server, started after the plain-HTTP settings are in place: its
    middleware (SecurityMiddleware reads its settings once) is loaded when the thread starts."""
    from django.conf import settings

    saved = {name: getattr(settings, name) for name in PLAIN_HTTP}
    for name, value in PLAIN_HTTP.items():
        setattr(settings, name, value)
    server = live_server_helper.LiveServer(
        request.config.getvalue("liveserver")
        or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS")
        or "localhost"
    )
    yield server
    server.stop()
    for name, value in saved.items():
        setattr(settings, name, value)


@pytest.fixture
def http_settings(settings):
    """The same plain-HTTP settings for code the test itself runs."""
    for name, value in PLAIN_HTTP.items():
        setattr(settings, name, value)
    return settings


@pytest.fixture(scope="session")
def browser():
    require(
        os.path.exists(CHROMIUM) or shutil.which("chromium") is not None,
        "Debian's chromium is not installed (apt-get install chromium)",
    )
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the live server and the ORM calls
    # in the tests are ordinary synchronous code. Only while browsers run (never in deployment).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield instance
            instance.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def login(live_server, http_settings, browser):
    """A new browser context logged in as ``user`` (a session made server-side, set as a cookie)."""
    from django.conf import settings as django_settings
    from django.test import Client

    contexts = []

    def make(user, *, javascript: bool = True, **options):
        client = Client()
        client.force_login(user)
        context = browser.new_context(java_script_enabled=javascript, **options)
        context.add_cookies(
            [
                {
                    "name": django_settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()
