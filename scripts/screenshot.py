"""Screenshot pages of a running Pooljudge in Debian's headless Chromium (for reviewing screens).

    python scripts/screenshot.py --base http://127.0.0.1:8000 --user organiser --password … \
        --out docs/screens /c/demo/ /c/demo/files/

Each path becomes a PNG named after it. Logs in first when --user is given; without --password
the login is read from the data directory's local-accounts.json (where `manage.py demo` keeps it).

--judge SLUG also takes the judging screen: the logged-in assessor opens their first assignment
in campaign SLUG (with --topic, the assignment that lists that topic) and the screen is saved as
OUT/judging.png (--name changes the name). --demo starts a throwaway Pooljudge of its own (a
temporary data directory, `manage.py demo`, runserver on a free port) and stops it afterwards,
so the README's judging screen is one command:

    .venv/bin/python scripts/screenshot.py --demo --user grace --judge pydocs --topic 004 \
        --width 1440 --height 900 --out docs/screens

--flow SLUG takes the assessor's pages beside the judging screen: the assessor judges the first
three documents of their assignment in campaign SLUG (with --topic, the one listing that topic)
and skips the fourth, then the assignment page, the topic's list of judged and skipped documents
and the keys page are saved as OUT/flow-*-WIDTHxHEIGHT.png; with --organiser USER also the
campaign's settings, the highlighting preview and the progress page (with the skip):

    .venv/bin/python scripts/screenshot.py --demo --user ada --flow pydocs \
        --organiser organiser --width 1440 --height 900 --out docs/screens

--screen SLUG takes the judging screen's own states as OUT/judge-*-WIDTHxHEIGHT.png: judging,
guidelines open, the topic's list with two skipped documents, a topic break, the revise list and
(with --organiser, who switches term highlighting on in the settings) highlighting:

    .venv/bin/python scripts/screenshot.py --demo --user grace --screen pydocs --topic 011 \
        --organiser organiser --width 390 --height 844 --out docs/screens
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def demo_server() -> Iterator[tuple[str, Path]]:
    """An embedded Pooljudge (SQLite, tasks in-process) holding the demo campaign, in a temporary
    data directory; yields its address and that directory, and stops it afterwards."""
    with tempfile.TemporaryDirectory(prefix="pooljudge-screens-") as data:
        env = {**os.environ, "POOLJUDGE_DATA_DIR": data}
        for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEBUG"):
            env.pop(name, None)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        manage = [sys.executable, str(ROOT / "manage.py")]
        quiet = {"env": env, "cwd": ROOT, "check": True, "stdout": subprocess.DEVNULL}
        print(f"Building the demo campaign in {data} …", file=sys.stderr)
        # Our own manage.py with fixed arguments, never a shell.
        subprocess.run([*manage, "migrate", "--noinput"], **quiet)  # noqa: S603
        subprocess.run([*manage, "demo", "--url", f"{base}/"], **quiet)  # noqa: S603
        server = subprocess.Popen(  # noqa: S603
            [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=2).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("The demo server did not start.") from None
                    time.sleep(0.3)
            yield base, Path(data)
        finally:
            server.terminate()
            server.wait(timeout=10)


def stored_password(data_dir: Path, user: str) -> str | None:
    path = data_dir / "local-accounts.json"
    return json.loads(path.read_text()).get(user) if path.exists() else None


def open_judging(page, base: str, slug: str, topic: str | None) -> None:
    """From the assessor's campaign page, start (or continue) judging an assignment."""
    page.goto(f"{base}/c/{slug}/judge/")
    cards = page.locator("section.assignment")
    if topic:
        cell = page.locator("td.mono", has_text=re.compile(rf"^\s*{re.escape(topic)}\s*$"))
        cards = cards.filter(has=cell)
    if cards.count() == 0:
        raise SystemExit(f"No assignment{f' with topic {topic}' if topic else ''} in {slug}.")
    cards.first.locator("a.button.primary").click()
    page.wait_for_selector("#judge[data-item]")
    page.wait_for_load_state("networkidle")


def take_flow(page, args: argparse.Namespace, out: Path) -> None:
    """Judge three documents with the keyboard, skip the next one, and save the flow's pages."""
    import uuid

    open_judging(page, args.base, args.flow, args.topic)
    for key in ("1", "2", "0"):
        page.keyboard.press(key)
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(300)
    page.reload()
    page.wait_for_selector("#judge[data-item]")
    item = page.locator("#judge").get_attribute("data-item")
    judge_url = page.url.rstrip("/")
    token = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    response = page.request.post(
        f"{judge_url}/skip/",
        form={"csrfmiddlewaretoken": token, "submission": str(uuid.uuid4())},
        headers={"Referer": page.url},
        max_redirects=0,
    )
    if response.status != 303:
        raise SystemExit(f"Skipping {item} answered {response.status}.")
    assignment = judge_url.rsplit("/", 1)[0]
    page.goto(f"{args.base}/c/{args.flow}/judge/")
    revise = page.locator("section.assignment a[href*='/topics/']").first.get_attribute("href")
    size = f"{args.width}x{args.height}"
    shots = [
        (f"{args.base}/c/{args.flow}/judge/", "flow-assignments"),
        (f"{args.base}{revise}", "flow-revise"),
        (f"{assignment}/keys/?item={item}", "flow-keys"),
    ]
    if args.organiser:
        context = page.context.browser.new_context(
            viewport={"width": args.width, "height": args.height},
            device_scale_factor=args.scale,
        )
        organiser = context.new_page()
        log_in(organiser, args, args.organiser)
        campaign = f"{args.base}/c/{args.flow}"
        shots += [
            (f"{campaign}/settings/", "flow-settings"),
            (f"{campaign}/highlighting/", "flow-highlighting"),
            (f"{campaign}/progress/", "flow-progress"),
        ]
    for url, name in shots:
        shooter = organiser if args.organiser and name in ORGANISER_SHOTS else page
        shooter.goto(url)
        shooter.wait_for_load_state("networkidle")
        target = out / f"{name}-{size}.png"
        shooter.screenshot(path=str(target), full_page=args.full_page)
        print(target)


