"""Sessions end after SESSION_COOKIE_AGE seconds of inactivity, not of existence.

Django's database sessions expire a fixed time after they were last saved. Saving on every request
would cost a write per judgment, so an active session is saved (and its expiry pushed back) at most
once every SESSION_REFRESH_SECONDS; the idle limit is therefore precise to within that interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.http import HttpRequest, HttpResponse

LAST_SEEN = "_pooljudge_last_seen"


class SessionIdleTimeoutMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        now = int(time.time())
        if (
            session is not None
            and session.session_key
            and SESSION_KEY in session
            and now - session.get(LAST_SEEN, 0) >= settings.SESSION_REFRESH_SECONDS
        ):
            session[LAST_SEEN] = now  # marks the session modified: saved with a new expiry
        response = self.get_response(request)
        if session is not None and session.modified and SESSION_KEY in session:
            # Saved anyway (a login, say): note the time at no extra cost.
            session[LAST_SEEN] = now
        return response
