"""Delete the stored bytes of failed and cancelled imports older than the retention period."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from campaigns.jobs import housekeeping


class Command(BaseCommand):
    help = (
        "Delete the stored bytes of uploads whose import failed or was cancelled more than "
        "POOLJUDGE_UPLOAD_RETENTION_HOURS ago (every worker also does this once an hour)."
    )

    def handle(self, *args, **options) -> None:
        done = housekeeping()
        hours = settings.POOLJUDGE_UPLOAD_RETENTION_HOURS
        self.stdout.write(
            f"Deleted the stored bytes of {done['uploads']:,} upload"
            f"{'s' if done['uploads'] != 1 else ''} kept more than {hours:g} hours."
        )
