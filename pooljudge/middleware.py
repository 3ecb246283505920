"""How long a login lasts, and that its pages are never stored.

Sessions end after SESSION_COOKIE_AGE seconds of inactivity (``SESSION_IDLE_SECONDS``), and in
any case SESSION_ABSOLUTE_SECONDS after the login, however active. Django's database sessions
expire a fixed time after they were last saved. Saving on every request would cost a write per
judgment, so an active session is saved (and its expiry pushed back) at most once every
SESSION_REFRESH_SECONDS; the idle limit is therefore precise to within that interval. The
absolute limit is exact: the login time is in the session (written at login by
``accounts.receivers.logged_in``) and checked on every request at no extra cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

LAST_SEEN = "_pooljudge_last_seen"
LOGIN_AT = "_pooljudge_login_at"
# Left in the fresh (anonymous) session of a login that reached its absolute lifetime, so the
# login page can say why it is asking again.
ENDED = "_pooljudge_session_ended"


class SessionLifetimeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        now = int(time.time())
        if session is not None and session.session_key and SESSION_KEY in session:
            login_at = session.get(LOGIN_AT)
            if login_at is None:
                # A session from before the absolute limit existed: its lifetime starts now.
                session[LOGIN_AT] = now
            elif now - login_at >= settings.SESSION_ABSOLUTE_SECONDS:
                # Before authentication runs: this request is already anonymous.
                session.flush()
                session[ENDED] = "absolute"
            if SESSION_KEY in session and (
                now - session.get(LAST_SEEN, 0) >= settings.SESSION_REFRESH_SECONDS
            ):
                session[LAST_SEEN] = now  # marks the session modified: saved with a new expiry
        response = self.get_response(request)
        if session is not None and session.modified and SESSION_KEY in session:
            # Saved anyway (a login, say): note the time at no extra cost.
            session[LAST_SEEN] = now
        return response


class PrivatePagesMiddleware:
    """Every response to a logged-in user carries ``Cache-Control: no-store, private``: no
    browser cache, shared proxy or back button after logout keeps a copy of a campaign's pages,
    fragments or downloads. (Static files never get here: WhiteNoise answers them first.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            patch_cache_control(response, no_store=True, private=True)
        return response
