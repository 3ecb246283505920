"""Template tags of the job pages: whether any worker is there to run a waiting job."""

from __future__ import annotations

from django import template

from campaigns import jobs

register = template.Library()


@register.simple_tag
def worker_status() -> jobs.WorkerStatus:
    """``{% worker_status as workers %}``: one small query, for fragments whose view does not
    pass it (a queued job shown on the Files, Pools or Export page)."""
    return jobs.worker_status()
