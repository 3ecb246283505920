"""Make sure a laptop install has an organiser login, and print it.

Used by README command 1. The generated password is kept in the data directory (readable only by
its owner) so a second run prints the same login instead of changing it.
"""

from __future__ import annotations

import json
import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError

ACCOUNTS_FILE = "local-accounts.json"
CHANGED_BY_OWNER = "(changed by its owner)"


def ensure_account(username: str, *, can_create_campaigns: bool = False) -> tuple[object, str]:
    """The local account ``username`` and its password, creating both on first use (or
    CHANGED_BY_OWNER once its owner has chosen another password)."""
    path = settings.DATA_DIR / ACCOUNTS_FILE
    stored = json.loads(path.read_text()) if path.exists() else {}
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    password = stored.get(username)
    if user is not None and password is not None and not user.check_password(password):
        # Its owner has changed it since (the Password page): theirs now, neither printed nor
        # set back.
        password = CHANGED_BY_OWNER
    elif user is None or password is None:
        if user is not None and password is None:
            raise CommandError(
                f"User {username!r} exists but its password is not in {path}; "
                "set one with `manage.py changepassword`."
            )
        password = password or secrets.token_urlsafe(9)
        user = user or User(username=username)
        user.set_password(password)
        user.save()
        stored[username] = password
        path.write_text(json.dumps(stored, indent=2))
        os.chmod(path, 0o600)
    if can_create_campaigns:
        user.user_permissions.add(
            Permission.objects.get(codename="add_campaign", content_type__app_label="campaigns")
        )
    return user, password


class Command(BaseCommand):
    help = "Create (once) and print the local organiser login."

    def handle(self, *args, **options) -> None:
        _, password = ensure_account("organiser", can_create_campaigns=True)
        self.stdout.write(f"Organiser login: organiser / {password}")
