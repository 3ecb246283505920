"""A real OpenAI-compatible chat server on loopback for tests, answering from directives in the
prompt's document text: ``ANSWER-n`` (label n, with usage and logprobs when asked), ``CHATTY``
(prose, no label), ``NOTJSON`` (a 200 that is not JSON), ``SLOW`` (answers after ``slow``
seconds), ``HUGE`` (a 2 MB body), ``BUSY-k`` (429 the first k times, then label 1), ``DOWN``
(503 always), ``PAUSE`` (label 1 after ``pause`` seconds: a call that is out long enough to kill
a worker during it), ``GULLIBLE`` (label 0, or 2 when a word of the prompt's ``Topic:`` line
follows the directive in the document: the query terms stuffed into it flip the label)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIRECTIVE = re.compile(
    r"\b(ANSWER-\d+|CHATTY|NOTJSON|SLOW|BUSY-\d+|DOWN|PAUSE|HUGE|GULLIBLE)-?(\w*)"
)


def _stuffed(prompt: str, after: int) -> bool:
    """Whether a word (4+ letters) of the prompt's topic line occurs after position ``after``."""
    line = re.search(r"^Topic: (.*)$", prompt, re.M)
    words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", line.group(1))} if line else set()
    return any(w.lower() in words for w in re.findall(r"[A-Za-z]{4,}", prompt[after:]))


class FakeModel:
    def __init__(self, *, slow: float = 1.0, pause: float = 0.0, on_request=None) -> None:
        self.on_request = on_request  # called with the request count before each answer
        self.slow = slow
        self.pause = pause
        self.hits: Counter[str] = Counter()  # per directive+suffix (one per document)
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                match = DIRECTIVE.search(prompt)
                key = match.group(0) if match else "?"
                with fake.lock:
                    fake.hits[key] += 1
                    fake.requests.append(body)
                    fake.headers.append(dict(self.headers))
                    count = fake.hits[key]
                    total = sum(fake.hits.values())
                if fake.on_request is not None:
                    fake.on_request(total)
                directive = match.group(1) if match else "ANSWER-0"
                if directive == "DOWN":
                    return self._send(503, b'{"error": "overloaded"}')
                if directive.startswith("BUSY-") and count <= int(directive[5:]):
                    return self._send(429, b'{"error": "rate"}', {"Retry-After": "0"})
                if directive == "SLOW":
                    time.sleep(fake.slow)
                if directive == "PAUSE":
                    time.sleep(fake.pause)
                if directive == "HUGE":
                    return self._send(200, b" " * 2_000_000)
                if directive == "NOTJSON":
                    return self._send(200, b"<html>gateway says hello</html>")
                content = (
                    "It seems relevant to me."
                    if directive == "CHATTY"
                    else (directive[7:] if directive.startswith("ANSWER-") else "1")
                )
                if directive == "GULLIBLE":
                    content = "2" if _stuffed(prompt, match.end()) else "0"
                choice = {"index": 0, "message": {"role": "assistant", "content": content}}
                if body.get("logprobs"):
                    choice["logprobs"] = {
                        "content": [
                            {
                                "token": content,
                                "logprob": -0.2,
                                "top_logprobs": [
                                    {"token": content, "logprob": -0.2},
                                    {"token": "0" if content != "0" else "1", "logprob": -1.9},
                                    {"token": "Sure", "logprob": -3.0},
                                ],
                            }
                        ]
                    }
                answer = {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [choice],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101},
                }
                self._send(200, json.dumps(answer).encode())

            def _send(self, status: int, data: bytes, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                # A client that timed out has gone away, as it should.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
