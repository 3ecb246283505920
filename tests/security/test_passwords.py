"""Passwords (ASVS V6.2, V6.4): the audit found no password change and no reset, so organisers
typed their assessors' passwords and nobody could ever change them, and any organiser could
enrol any existing account, so whoever created an account knew its password for ever.

Now every user changes their own password (ending their other sessions); an account an
organiser creates either has a temporary password that must be replaced at the first login
(every page but the change form, logout and static files is closed until then) or none and a
one-time link; organisers hand out one-time links only for accounts whose reach lies inside
their own campaigns; reset by e-mail when the site can send it; and no page or message says
which accounts exist."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core import mail
from django.core.management import call_command
from django.urls import reverse

from campaigns.members import add_member
from tests.conftest import PASSWORD, HttpsClient

pytestmark = pytest.mark.django_db

User = get_user_model()
TEMPORARY = "a-temporary-passphrase"
CHOSEN = "my-very-own-passphrase"
LINK = re.compile(r"https?://testserver(/accounts/password/reset/[^/\s\"<]+/[^/\s\"<]+/)")


@pytest.fixture(autouse=True)
def _fast_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _login(client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})


def _create_assessor(client, campaign, username: str, password: str = ""):
    return client.post(
        reverse("assess:assessor_create", args=[campaign.slug]),
        {"username": username, "password": password},
    )


def _new_password(password: str) -> dict[str, str]:
    return {"new_password1": password, "new_password2": password}


# --- Changing one's own password -------------------------------------------------------------


def test_every_user_can_change_their_password_and_their_other_sessions_end(client, assessor_a):
    elsewhere = HttpsClient()
    assert _login(elsewhere, "alice", PASSWORD).status_code == 302
    assert _login(client, "alice", PASSWORD).status_code == 302
    page = client.get(reverse("password_change"))
    assert page.status_code == 200
    assert "Current password" in page.content.decode()
    response = client.post(
        reverse("password_change"), {"old_password": PASSWORD, **_new_password(CHOSEN)}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    assert client.get(reverse("home")).status_code == 200  # this session goes on
    assert elsewhere.get(reverse("home")).status_code == 302  # the other one is over
    client.post(reverse("logout"))
    assert _login(client, "alice", PASSWORD).status_code == 200
    assert _login(client, "alice", CHOSEN).status_code == 302


def test_a_wrong_current_password_or_a_weak_new_one_changes_nothing(client, assessor_a):
    client.force_login(assessor_a)
    url = reverse("password_change")
    wrong = client.post(url, {"old_password": "nope", **_new_password(CHOSEN)})
    assert wrong.status_code == 400
    weak = client.post(url, {"old_password": PASSWORD, **_new_password("12345678")})
    assert weak.status_code == 400
    assert "too common" in weak.content.decode()
    assessor_a.refresh_from_db()
    assert assessor_a.check_password(PASSWORD)


def test_the_change_page_follows_only_a_next_on_this_site(client, assessor_a):
    client.force_login(assessor_a)
    data = {"old_password": PASSWORD, **_new_password(CHOSEN)}
    response = client.post(reverse("password_change"), {**data, "next": "https://evil.example/"})
    assert response["Location"] == reverse("home")


# --- Accounts an organiser creates -----------------------------------------------------------


def test_an_account_an_organiser_created_must_choose_its_own_password_at_first_login(
    client, campaign, organiser
):
    client.force_login(organiser)
    created = _create_assessor(client, campaign, "ann", TEMPORARY)
    assert created.status_code == 302
    from accounts.models import Account

    account = Account.objects.get(user__username="ann")
    assert account.must_change_password
    assert account.created_by == organiser

    ann = HttpsClient()
    assert _login(ann, "ann", TEMPORARY).status_code == 302
    # Every page sends her to the change form first (and back where she was going after).
    for path in (reverse("home"), f"/c/{campaign.slug}/judge/", "/admin/"):
        response = ann.get(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith(reverse("password_change")), path
    fragment = ann.get(reverse("home"), HTTP_HX_REQUEST="true")
    assert fragment["HX-Redirect"] == reverse("password_change")
    assert ann.post(f"/c/{campaign.slug}/judge/").status_code == 302
    page = ann.get(reverse("password_change") + "?next=/c/robust04/judge/")
    assert page.status_code == 200
    assert "Choose your own password" in page.content.decode()
    assert "Current password" not in page.content.decode()
    # The password she was given will not do again.
    again = ann.post(reverse("password_change"), _new_password(TEMPORARY))
    assert again.status_code == 400
    assert "not the one you were given" in again.content.decode()
    done = ann.post(
        reverse("password_change"), {**_new_password(CHOSEN), "next": "/c/robust04/judge/"}
    )
    assert done.status_code == 302
    assert done["Location"] == "/c/robust04/judge/"
    assert ann.get(f"/c/{campaign.slug}/judge/").status_code == 200
    account.refresh_from_db()
    assert not account.must_change_password
    assert account.password_changed_at is not None
    # The organiser's password no longer opens the account.
    assert _login(HttpsClient(), "ann", TEMPORARY).status_code == 200


def test_logging_out_stays_open_to_an_account_that_must_change_its_password(
    client, campaign, organiser
):
    client.force_login(organiser)
    _create_assessor(client, campaign, "ann", TEMPORARY)
    ann = HttpsClient()
    _login(ann, "ann", TEMPORARY)
    response = ann.post(reverse("logout"))
    assert response.status_code == 302
    assert response["Location"] == reverse("login")


def test_add_member_create_with_a_password_makes_it_temporary(campaign):
    out = StringIO()
    call_command(
        "add_member", campaign.slug, "cli-ann", "--role", "assessor", "--create",
        "--password", TEMPORARY, stdout=out,
    )  # fmt: skip
    assert "must be replaced at the first login" in out.getvalue()
    from accounts.models import Account

    assert Account.objects.get(user__username="cli-ann").must_change_password
    ann = HttpsClient()
    _login(ann, "cli-ann", TEMPORARY)
    assert ann.get(reverse("home"))["Location"].startswith(reverse("password_change"))


def test_an_account_created_without_a_password_gets_a_link_that_works_once(
    client, campaign, organiser
):
    client.force_login(organiser)
    response = _create_assessor(client, campaign, "bea")
    assert response.status_code == 200
    page = response.content.decode()
    assert "One-time password link for bea" in page
    path = LINK.search(page)[1]
    # The link is in this page only: not in a message cookie, not in the session.
    assert path not in str(client.cookies.get("messages", ""))
    bea = User.objects.get(username="bea")
    assert not bea.has_usable_password()
    _use_link(HttpsClient(), path, CHOSEN)
    assert _login(HttpsClient(), "bea", CHOSEN).status_code == 302
    # Once used, it no longer works.
    again = HttpsClient().get(path, follow=True)
    assert "This link does not work" in again.content.decode()


def _use_link(browser: HttpsClient, path: str, password: str) -> None:
    """Open a one-time link and choose ``password``; the visitor ends up logged in."""
    opened = browser.get(path)
    assert opened.status_code == 302  # to the same form without the token in the address
    form = browser.get(opened["Location"])
    assert "Choose a new password" in form.content.decode()
    saved = browser.post(opened["Location"], _new_password(password))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert browser.get(reverse("home")).status_code == 200


def test_add_member_create_without_a_password_prints_a_one_time_link(settings, campaign):
    settings.SITE_URL = "https://judge.example.org"
    out = StringIO()
    call_command(
        "add_member", campaign.slug, "cli-bea", "--role", "assessor", "--create", stdout=out
    )
    found = re.search(r"https://judge\.example\.org(/accounts/password/reset/\S+/)", out.getvalue())
    assert found, out.getvalue()
    _use_link(HttpsClient(), found[1], CHOSEN)


def test_reset_link_prints_a_link_for_an_administrator_to_hand_over(assessor_a):
    out = StringIO()
    call_command("reset_link", "alice", stdout=out)
    path = re.search(r"(/accounts/password/reset/\S+/)", out.getvalue())[1]
    _use_link(HttpsClient(), path, CHOSEN)
    assessor_a.refresh_from_db()
    assert assessor_a.check_password(CHOSEN)


# --- One-time links from an organiser --------------------------------------------------------


def _link_for(client, campaign, user):
    return client.post(reverse("assess:member_password_link", args=[campaign.slug, user.pk]))


def test_an_organiser_hands_a_forgetful_assessor_a_one_time_link(
    client, campaign, organiser, assessor_a
):
    client.force_login(organiser)
    page = client.get(reverse("assess:assessors", args=[campaign.slug])).content.decode()
    assert "Make a one-time password link for alice" in page
    assert "Make a one-time password link for olivia" not in page  # their own: no link
    response = _link_for(client, campaign, assessor_a)
    assert response.status_code == 200
    path = LINK.search(response.content.decode())[1]
    # Until it is used, her password still works: issuing a link locks nobody out.
    assert _login(HttpsClient(), "alice", PASSWORD).status_code == 302
    assessor_a.last_login = None  # the login above would (rightly) have spent the link
    assessor_a.save(update_fields=["last_login"])
    path = LINK.search(_link_for(client, campaign, assessor_a).content.decode())[1]
    _use_link(HttpsClient(), path, CHOSEN)
    assert _login(HttpsClient(), "alice", PASSWORD).status_code == 200
    assert HttpsClient().get(path, follow=True).content.decode().count("does not work") == 1


def test_no_link_for_an_account_that_reaches_beyond_the_organisers_campaigns(
    client, campaign, other_campaign, organiser, assessor_a, assessor_b
):
    add_member(campaign=other_campaign, user=assessor_b, role="assessor")
    staff = User.objects.create_user("stella", password=PASSWORD, is_staff=True)
    add_member(campaign=campaign, user=staff, role="assessor")
    creator = User.objects.create_user("carl", password=PASSWORD)
    creator.user_permissions.add(Permission.objects.get(codename="add_campaign"))
    add_member(campaign=campaign, user=creator, role="assessor")
    client.force_login(organiser)
    for user, reason in (
        (assessor_b, "also works in campaigns you do not organise"),
        (staff, "is a site administrator"),
        (creator, "holds site-wide rights"),
        (organiser, "your own account"),
    ):
        before = user.password
        response = _link_for(client, campaign, user)
        assert response.status_code == 400, user
        text = response.content.decode()
        assert reason in text
        assert not LINK.search(text)
        user.refresh_from_db()
        assert user.password == before
    assert _link_for(client, campaign, assessor_a).status_code == 200


def test_an_organiser_gets_no_link_for_someone_outside_the_campaign(
    client, campaign, organiser, outsider, other_organiser
):
    client.force_login(organiser)
    assert _link_for(client, campaign, outsider).status_code == 404
    client.force_login(other_organiser)
    assert _link_for(client, campaign, outsider).status_code == 404


def test_an_account_nobody_has_logged_into_yet_joins_only_its_creators_campaigns(
    client, campaign, other_campaign, organiser, other_organiser
):
    client.force_login(organiser)
    _create_assessor(client, campaign, "ann", TEMPORARY)
    add = reverse("assess:member_add", args=[other_campaign.slug])
    other = HttpsClient()
    other.force_login(other_organiser)
    refused = other.post(add, {"username": "ann", "role": "assessor"})
    assert refused.status_code == 400
    assert "has not yet chosen their own password" in refused.content.decode()
    assert not other_campaign.memberships.filter(user__username="ann").exists()
    # Once she has chosen her own, anyone may add her.
    ann = HttpsClient()
    _login(ann, "ann", TEMPORARY)
    ann.post(reverse("password_change"), _new_password(CHOSEN))
    assert other.post(add, {"username": "ann", "role": "assessor"}).status_code == 302
    assert other_campaign.memberships.filter(user__username="ann").exists()


# --- Reset by e-mail -------------------------------------------------------------------------


@pytest.fixture
def email_on(settings):
    settings.PASSWORD_RESET_BY_EMAIL = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    return settings


def test_reset_by_email_sends_a_one_time_link_and_answers_unknown_addresses_alike(
    client, email_on, assessor_a
):
    assessor_a.email = "alice@example.org"
    assessor_a.save()
    answers = []
    for address in ("Alice@Example.org", "nobody@example.org"):
        response = client.post(reverse("password_reset"), {"email": address})
        answers.append((response.status_code, response["Location"]))
    assert answers[0] == answers[1] == (302, reverse("password_reset_done"))
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["alice@example.org"]
    path = LINK.search(mail.outbox[0].body)[1]
    _use_link(HttpsClient(), path, CHOSEN)
    assert _login(HttpsClient(), "alice", CHOSEN).status_code == 302


def test_reset_emails_are_throttled_per_address(client, email_on, assessor_a):
    assessor_a.email = "alice@example.org"
    assessor_a.save()
    for _ in range(8):
        response = client.post(reverse("password_reset"), {"email": "alice@example.org"})
        assert response.status_code == 302
    assert len(mail.outbox) == email_on.LOGIN_FAILURES_PER_ACCOUNT


def test_without_email_the_reset_page_sends_people_to_their_organiser(client, settings):
    settings.PASSWORD_RESET_BY_EMAIL = False
    page = client.get(reverse("password_reset")).content.decode()
    assert "one-time password link" in page
    assert 'name="email"' not in page
    assert client.post(reverse("password_reset"), {"email": "a@b.c"}).status_code == 200
    assert len(mail.outbox) == 0


def test_a_broken_or_forged_link_says_only_that_it_does_not_work(client, assessor_a):
    for path in (
        "/accounts/password/reset/MQ/not-a-token/",
        "/accounts/password/reset/OTk5OTk/abc-def/",
        "/accounts/password/reset/%00/x/",
    ):
        response = client.get(path, follow=True)
        assert response.status_code == 200
        assert "This link does not work" in response.content.decode()


def test_a_one_time_link_gets_its_owner_in_while_their_username_is_locked(settings, assessor_a):
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        _login(HttpsClient(), "alice", "wrong")
    assert _login(HttpsClient(), "alice", PASSWORD).status_code == 429
    out = StringIO()
    call_command("reset_link", "alice", stdout=out)
    path = re.search(r"(/accounts/password/reset/\S+/)", out.getvalue())[1]
    _use_link(HttpsClient(), path, CHOSEN)  # logged in, and the username's failures forgotten
    assert _login(HttpsClient(), "alice", CHOSEN).status_code == 302


def test_a_local_login_whose_owner_changed_the_password_is_neither_reset_nor_printed(
    settings, tmp_path
):
    settings.DATA_DIR = tmp_path
    first = StringIO()
    call_command("local_accounts", stdout=first)
    given = first.getvalue().split(" / ")[1].strip()
    organiser = User.objects.get(username="organiser")
    organiser.set_password(CHOSEN)
    organiser.save()
    again = StringIO()
    call_command("local_accounts", stdout=again)
    assert given not in again.getvalue()
    assert "(changed by its owner)" in again.getvalue()
    organiser.refresh_from_db()
    assert organiser.check_password(CHOSEN)
