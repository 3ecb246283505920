"""Bytes per judgment answer: what the judging screen gets back for each verdict, raw and gzipped.

Run from the repository root: ``python bench/answer_bytes.py [--judgments 30]``. Builds the demo
campaign (``manage.py demo``) in a throwaway data directory (SQLite, tasks in-process), logs in
as the demo assessor grace, and judges documents one after the other the way the screen's script
does: each verdict posted with ``upcoming`` (the prefetched document the page moved on to), and
the next verdict's form state taken from the answer. Prints the median size of the answer raw and
gzipped (level 6, what a proxy typically uses), the smallest and largest, and, for comparison,
the whole judging panel of the same documents (what every verdict was answered with before the
answer was slimmed, see docs/judging-protocol.md) and the page the screen loads once.

The script only speaks HTTP to the app (Django's test client), so the same file run in a tree
from before the change measures that tree's answers: there ``upcoming`` is ignored and every
answer is the next document's whole panel.
"""

from __future__ import annotations

import argparse
import gzip
import html
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _setup(data: str) -> None:
    os.environ["POOLJUDGE_DATA_DIR"] = data
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEBUG"):
        os.environ.pop(name, None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    call_command("demo", stdout=open(os.devnull, "w"))  # noqa: SIM115 (closed at exit)


def _attrs(tag: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in re.findall(r'([a-z-]+)="([^"]*)"', tag)}


def _panel_state(text: str) -> dict[str, str] | None:
    """The form state of a whole panel (its document and hidden fields)."""
    form = re.search(r'<form method="post" action="([^"]+)"\s+class="judge-form"', text)
    if form is None or 'id="judge"' not in text:
        return None
    fields = dict(re.findall(r'name="(submission|version|served)" value="([^"]*)"', text))
    return {"url": html.unescape(form.group(1)), **fields}


def _upcoming_state(text: str) -> dict[str, str] | None:
    """The prefetched document's form state (``<template id="upcoming" data-…>``), if any."""
    tag = re.search(r'<template id="upcoming"([^>]*)>', text)
    if tag is None:
        return None
    data = {k.removeprefix("data-"): v for k, v in _attrs(tag.group(1)).items()}
    if "token" not in data:
        return None
    return {
        "url": data["url"],
        "submission": data["submission"],
        "version": "0",
        "served": data["served"],
        "token": data["token"],
    }


def _gz(body: bytes) -> int:
    return len(gzip.compress(body, compresslevel=6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judgments", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pooljudge-bytes-") as data:
        _setup(data)
        from django.contrib.auth import get_user_model
        from django.test import Client

        client = Client(HTTP_HOST="localhost")
        client.force_login(get_user_model().objects.get(username="grace"))
        home = client.get("/c/pydocs/judge/").content.decode()
        start = re.search(r'href="(/c/pydocs/judge/[^/"]+/)"', home).group(1)
        page = client.get(start, follow=True)
        text = page.content.decode()
        label = re.search(r'name="label" value="(\d+)"', text).group(1)
        current = _panel_state(text)
        upcoming = _upcoming_state(text)
        answers: list[bytes] = []
        panels: list[bytes] = []
        for _ in range(args.judgments):
            # The whole panel of the document on screen, as an htmx GET gives it: the shape every
            # verdict was answered with before.
            panels.append(client.get(current["url"], HTTP_HX_REQUEST="true").content)
            response = client.post(
                current["url"],
                {
                    "label": label,
                    "submission": current["submission"],
                    "version": current["version"],
                    "served": current["served"],
                    "active_ms": "4000",
                    "upcoming": upcoming["token"] if upcoming else "",
                },
                HTTP_HX_REQUEST="true",
            )
            assert response.status_code == 200, (response.status_code, response.get("Location"))
            answers.append(response.content)
            body = response.content.decode()
            if "done-panel" in body:
                break
            whole = _panel_state(body)
            if whole is not None:
                current, upcoming = whole, _upcoming_state(body)
            else:
                current, upcoming = upcoming, _upcoming_state(body)
            if current is None:
                break
    print(f"judgments answered: {len(answers)} (demo campaign, assessor grace)")
    print(f"page loaded once: {len(page.content):,} B raw, {_gz(page.content):,} B gzipped")
    for name, bodies in (("answer per verdict", answers), ("whole panel (before)", panels)):
        raw = [len(b) for b in bodies]
        gz = [_gz(b) for b in bodies]
        print(
            f"{name:>22}: median {statistics.median(raw):,.0f} B raw "
            f"({min(raw):,}-{max(raw):,}), median {statistics.median(gz):,.0f} B gzipped"
        )


if __name__ == "__main__":
    main()
