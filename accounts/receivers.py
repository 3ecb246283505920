"""Counting and logging logins, from Django's auth signals (connected in ``AccountsConfig``).

Failed logins are logged on ``pooljudge.accounts`` at WARNING with the username as typed (quoted,
so a newline in it cannot forge a log line), the client address and the counts; never the
password (Django replaces it in ``credentials`` before the signal, and it is not read here).
"""

from __future__ import annotations

import logging
import time

from django.contrib.auth import get_user_model
from django.http import HttpRequest

from accounts import throttle
from accounts.passwords import MUST_CHANGE_SESSION_KEY, must_change
from pooljudge.middleware import LOGIN_AT

log = logging.getLogger("pooljudge.accounts")


def login_failed(sender, credentials: dict, request: HttpRequest | None = None, **kwargs) -> None:
    username = credentials.get(get_user_model().USERNAME_FIELD, credentials.get("username", ""))
    if request is None:  # authenticate() called without a request (a shell, a script)
        log.warning("login failed: username=%r (no request)", username)
        return
    address = throttle.client_address(request)
    lock = getattr(request, "login_lock", None)
    if lock is not None:
        log.warning(
            "login refused while locked: username=%r address=%s path=%s locked by %s for %d s",
            username,
            address,
            request.path,
            lock.reason,
            lock.seconds_left(),
        )
        return
    counts = throttle.record(
        kind=throttle.LOGIN, account=throttle.normalise(username), address=address
    )
    log.warning(
        "login failed: username=%r address=%s path=%s (%s)",
        username,
        address,
        request.path,
        counts.describe(),
    )


def logged_in(sender, request: HttpRequest, user, **kwargs) -> None:
    username = user.get_username()
    throttle.clear_account(kind=throttle.LOGIN, account=throttle.normalise(username))
    session = getattr(request, "session", None)
    if session is not None:
        # The absolute session lifetime counts from here (pooljudge/middleware.py).
        session[LOGIN_AT] = int(time.time())
        if must_change(user):
            session[MUST_CHANGE_SESSION_KEY] = True
        else:
            session.pop(MUST_CHANGE_SESSION_KEY, None)
    log.info("login: username=%r address=%s", username, throttle.client_address(request))
