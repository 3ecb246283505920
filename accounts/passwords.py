"""Passwords someone else chose, and one-time links that let a person choose their own.

An organiser who creates an assessor's login knows the password they typed. So that nobody keeps
knowing another person's password, such a password is *temporary*: its owner must replace it at
the first login (``accounts.middleware`` sends every page to the change form until they do). Or
the organiser types no password at all and hands over a one-time link instead; the link is
Django's password-reset token, which is signed with the account's current password hash and last
login, so it stops working once used (the hash changes), once its owner logs in, or after
``PASSWORD_RESET_TIMEOUT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import Account

# Set at login for an account whose password is temporary; the middleware reads only the session,
# so the check costs no query on any page.
MUST_CHANGE_SESSION_KEY = "_pooljudge_must_change_password"


def record_created(user, *, by=None, temporary: bool) -> None:
    """``user`` was created by ``by`` (None: the command line); with ``temporary``, its password
    was chosen by its creator and must be changed at the first login."""
    Account.objects.update_or_create(
        user=user, defaults={"must_change_password": temporary, "created_by": by}
    )


def password_chosen(user) -> None:
    """``user`` has just chosen their own password."""
    Account.objects.filter(user=user).update(
        must_change_password=False, password_changed_at=timezone.now()
    )


def chosen_by_owner(user) -> bool:
    """Whether ``user``'s password is one its owner chose: true of every login nobody else
    created, and of a created one once its owner has replaced the password or used a link."""
    return not Account.objects.filter(user=user, password_changed_at__isnull=True).exists()


def must_change(user) -> bool:
    return Account.objects.filter(user=user, must_change_password=True).exists()


@dataclass(frozen=True)
class OneTimeLink:
    url: str  # absolute where the site's address is known, else the path alone
    expires: datetime


def one_time_link(user, *, request: HttpRequest | None = None) -> OneTimeLink:
    """A link with which ``user`` chooses a new password, valid once and for
    ``PASSWORD_RESET_TIMEOUT`` seconds. Its address is the request's site, else ``SITE_URL``."""
    path = reverse(
        "password_reset_confirm",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )
    if request is not None:
        url = request.build_absolute_uri(path)
    elif settings.SITE_URL:
        url = settings.SITE_URL.rstrip("/") + path
    else:
        url = path
    expires = timezone.now() + timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)
    return OneTimeLink(url=url, expires=expires)
