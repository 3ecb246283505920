"""Throttling logins (and reset e-mails) per account and per client address.

The policy (README "Configuration", docs/security.md):

- ``LOGIN_FAILURES_PER_ACCOUNT`` failed logins for one username within
  ``LOGIN_FAILURE_WINDOW_SECONDS`` lock that username; ``LOGIN_FAILURES_PER_ADDRESS`` failures
  from one client address within the window lock that address (higher, because a classroom or an
  office behind one NAT shares it).
- A lock lasts until the window holds fewer failures than the limit again: at most one window
  after the failure that set it.
- While locked, a login is refused *before* the password is looked at, right or wrong, and the
  refusal is not counted: refusals neither extend the lock nor cost a password hash. Usernames
  are counted whether or not an account has them, and the message is the same, so a lockout
  says nothing about which accounts exist.
- A successful login clears its username's failures (not its address's: otherwise an attacker
  with one account of their own could reset their address's count between guesses).
- The counts are rows of ``accounts.Attempt`` in the database, which every web process and
  machine shares (PostgreSQL in production; the SQLite file, shared by the processes of one
  machine, in the embedded default). A per-process cache would give each gunicorn worker its own
  count, multiplying the limit by the number of workers.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from accounts.models import Attempt

LOGIN = Attempt.Kind.LOGIN_FAILURE
RESET = Attempt.Kind.RESET_REQUEST


@dataclass(frozen=True)
class Lock:
    """A refusal until ``until``, because of too many attempts for the ``account`` or from the
    ``address``."""

    until: datetime
    reason: str  # "account" or "address"

    def seconds_left(self, now: datetime | None = None) -> int:
        left = (self.until - (now or timezone.now())).total_seconds()
        return max(1, math.ceil(left))

    def message(self) -> str:
        minutes = math.ceil(self.seconds_left() / 60)
        # One sentence whichever limit was hit, and for usernames with or without an account.
        return (
            "Too many failed logins for this username or from your network. Try again in "
            f"{minutes} minute{'s' if minutes != 1 else ''}, or ask your campaign's organiser "
            "for a password link."
        )


def window() -> timedelta:
    return timedelta(seconds=settings.LOGIN_FAILURE_WINDOW_SECONDS)


def normalise(account: str | None) -> str:
    """A username or e-mail address as counted: trimmed, case-folded, at most 254 characters
    (so "Alice" and "alice " count as one, whatever the account model makes of them)."""
    return (account or "").strip().casefold()[:254]


def client_address(request: HttpRequest) -> str:
    """The client's address as counted: the last ``TRUSTED_PROXY_COUNT``-th entry of
    X-Forwarded-For when requests come through that many proxies (each appends the address it
    saw, so that entry is the one the outermost trusted proxy wrote and a client cannot forge),
    else REMOTE_ADDR. An IPv6 address is counted by its /64 network, which one host or household
    holds whole."""
    remote = request.META.get("REMOTE_ADDR", "")
    chosen = remote
    hops = settings.TRUSTED_PROXY_COUNT
    if hops > 0:
        forwarded = [
            part.strip()
            for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
            if part.strip()
        ]
        if len(forwarded) >= hops:
            chosen = forwarded[-hops]
    for candidate in (chosen, remote):
        try:
            ip = ipaddress.ip_address(candidate)
        except ValueError:
            continue
        if ip.version == 6:
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip)
    return "unknown"


def _limits() -> tuple[int, int]:
    # Reset e-mails are counted against the same limits as failed logins.
    return settings.LOGIN_FAILURES_PER_ACCOUNT, settings.LOGIN_FAILURES_PER_ADDRESS


def lock_for(*, kind: str, account: str, address: str, now: datetime | None = None) -> Lock | None:
    """The lock on ``account`` or ``address`` for attempts of ``kind``, or None. Two indexed
    queries, each reading at most one row."""
    now = now or timezone.now()
    span = window()
    per_account, per_address = _limits()
    locks = []
    for reason, field, value, limit in (
        ("account", "account", account, per_account),
        ("address", "address", address, per_address),
    ):
        if limit <= 0 or not value:
            continue
        # The limit-th most recent attempt in the window: while it is there, the window holds
        # `limit` attempts, and it leaves the window (lifting the lock) at its time + the window.
        oldest_counted = (
            Attempt.objects.filter(kind=kind, at__gt=now - span, **{field: value})
            .order_by("-at")
            .values_list("at", flat=True)[limit - 1 : limit]
        )
        for at in oldest_counted:
            locks.append(Lock(until=at + span, reason=reason))
    return max(locks, key=lambda lock: lock.until, default=None)


@dataclass(frozen=True)
class Counts:
    """Attempts in the window after one was recorded, against the limits."""

    account: int
    address: int
    account_limit: int
    address_limit: int

    def describe(self) -> str:
        return (
            f"{self.account} of {self.account_limit} for this account, "
            f"{self.address} of {self.address_limit} from this address"
        )


def record(*, kind: str, account: str, address: str, now: datetime | None = None) -> Counts:
    """Count one attempt, forget attempts that have left the window, and return the counts."""
    now = now or timezone.now()
    since = now - window()
    Attempt.objects.create(kind=kind, account=account, address=address, at=now)
    Attempt.objects.filter(at__lte=since).delete()
    recent = Attempt.objects.filter(kind=kind, at__gt=since)
    per_account, per_address = _limits()
    return Counts(
        account=recent.filter(account=account).count(),
        address=recent.filter(address=address).count(),
        account_limit=per_account,
        address_limit=per_address,
    )


def clear_account(*, kind: str, account: str) -> None:
    Attempt.objects.filter(kind=kind, account=account).delete()
