"""The authentication backend: Django's, refusing throttled usernames and addresses first.

Every login form goes through ``django.contrib.auth.authenticate``, so checking the lock here
covers ``/accounts/login/``, ``/admin/login/`` and any login path added later alike. A refusal is
a PermissionDenied, which ``authenticate`` turns into "no user" and a ``user_login_failed``
signal; ``request.login_lock`` tells the form (and the receiver) that it was a lock.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from accounts import throttle


class ThrottledModelBackend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs,
    ):
        if request is not None:
            if username is None:
                username = kwargs.get(get_user_model().USERNAME_FIELD)
            lock = throttle.lock_for(
                kind=throttle.LOGIN,
                account=throttle.normalise(username),
                address=throttle.client_address(request),
            )
            if lock is not None:
                request.login_lock = lock
                # Before the password is checked: right or wrong, a locked login is refused.
                raise PermissionDenied
        return super().authenticate(request, username=username, password=password, **kwargs)