ORGANISER_SHOTS = {"flow-settings", "flow-highlighting", "flow-progress"}


def _moved_on(page, token: str) -> None:
    page.wait_for_function(
        "token => { const judge = document.querySelector('#judge');"
        " return !judge || judge.dataset.item !== token"
        " || !!document.querySelector('.topic-break'); }",
        arg=token,
    )


def take_screen(page, args: argparse.Namespace, out: Path) -> None:
    """The judging screen's own states: judging, the guidelines open, two documents skipped (the
    topic's list with them), a topic break after the topic's last document, the revise list of
    the finished topic, and (with --organiser, who switches highlighting on) terms marked."""
    size = f"{args.width}x{args.height}"

    def shot(name: str) -> None:
        page.wait_for_timeout(250)
        target = out / f"judge-{name}-{size}.png"
        page.screenshot(path=str(target), full_page=args.full_page)
        print(target)

    open_judging(page, args.base, args.screen, args.topic)
    shot("judging")
    page.keyboard.press("g")
    shot("guidelines")
    page.keyboard.press("g")
    for key in ("1", "s", "2", "s"):
        token = page.locator("#judge").get_attribute("data-item")
        page.keyboard.press(key)
        _moved_on(page, token)
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")
    revise = page.locator('#judge [data-nav="revise"]').get_attribute("href")
    here = page.url
    page.goto(f"{args.base}{revise}")
    shot("skipped")
    page.goto(here)
    page.wait_for_selector("#judge[data-item]")
    for _ in range(200):
        if page.locator(".topic-break").count():
            break
        token = page.locator("#judge").get_attribute("data-item")
        page.keyboard.press("1")
        _moved_on(page, token)
    page.wait_for_function("() => document.body.dataset.unsaved === '0'")
    shot("topic-break")
    here = page.url
    page.goto(f"{args.base}{revise}")
    shot("revise")
    if args.organiser:
        context = page.context.browser.new_context(
            viewport={"width": args.width, "height": args.height},
            device_scale_factor=args.scale,
        )
        organiser = context.new_page()
        log_in(organiser, args, args.organiser)
        organiser.goto(f"{args.base}/c/{args.screen}/settings/")
        organiser.check("#id_highlight_terms")
        organiser.locator("form button.primary").first.click()
        organiser.wait_for_load_state("networkidle")
        context.close()
        page.goto(here)
        page.wait_for_selector("#judge[data-item]")
        if page.locator(".topic-break").count():
            page.keyboard.press("Enter")
        # On a phone the window scrolls: bring the document's title (and its marks) into view.
        page.evaluate(
            "() => window.scrollTo(0, document.querySelector('.doc-view .doc-title')"
            ".getBoundingClientRect().top + window.pageYOffset - 8)"
        )
        shot("highlighting")


def log_in(page, args: argparse.Namespace, user: str) -> None:
    password = args.password if user == args.user and args.password else None
    password = password or stored_password(args.data_dir, user) or ""
    page.goto(f"{args.base}/accounts/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("button.primary")
    page.wait_for_load_state("networkidle")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--demo", action="store_true", help="run a throwaway demo server")
    parser.add_argument("--user")
    parser.add_argument("--password", help="default: the login kept in the data directory")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("POOLJUDGE_DATA_DIR", ROOT / "var")),
        help="where local-accounts.json is (default: $POOLJUDGE_DATA_DIR or var/)",
    )
    parser.add_argument("--judge", metavar="SLUG", help="also take the judging screen")
    parser.add_argument("--topic", help="with --judge: the assignment listing this topic")
    parser.add_argument("--name", default="judging", help="with --judge: the PNG's name")
    parser.add_argument("--flow", metavar="SLUG", help="also take the assessor's flow pages")
    parser.add_argument(
        "--organiser", metavar="USER", help="with --flow: also the organiser's pages, as USER"
    )
    parser.add_argument(
        "--screen", metavar="SLUG", help="the judging screen's states (judge-*-WxH.png)"
    )
    parser.add_argument("--out", default="var/screens")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--full-page", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0, help="device scale (2 = 200%% zoom)")
    args = parser.parse_args()
    if not args.paths and not args.judge and not args.flow and not args.screen:
        parser.error("give paths to screenshot, or --judge SLUG, --flow SLUG or --screen SLUG")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.demo:
            args.base, args.data_dir = stack.enter_context(demo_server())
        take(args, out)


def take(args: argparse.Namespace, out: Path) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(
            viewport={"width": args.width, "height": args.height},
            device_scale_factor=args.scale,
        )
        if args.user:
            log_in(page, args, args.user)
        for path in args.paths:
            page.goto(f"{args.base}{path}")
            page.wait_for_load_state("networkidle")
            name = re.sub(r"[^a-zA-Z0-9]+", "-", path).strip("-") or "home"
            target = out / f"{name}-{args.width}x{args.height}.png"
            page.screenshot(path=str(target), full_page=args.full_page)
            print(target)
        if args.judge:
            open_judging(page, args.base, args.judge, args.topic)
            target = out / f"{args.name}.png"
            page.screenshot(path=str(target), full_page=args.full_page)
            print(target)
        if args.flow:
            take_flow(page, args, out)
        if args.screen:
            take_screen(page, args, out)
        browser.close()


if __name__ == "__main__":
    main()
