"""Where to go after a form: a ``next`` the request names, if it stays on this site."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The request's ``next`` (POST, else GET) when it is a URL of this site over an allowed
    scheme; ``fallback`` otherwise. A foreign host (``https://evil.example``, ``//evil.example``)
    or a script (``javascript:…``) is never followed."""
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return fallback
