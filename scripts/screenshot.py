"""Screenshot pages of a running Pooljudge in Debian's headless Chromium (for reviewing screens).

    python scripts/screenshot.py --base http://127.0.0.1:8000 --user organiser --password … \
        --out docs/screens /c/demo/ /c/demo/files/

Each path becomes a PNG named after it. Logs in first when --user is given.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--out", default="var/screens")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--full-page", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0, help="device scale (2 = 200% zoom)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(
            viewport={"width": args.width, "height": args.height},
            device_scale_factor=args.scale,
        )
        if args.user:
            page.goto(f"{args.base}/accounts/login/")
            page.fill("#id_username", args.user)
            page.fill("#id_password", args.password or "")
            page.click("button.primary")
            page.wait_for_load_state("networkidle")
        for path in args.paths:
            page.goto(f"{args.base}{path}")
            page.wait_for_load_state("networkidle")
            name = re.sub(r"[^a-zA-Z0-9]+", "-", path).strip("-") or "home"
            target = out / f"{name}-{args.width}x{args.height}.png"
            page.screenshot(path=str(target), full_page=args.full_page)
            print(target)
        browser.close()


if __name__ == "__main__":
    main()
