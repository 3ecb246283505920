from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from accounts import receivers

        user_login_failed.connect(receivers.login_failed, dispatch_uid="pooljudge-login-failed")
        user_logged_in.connect(receivers.logged_in, dispatch_uid="pooljudge-logged-in")


class PooljudgeAdminConfig(admin_apps.AdminConfig):
    """Installed in place of ``django.contrib.admin`` (Django's documented way to replace the
    default site): ``admin.site`` everywhere is then ``accounts.admin.PooljudgeAdminSite``, whose
    login form is throttled."""

    default = False  # "accounts" alone in INSTALLED_APPS means AccountsConfig
    default_site = "accounts.admin.PooljudgeAdminSite"
