"""Helpers shared by the import commands: a progress line on stderr and problem reports."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from django.core.management.base import CommandError

from campaigns.models import Campaign
from campaigns.textfiles import ParseError


def get_campaign(slug: str) -> Campaign:
    campaign = Campaign.objects.filter(slug=slug).first()
    if campaign is None:
        raise CommandError(f"No campaign with slug {slug!r}.")
    return campaign


def refused(exc: ParseError) -> CommandError:
    """Every problem on its own line, then the count of the rest; the command exits non-zero."""
    count = exc.count
    return CommandError(
        f"Nothing was imported: {count:,} problem{'s' if count != 1 else ''}.\n{exc}"
    )


class StderrProgress:
    """``12,000 / 50,000 (24%) reading run-3.txt`` redrawn in place, at most a few times a second;
    silent when stderr is not a terminal (logs stay clean)."""

    def __init__(self, stream: TextIO | None = None, *, force: bool = False):
        self.stream = stream or sys.stderr
        self.enabled = force or self.stream.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int | None, message: str) -> None:
        if not self.enabled or time.monotonic() - self._last < 0.2:
            return
        self._last = time.monotonic()
        share = f" ({100 * done // total}%)" if total else ""
        of = f" / {total:,}" if total else ""
        self.stream.write(f"\r\033[K{done:,}{of}{share} {message}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()
