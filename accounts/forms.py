"""The login, password change and reset forms: Django's, with the throttle's message, the
project's wording, and the password rules as one readable sentence."""

from __future__ import annotations

import logging

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import (
    AuthenticationForm,
    PasswordChangeForm,
    PasswordResetForm,
    SetPasswordForm,
)
from django.contrib.auth.password_validation import get_default_password_validators
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.views.decorators.debug import sensitive_variables

from accounts import throttle

log = logging.getLogger("pooljudge.accounts")

INVALID_LOGIN = "That username and password do not match an active account."


def password_rules() -> str:
    """The configured password validators' rules, as one sentence ("Your password can't be
    too similar to …; must contain at least 8 characters; …")."""
    rules = [str(v.get_help_text()).rstrip(".") for v in get_default_password_validators()]
    if not rules:
        return ""
    subject = "Your password "
    if all(rule.startswith(subject) for rule in rules):
        return subject + "; ".join(rule.removeprefix(subject) for rule in rules) + "."
    return "; ".join(rules) + "."


class ThrottledLoginMixin:
    """A login refused by the throttle says so (the same words whether or not the account
    exists); any other failure keeps the form's own message."""

    request: HttpRequest | None

    def get_invalid_login_error(self) -> ValidationError:
        lock = getattr(self.request, "login_lock", None)
        if lock is not None:
            return ValidationError(lock.message(), code="locked")
        return super().get_invalid_login_error()


class LoginForm(ThrottledLoginMixin, AuthenticationForm):
    error_messages = {**AuthenticationForm.error_messages, "invalid_login": INVALID_LOGIN}


class AdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


class _NewPasswordFields:
    """The two new-password boxes, with the rules spelt out under the first."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["new_password1"].help_text = password_rules()
        self.fields["new_password2"].help_text = "The same again, to catch a typing slip."


class ChangePasswordForm(_NewPasswordFields, PasswordChangeForm):
    """Changing one's own password. The current password counts as a login attempt: a stolen
    session cannot guess it faster than the login page allows."""

    def __init__(self, user, *args, request: HttpRequest, **kwargs) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request
        self.fields["old_password"].label = "Current password"

    @sensitive_variables("old_password")
    def clean_old_password(self) -> str:
        account = throttle.normalise(self.user.get_username())
        address = throttle.client_address(self.request)
        lock = throttle.lock_for(kind=throttle.LOGIN, account=account, address=address)
        if lock is not None:
            raise ValidationError(lock.message(), code="locked")
        try:
            return super().clean_old_password()
        except ValidationError:
            counts = throttle.record(kind=throttle.LOGIN, account=account, address=address)
            log.warning(
                "password change: wrong current password: username=%r address=%s (%s)",
                self.user.get_username(),
                address,
                counts.describe(),
            )
            raise


class ReplacePasswordForm(_NewPasswordFields, SetPasswordForm):
    """Choosing a new password without typing the old one: after a one-time link, or at the
    first login with a password someone else chose (which the new one must not repeat)."""

    def __init__(self, user, *args, replacing_temporary: bool = False, **kwargs) -> None:
        super().__init__(user, *args, **kwargs)
        self.replacing_temporary = replacing_temporary

    @sensitive_variables("password")
    def clean_new_password1(self) -> str:
        password = self.cleaned_data["new_password1"]
        if self.replacing_temporary and self.user.check_password(password):
            raise ValidationError(
                "Choose a password of your own, not the one you were given.", code="reused"
            )
        return password


class ResetRequestForm(PasswordResetForm):
    email = forms.EmailField(
        label="E-mail address",
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )
