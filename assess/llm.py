"""Asking a model for a label: one OpenAI-compatible ``/v1/chat/completions`` call per pair.

Plain Python, no Django (the judging job in ``assess/model_judging.py`` drives it): prompt
rendering, the HTTP call (the standard library's urllib: one POST of JSON needs no client
library, and the web process never loads this module), retries with backoff, a rate limiter
shared by the job's threads, label parsing and label probabilities from logprobs.

Any server speaking the OpenAI chat API works: vLLM (``vllm serve MODEL``, base
``http://host:8000/v1``), Ollama (``http://host:11434/v1``), llama.cpp's server, hosted APIs.
"""

from __future__ import annotations

import json
import math
import re
import string
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TEMPLATE = """\
You are a relevance assessor. Judge how well the passage below meets the information need of the
topic, using the labels of the scale exactly as they are described.

Topic: $title
Description: $description
Narrative: $narrative

Labels:
$labels

Passage:
$document_title
$document

Answer with the number of one label and nothing else."""

# What a template may use; anything else is refused when the configuration is made.
PLACEHOLDERS = ("title", "description", "narrative", "labels", "document_title", "document")
LABEL_RULES = {
    "exact": "the whole answer, stripped, is one label's number",
    "only-integer": "the answer holds exactly one integer, a label's number",
    "json": 'the answer is a JSON object with an integer "label"',
}
# A passage longer than this is cut (and the prompt says so): the per-call cost stays bounded.
MAX_DOCUMENT_CHARS = 20_000
MAX_RETRY_AFTER = 60.0
# A label's answer is a few hundred bytes; a bigger body is a misconfigured endpoint, and it is
# stored raw, so it is refused rather than read whole.
MAX_RESPONSE_BYTES = 1_000_000


class TemplateError(ValueError):
    pass


def check_template(template: str) -> None:
    """Raise TemplateError unless ``template`` uses only the known placeholders, and the
    document."""
    used = set()
    for match in string.Template.pattern.finditer(template):
        if match.group("invalid") is not None:
            raise TemplateError("The prompt template has a lone $; write $$ for a dollar sign.")
        name = match.group("named") or match.group("braced")
        if name and name not in PLACEHOLDERS:
            raise TemplateError(
                f"The prompt template has an unknown placeholder ${name}; it may use "
                + ", ".join(f"${p}" for p in PLACEHOLDERS)
                + "."
            )
        used.add(name)
    if "document" not in used:
        raise TemplateError("The prompt template never shows the document ($document).")


def render_prompt(
    template: str,
    *,
    topic: Mapping[str, str],
    labels: Sequence[tuple[int, str, str]],
    document_title: str,
    document: str,
) -> str:
    """The user message: ``topic`` has title, description, narrative; ``labels`` are
    (value, name, description) in scale order."""
    if len(document) > MAX_DOCUMENT_CHARS:
        document = document[:MAX_DOCUMENT_CHARS] + " [… passage cut]"
    scale = "\n".join(
        f"{value} = {name}" + (f": {description}" if description else "")
        for value, name, description in labels
    )
    return string.Template(template).substitute(
        title=topic.get("title", ""),
        description=topic.get("description", ""),
        narrative=topic.get("narrative", ""),
        labels=scale,
        document_title=document_title,
        document=document,
    )


def chat_url(endpoint: str) -> str:
    """The chat-completions URL from a base (``http://h:11434``, ``…/v1``) or the full URL."""
    base = endpoint.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if base.endswith("/v1"):
        return base + "/chat/completions"
    return base + "/v1/chat/completions"


# --- Parsing ------------------------------------------------------------------------------------

_INTEGER = re.compile(r"(?<![\w.])-?\d+(?![\w.])")


def parse_label(content: str, *, rule: str, scale: set[int]) -> tuple[int | None, str]:
    """(label, "") or (None, why it is not one): an answer is never guessed at."""
    text = content.strip()
    if rule == "exact":
        if re.fullmatch(r"-?\d+", text) is None:
            return None, "the answer is not a single number"
        value = int(text)
    elif rule == "only-integer":
        found = {int(m) for m in _INTEGER.findall(text)}
        if len(found) != 1:
            return None, f"the answer holds {len(found) or 'no'} distinct integers, not one"
        value = found.pop()
    elif rule == "json":
        try:
            data = json.loads(text)
        except ValueError:
            return None, "the answer is not JSON"
        value = data.get("label") if isinstance(data, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            return None, 'the answer has no integer "label"'
    else:
        raise ValueError(f"unknown label rule {rule!r}")
    if value not in scale:
        return None, f"{value} is not a label of the scale"
    return value, ""


def label_probabilities(logprobs: Any, *, label: int, scale: set[int]) -> dict[str, float] | None:
    """The model's distribution over the scale at the token that gave ``label``: the top
    logprobs there whose token is a label, renormalised. None when the endpoint sent none."""
    tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list):
        return None
    for token in tokens:
        if not isinstance(token, dict) or str(token.get("token", "")).strip() != str(label):
            continue
        mass: dict[int, float] = {}
        for alternative in token.get("top_logprobs") or [token]:
            try:
                value = int(str(alternative.get("token", "")).strip())
                logprob = float(alternative["logprob"])
            except (TypeError, ValueError, KeyError, AttributeError):
                continue
            if value in scale and math.isfinite(logprob):
                mass[value] = mass.get(value, 0.0) + math.exp(logprob)
        total = sum(mass.values())
        if total <= 0:
            return None
        return {str(value): p / total for value, p in sorted(mass.items())}
    return None


