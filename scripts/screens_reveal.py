"""Screens of reveal after deciding and the gullibility check (issue 20), on a throwaway demo:

    .venv/bin/python scripts/screens_reveal.py --out docs/screens

Starts the demo (scripts/screenshot.py's demo_server) and a fake OpenAI-compatible model on
loopback whose answers are a hash of the passage (0, 1 or 2), and, for two passages in five,
2 once the topic's query terms are appended: a gullible model by construction, for the screens
only. The model judges pool v1 (judge_with_model); a qrels file of made-up people's labels
(0 or 1 by hash: non-relevant on the demo's scale, whose threshold is 2) is imported as
"people-demo"; the gullibility check asks 60 of the pairs both called non-relevant; the
campaign reveals models' labels. Then grace judges one document (the reveal above the next
one: reveal-answer-*), opens it again (reveal-judged-*), and the organiser opens the
gullibility page (gullibility-*), at 1440x900 and 390x844.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshot import CHROMIUM_ARGS, ROOT, demo_server, log_in, open_judging


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


class FakeModel(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        topic = re.search(r"^Topic: (.*)$", prompt, re.M)
        words = set(re.findall(r"\w+", topic.group(1).lower())) if topic else set()
        passage = prompt.split("Passage:", 1)[-1].rsplit("Answer with", 1)[0].strip()
        head, _, last = passage.rpartition("\n\n")
        stuffed = bool(words) and set(last.split()) <= words and bool(last.split())
        original = head if stuffed else passage
        label = _hash(original) % 3
        if stuffed and _hash(original + "gullible") % 5 < 2:
            label = 2
        answer = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": str(label)}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 1},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def manage(data: Path, *args: str) -> str:
    env = {**os.environ, "POOLJUDGE_DATA_DIR": str(data)}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEBUG"):
        env.pop(name, None)
    done = subprocess.run(  # noqa: S603 - our manage.py, fixed arguments
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def manage_or_say(data: Path, *args: str) -> str:
    try:
        return manage(data, *args)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{' '.join(args[:2])}: {exc.stderr or exc.stdout}") from None


PEOPLE_QRELS = """
from pooling.models import PoolEntry
import hashlib, sys
for topic, doc in PoolEntry.objects.filter(pool__campaign__slug="pydocs", pool__version=1)\\
        .values_list("topic__topic_id", "doc_id").order_by("topic__topic_id", "doc_id"):
    h = int(hashlib.sha256(f"{topic} {doc} people".encode()).hexdigest()[:8], 16)
    print(topic, 0, doc, 1 if h % 3 == 0 else 0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="var/screens")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{model.server_address[1]}/v1"
    with demo_server() as (base, data), tempfile.TemporaryDirectory() as tmp:
        print(
            manage(data, "judge_with_model", "pydocs", "--pool", "1", "--endpoint", endpoint,
                   "--model", "qwen2.5-7b-instruct", "--rate", "0", "--concurrency", "8")
        )  # fmt: skip
        qrels = Path(tmp) / "people.qrels"
        printed = manage(data, "shell", "-c", PEOPLE_QRELS).splitlines()
        qrels.write_text("".join(f"{line}\n" for line in printed if len(line.split()) == 4))
        print(
            manage_or_say(data, "import_qrels", "pydocs", str(qrels), "--assessor", "people-demo")
        )
        print(manage(data, "gullibility_check", "pydocs", "--limit", "60", "--rate", "0"))
        manage(
            data,
            "shell",
            "-c",
            "from campaigns.models import Campaign; "
            "Campaign.objects.filter(slug='pydocs').update(reveal_models=True)",
        )
        from playwright.sync_api import sync_playwright

        ns = argparse.Namespace(base=base, data_dir=data, user="grace", password=None)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for width, height in ((1440, 900), (390, 844)):
                size = f"{width}x{height}"
                mobile = {"is_mobile": True, "has_touch": True} if width < 500 else {}
                context = browser.new_context(viewport={"width": width, "height": height}, **mobile)
                page = context.new_page()
                log_in(page, ns, "grace")
                open_judging(page, base, "pydocs", None)
                token = page.locator("#judge").get_attribute("data-item")
                page.keyboard.press("1")
                page.wait_for_function(
                    "t => document.querySelector('#judge').dataset.item !== t", arg=token
                )
                page.wait_for_selector("#judge-reveal:not([hidden])")
                page.wait_for_timeout(400)
                page.screenshot(path=str(out / f"reveal-answer-{size}.png"))
                # On a phone the toast keeps the labels only: open the judged document's address.
                page.goto(base + page.locator("#judge-reveal a").get_attribute("href"))
                page.wait_for_selector(".reveal-list")
                page.wait_for_load_state("networkidle")
                if width < 500:
                    page.locator("#judge-form section.reveal").scroll_into_view_if_needed()
                page.screenshot(path=str(out / f"reveal-judged-{size}.png"))
                context.close()
                context = browser.new_context(viewport={"width": width, "height": height}, **mobile)
                page = context.new_page()
                log_in(page, ns, "organiser")
                page.goto(f"{base}/c/pydocs/assessors/models/gullibility/")
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(out / f"gullibility-{size}.png"))
                context.close()
            browser.close()
    model.shutdown()
    for name in sorted(out.glob("reveal-*.png")) + sorted(out.glob("gullibility-*.png")):
        print(name)


if __name__ == "__main__":
    main()
