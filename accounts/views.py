"""Logging in, changing one's password, and choosing a new one by e-mail or one-time link.

Nothing here says whether an account exists: the lockout message is the same for every
username, the reset page answers every address alike, and a link that does not work says only
that it does not work.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods

from accounts import throttle
from accounts.forms import ChangePasswordForm, LoginForm, ReplacePasswordForm, ResetRequestForm
from accounts.models import Account
from accounts.passwords import MUST_CHANGE_SESSION_KEY, password_chosen
from accounts.redirects import safe_next
from pooljudge.middleware import ENDED

log = logging.getLogger("pooljudge.accounts")

BACKEND = "accounts.backends.ThrottledModelBackend"


def in_words(seconds: int) -> str:
    """A configured duration for people: "3 days", "12 hours", "90 minutes"."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    minutes = max(1, round(seconds / 60))
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def refused_as_locked(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """A login form refused by the throttle answers 429 Too Many Requests, with Retry-After."""
    lock = getattr(request, "login_lock", None)
    if lock is not None and response.status_code == 200:
        response.status_code = 429
        response["Retry-After"] = str(lock.seconds_left())
    return response


class LoginView(auth_views.LoginView):
    authentication_form = LoginForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if self.request.method == "GET":
            context["ended"] = self.request.session.pop(ENDED, None)
        context["lifetime"] = in_words(settings.SESSION_ABSOLUTE_SECONDS)
        return context

    def form_invalid(self, form):
        return refused_as_locked(self.request, super().form_invalid(form))


@login_required
@sensitive_post_parameters()
@never_cache
@require_http_methods(["GET", "POST"])
def password_change(request: HttpRequest) -> HttpResponse:
    """Change one's own password. A login whose password someone else chose lands here first
    and replaces it without retyping it (they have just logged in with it)."""
    forced = bool(request.session.get(MUST_CHANGE_SESSION_KEY))
    data = request.POST if request.method == "POST" else None
    if forced:
        form = ReplacePasswordForm(request.user, data, replacing_temporary=True)
    else:
        form = ChangePasswordForm(request.user, data, request=request)
    if data is not None and form.is_valid():
        user = form.save()
        # This session stays logged in; every other session of the account ends (its stored
        # password hash no longer matches).
        update_session_auth_hash(request, user)
        password_chosen(user)
        request.session.pop(MUST_CHANGE_SESSION_KEY, None)
        log.info(
            "password changed: username=%r address=%s",
            user.get_username(),
            throttle.client_address(request),
        )
        messages.success(
            request, "Password changed. Any other session of this account has been logged out."
        )
        return redirect(safe_next(request, reverse("home")))
    locked = any(error.code == "locked" for error in form.errors.as_data().get("old_password", []))
    context = {"form": form, "forced": forced, "next": safe_next(request, "")}
    status = 429 if locked else (400 if form.is_bound else 200)
    return render(request, "accounts/password_change.html", context, status=status)


@sensitive_post_parameters()
@never_cache
@require_http_methods(["GET", "POST"])
def password_reset(request: HttpRequest) -> HttpResponse:
    """Ask for a reset link by e-mail (when the site can send e-mail); otherwise, where to get a
    one-time link. The answer is the same whether or not an account has the address."""
    form = None
    if settings.PASSWORD_RESET_BY_EMAIL:
        form = ResetRequestForm(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            _send_reset_email(request, form)
            return redirect("password_reset_done")
    status = 400 if form is not None and form.is_bound else 200
    context = {"form": form, "validity": in_words(settings.PASSWORD_RESET_TIMEOUT)}
    return render(request, "accounts/password_reset.html", context, status=status)


def _send_reset_email(request: HttpRequest, form: ResetRequestForm) -> None:
    email = throttle.normalise(form.cleaned_data["email"])
    address = throttle.client_address(request)
    lock = throttle.lock_for(kind=throttle.RESET, account=email, address=address)
    if lock is not None:
        # Answered as if sent: the page must not differ for a throttled address either.
        log.warning(
            "reset e-mail not sent (throttled by %s): email=%r address=%s",
            lock.reason,
            email,
            address,
        )
        return
    counts = throttle.record(kind=throttle.RESET, account=email, address=address)
    log.info("reset e-mail requested: email=%r address=%s (%s)", email, address, counts.describe())
    form.save(
        request=request,
        use_https=request.is_secure(),
        subject_template_name="accounts/email/password_reset_subject.txt",
        email_template_name="accounts/email/password_reset_email.txt",
    )


@never_cache
@require_GET
def password_reset_done(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/password_reset_sent.html")


class ResetConfirmView(auth_views.PasswordResetConfirmView):
    """A one-time link: choose a password, and be logged in with it. The link stops working once
    used (the token is signed with the old password hash)."""

    form_class = ReplacePasswordForm
    template_name = "accounts/password_reset_confirm.html"

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs()
        kwargs["replacing_temporary"] = Account.objects.filter(
            user=self.user, must_change_password=True
        ).exists()
        return kwargs

    def form_valid(self, form):
        user = form.save()
        del self.request.session[auth_views.INTERNAL_RESET_SESSION_TOKEN]
        password_chosen(user)
        auth_login(self.request, user, backend=BACKEND)
        log.info(
            "password set with a one-time link: username=%r address=%s",
            user.get_username(),
            throttle.client_address(self.request),
        )
        messages.success(self.request, "Password set. You are logged in.")
        return redirect("home")

    def form_invalid(self, form):
        response = super().form_invalid(form)
        response.status_code = 400
        return response
