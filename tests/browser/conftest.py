"""Real Chromium (Debian's /usr/bin/chromium) driven by Playwright against pytest-django's live
server. In CI a missing browser is a failure, never a skip."""

from __future__ import annotations

import os
import shutil

import pytest

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

# Playwright's sync API runs an event loop in this thread; the live server and the ORM calls in
# the tests are ordinary synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    require(
        os.path.exists(CHROMIUM) or shutil.which("chromium") is not None,
        "Debian's chromium is not installed (apt-get install chromium)",
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def http_settings(settings):
    """The live server speaks plain HTTP on localhost: no TLS redirect, no Secure-only cookies."""
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    settings.SECURE_HSTS_SECONDS = 0
    return settings


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
