"""Accounts in real Chromium: an assessor replaces the password an organiser gave them at the
first login and changes it again later; an organiser hands a one-time link to an assessor, who
chooses a password with it (once); and the login page locks after five wrong passwords."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from campaigns.members import add_member, create_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEMPORARY = "a-temporary-passphrase"
CHOSEN = "my-very-own-passphrase"
LATER = "and-another-passphrase"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button.primary")


def _fill_new_password(page, password: str) -> None:
    page.fill("#id_new_password1", password)
    page.fill("#id_new_password2", password)


def test_an_assessor_replaces_the_given_password_at_first_login_and_changes_it_later(
    live_server, browser, campaign, organiser
):
    ann = create_user(username="ann", password=TEMPORARY, by=organiser)
    add_member(campaign=campaign, user=ann, role="assessor")
    base = live_server.url
    context = browser.new_context()
    page = context.new_page()

    # The first login ends on the change form, whatever page was asked for.
    page.goto(f"{base}/c/{campaign.slug}/judge/")
    page.fill("#id_username", "ann")
    page.fill("#id_password", TEMPORARY)
    page.click("button.primary")
    page.wait_for_selector("h1:has-text('Choose your own password')")
    assert "/accounts/password/" in page.url
    page.goto(f"{base}/")  # no way round it
    page.wait_for_selector("h1:has-text('Choose your own password')")
    _fill_new_password(page, TEMPORARY)
    page.click("button.primary")
    page.wait_for_selector("text=not the one you were given")
    _fill_new_password(page, CHOSEN)
    page.click("button.primary")
    page.wait_for_selector("text=Password changed")
    assert page.url == f"{base}/"  # then on to the page last asked for

    # Later, from the top bar: the current password is asked for this time.
    page.click("header >> text=Password")
    page.wait_for_selector("h1:has-text('Change password')")
    page.fill("#id_old_password", CHOSEN)
    _fill_new_password(page, LATER)
    page.click("button.primary")
    page.wait_for_selector("text=Password changed")
    page.click("header >> text=Log out")
    page.wait_for_selector("h1:has-text('Log in')")

    _log_in(page, base, "ann", CHOSEN)
    page.wait_for_selector("text=do not match an active account")
    _log_in(page, base, "ann", LATER)
    page.wait_for_selector("header >> text=ann")
    assert "/accounts/" not in page.url
    context.close()


def test_an_organiser_hands_over_a_one_time_link_that_sets_a_password_once(
    live_server, login, browser, campaign, organiser, assessor_a
):
    base = live_server.url
    page = login(organiser)
    page.goto(f"{base}/c/{campaign.slug}/assessors/")
    page.click("button[aria-label='Make a one-time password link for alice']")
    page.wait_for_selector("#password-link")  # swapped in by htmx
    link = page.input_value("#password-link-url")
    assert link.startswith(f"{base}/accounts/password/reset/")

    context = browser.new_context()
    alice = context.new_page()
    alice.goto(link)
    alice.wait_for_selector("h1:has-text('Choose a new password')")
    assert "set-password" in alice.url  # the token is no longer in the address bar
    _fill_new_password(alice, CHOSEN)
    alice.click("button.primary")
    alice.wait_for_selector("text=Password set. You are logged in.")
    alice.wait_for_selector("header >> text=alice")
    assert get_user_model().objects.get(username="alice").check_password(CHOSEN)

    other = browser.new_context()
    again = other.new_page()
    again.goto(link)
    again.wait_for_selector("h1:has-text('This link does not work')")
    for opened in (context, other):
        opened.close()


def test_five_wrong_passwords_lock_the_login_form(live_server, browser, assessor_a):
    from tests.conftest import PASSWORD

    base = live_server.url
    context = browser.new_context()
    page = context.new_page()
    for _ in range(5):
        _log_in(page, base, "alice", "wrong-password")
        page.wait_for_selector("text=do not match an active account")
    _log_in(page, base, "alice", PASSWORD)
    page.wait_for_selector("text=Too many failed logins for this username or from your network")
    assert "/accounts/login/" in page.url
    context.close()
