"""Django's admin, with the throttled login form (and its 429) at ``/admin/login/``."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from accounts.forms import AdminLoginForm
from accounts.views import refused_as_locked


class PooljudgeAdminSite(admin.AdminSite):
    login_form = AdminLoginForm

    def login(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        return refused_as_locked(request, super().login(request, extra_context))
