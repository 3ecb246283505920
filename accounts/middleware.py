"""A login whose password someone else chose reaches only the page that replaces it."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import Resolver404, resolve, reverse
from django.utils.http import urlencode
from django_htmx.http import HttpResponseClientRedirect

from accounts.passwords import MUST_CHANGE_SESSION_KEY

# URL names still open to such a login: the change page itself, logging out, and a one-time
# link (which also replaces the password). Static files never reach the middleware.
ALLOWED = ("password_change", "logout", "password_reset_confirm", "healthz")


class PasswordChangeRequiredMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        if (
            session is not None
            and session.get(MUST_CHANGE_SESSION_KEY)
            and request.user.is_authenticated
            and not self._allowed(request)
        ):
            target = reverse("password_change")
            if request.method == "GET" and not request.htmx:
                target += "?" + urlencode({"next": request.get_full_path()})
            if request.htmx:
                # A fragment request: load the change page for real instead of swapping it in.
                return HttpResponseClientRedirect(target)
            return HttpResponseRedirect(target)
        return self.get_response(request)

    @staticmethod
    def _allowed(request: HttpRequest) -> bool:
        # Middleware runs before URL resolution: resolve here (a 404 path is not allowed).
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return False
        return match.url_name in ALLOWED and not match.namespace
