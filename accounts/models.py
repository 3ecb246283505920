"""What Pooljudge knows about a login beyond Django's user: whether its password was set by
someone else (and must be changed at the next login), and the recent failed attempts that
throttle logins and reset requests.

This is its own small app, not part of ``campaigns``: a login exists before and beside any
campaign (an organiser of none, a superuser), the login pages and the admin's use these tables
without knowing about campaigns, and ``campaigns`` builds on it (creating an assessor's account
marks its password temporary), so it sits below every other app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Account(models.Model):
    """One row per login whose password someone other than its owner chose (an organiser creating
    an assessor, ``manage.py add_member --create``). Logins without a row chose their own."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    must_change_password = models.BooleanField(
        default=False,
        help_text="The password was set by someone else: its owner must choose a new one at the "
        "next login before anything else.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who created the login (empty: the command line).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    password_changed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"account {self.user_id}"


class Attempt(models.Model):
    """One counted attempt: a failed login, or a request for a reset e-mail. Rows older than the
    window are deleted as new ones arrive, so the table holds at most a window's worth."""

    class Kind(models.TextChoices):
        LOGIN_FAILURE = "login", "failed login"
        RESET_REQUEST = "reset", "reset e-mail requested"

    kind = models.CharField(max_length=5, choices=Kind.choices)
    # The username (or e-mail address) as typed, case-folded: counted whether or not an account
    # has it, so a lockout says nothing about which accounts exist.
    account = models.CharField(max_length=254)
    # The client's address; an IPv6 client's /64 network, which one household or host holds.
    address = models.CharField(max_length=64)
    at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["kind", "account", "at"], name="attempt_account_at"),
            models.Index(fields=["kind", "address", "at"], name="attempt_address_at"),
            models.Index(fields=["at"], name="attempt_at"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.account!r} from {self.address} at {self.at:%Y-%m-%d %H:%M:%S}"