# --- Calling ------------------------------------------------------------------------------------


class CallFailed(Exception):
    """A call that did not give an answer. ``retryable``: 429, 5xx, timeouts, connections."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None, body: str = ""):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.body = body
        self.retry_after: float | None = None


@dataclass
class Answer:
    status: int
    body: str  # the raw response, as received
    content: str | None  # the message text; None when the body has none
    prompt_tokens: int | None
    completion_tokens: int | None
    logprobs: Any = None
    tries: int = 1
    seconds: float = 0.0


@dataclass(frozen=True)
class Request:
    url: str
    model: str
    prompt: str
    temperature: float
    seed: int | None
    max_tokens: int
    logprobs: bool
    api_key: str | None = field(default=None, repr=False)

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": self.prompt}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 10
        return body


def post(request: Request, *, timeout: float) -> Answer:
    """One HTTP call; CallFailed when it gives no answer. ``timeout`` bounds each socket wait."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if request.api_key:
        headers["Authorization"] = f"Bearer {request.api_key}"
    data = json.dumps(request.payload()).encode()
    if not request.url.startswith(("http://", "https://")):
        raise CallFailed(f"not an http(s) URL: {request.url}", retryable=False)
    http = urllib.request.Request(request.url, data=data, headers=headers, method="POST")  # noqa: S310 (scheme checked above)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:  # noqa: S310
            status = response.status
            raw = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        body = _text(exc.read() if exc.fp is not None else b"")
        retryable = exc.code == 429 or exc.code >= 500
        failed = CallFailed(f"HTTP {exc.code}", retryable=retryable, status=exc.code, body=body)
        failed.retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        raise failed from None
    except TimeoutError:
        raise CallFailed(f"no answer within {timeout:g} s", retryable=True) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise CallFailed(f"no answer within {timeout:g} s", retryable=True) from None
        raise CallFailed(f"cannot connect: {reason}", retryable=True) from None
    except (ConnectionError, OSError) as exc:
        raise CallFailed(f"connection failed: {exc}", retryable=True) from None
    if len(raw) > MAX_RESPONSE_BYTES:
        raise CallFailed(
            f"the response is larger than {MAX_RESPONSE_BYTES:,} bytes: not a label",
            retryable=False,
            status=status,
            body=_text(raw[:2000]),
        )
    body = _text(raw)
    answer = Answer(status, body, None, None, None, seconds=time.monotonic() - started)
    try:
        data = json.loads(body)
    except ValueError:
        return answer  # recorded raw; the caller finds no content in it
    if isinstance(data, dict):
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        answer.prompt_tokens = _int(usage.get("prompt_tokens"))
        answer.completion_tokens = _int(usage.get("completion_tokens"))
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                answer.content = message["content"]
            answer.logprobs = choices[0].get("logprobs")
    return answer


def call(
    request: Request,
    *,
    timeout: float,
    retries: int,
    backoff: float,
    limiter: RateLimiter | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Answer:
    """``post`` with up to ``retries`` retries of retryable failures, waiting ``backoff * 2**n``
    seconds (or the server's Retry-After, up to a minute). Raises the last CallFailed."""
    for attempt in range(retries + 1):
        if limiter is not None:
            limiter.wait()
        try:
            answer = post(request, timeout=timeout)
        except CallFailed as failed:
            failed.tries = attempt + 1  # type: ignore[attr-defined]
            if not failed.retryable or attempt == retries:
                raise
            wait = failed.retry_after if failed.retry_after is not None else backoff * 2**attempt
            sleep(min(wait, MAX_RETRY_AFTER))
            continue
        answer.tries = attempt + 1
        return answer
    raise AssertionError("unreachable")


class RateLimiter:
    """At most ``per_minute`` calls a minute across threads, evenly spaced (0: no limit)."""

    def __init__(self, per_minute: float, *, clock: Callable[[], float] = time.monotonic):
        self.interval = 60.0 / per_minute if per_minute > 0 else 0.0
        self._clock = clock
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < math.inf else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
