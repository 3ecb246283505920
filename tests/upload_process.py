"""One big upload through the whole Django stack, in a process of its own, to measure its memory.

    python -m tests.upload_process --slug SLUG --mb 300 [--files 1] [--gzip] [--cap-mb 200]
    python -m tests.upload_process --to evaluation --mb 20      # a qrels file to score against

Run by ``tests/imports/test_upload_memory.py`` (under a memory cap) and ``bench/upload_memory.py``
(printing the peak). DATABASE_URL names a database that is migrated; the campaign ``SLUG`` and an
organiser are created in it if missing. The multipart body is written to a file first and fed to
Django's WSGI handler as a stream (the test client would build it in memory), so the process's
peak resident set is what the Files page's upload view costs (or, with ``--to evaluation``, the
evaluation page's, given a qrels file). The job is queued but not sent: the request is what is
measured (the import's memory is bench/import_runs.py's business).

With ``--cap-mb M`` the process's address space is capped at its size after warming up plus M MB
(``resource.setrlimit(RLIMIT_AS)``): an upload that needs more fails with MemoryError.

Prints one JSON object: the response status, the stored uploads (size, sha256 and whether the
stored bytes hash to it), the resident set before the upload and its peak during the upload
(VmRSS, then VmHWM after resetting it, in kB), and the seconds taken.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BOUNDARY = "pooljudge-upload-process-boundary"
RUN_LINE = "{topic}\tQ0\tdoc{doc:07d}\t{rank}\t{score:.4f}\tbig\n"
QRELS_LINE = "{topic}\t0\tdoc{doc:07d}\t{label}\n"
# Where each kind of file goes: the page, its file field, its other fields, the file's lines.
TARGETS = {
    "runs": ("runs-files", {}, "run"),
    "evaluation": ("qrels", {"action": "upload", "on_conflict": "refuse"}, "qrels"),
}


def text(target_bytes: int, kind: str) -> bytes:
    """About ``target_bytes`` of run or qrels lines, each document once."""
    lines, size, doc = [], 0, 0
    while size < target_bytes:
        if kind == "run":
            line = RUN_LINE.format(
                topic=doc // 1000 + 1, doc=doc, rank=doc % 1000 + 1, score=1e6 - doc
            )
        else:
            line = QRELS_LINE.format(topic=doc // 1000 + 1, doc=doc, label=doc % 3)
        lines.append(line)
        size += len(line)
        doc += 1
    return "".join(lines).encode()


def write_body(
    path: Path, *, files: int, mb: float, compress: bool, to: str = "runs"
) -> list[tuple[str, str, int]]:
    """A multipart/form-data body with ``files`` files of ``mb`` MB each (to the end of a
    line), written in pieces (never whole in memory); each repeats one block of distinct lines.
    Returns (name, sha256, size) per file."""
    field, fields, kind = TARGETS[to]
    block = text(4 * 1024 * 1024, kind)
    written = []
    with open(path, "wb") as body:
        for name, value in fields.items():
            body.write(
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                f"{value}\r\n".encode()
            )
        for index in range(files):
            name = f"big{index}.{kind}" + (".gz" if compress else "")
            body.write(
                (
                    f"--{BOUNDARY}\r\n"
                    f'Content-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
                    "Content-Type: application/octet-stream\r\n\r\n"
                ).encode()
            )
            digest, size = hashlib.sha256(), 0
            deflate = zlib.compressobj(1, zlib.DEFLATED, 31) if compress else None
            remaining = int(mb * 1024 * 1024)
            while remaining > 0:
                if remaining < len(block):
                    piece = block[: block.index(b"\n", remaining - 1) + 1]  # whole lines
                else:
                    piece = block
                remaining -= len(piece)
                if deflate is not None:
                    piece = deflate.compress(piece)
                digest.update(piece)
                size += len(piece)
                body.write(piece)
            if deflate is not None:
                tail = deflate.flush()
                digest.update(tail)
                size += len(tail)
                body.write(tail)
            body.write(b"\r\n")
            written.append((name, digest.hexdigest(), size))
        body.write(f"--{BOUNDARY}--\r\n".encode())
    return written


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Start the peak resident set (VmHWM) afresh from now (Linux 4.0+): writing the body and
    the warm-up raised it, and only the upload is to be measured."""
    Path("/proc/self/clear_refs").write_text("5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slug", default="upload-memory")
    parser.add_argument("--mb", type=float, required=True, help="size of each file")
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--gzip", action="store_true", help="upload gzipped run files")
    parser.add_argument("--cap-mb", type=int, default=0, help="address-space cap above warm-up")
    parser.add_argument("--to", choices=sorted(TARGETS), default="runs", help="which page")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.client import ClientHandler, RequestFactory
    from django.urls import reverse

    from campaigns import jobs
    from campaigns.members import add_member
    from campaigns.models import Campaign, Upload
    from campaigns.uploads import CHUNK_BYTES

    # The request is measured, not the import: queue the job, never run it here.
    jobs.send = lambda job_id: None

    campaign, _ = Campaign.objects.get_or_create(slug=args.slug, defaults={"title": "Uploads"})
    user, created = get_user_model().objects.get_or_create(username="upload-organiser")
    if created:
        add_member(campaign=campaign, user=user, role="organiser")
    client = Client()
    client.force_login(user)
    cookie = "; ".join(f"{key}={morsel.value}" for key, morsel in client.cookies.items())
    handler = ClientHandler(enforce_csrf_checks=False)
    if args.to == "runs":
        path = reverse("campaigns:upload", args=[campaign.slug, "runs"])
    else:
        path = reverse("qrels:evaluation", args=[campaign.slug])

    def post(body_path: Path) -> int:
        with open(body_path, "rb") as stream:
            environ = RequestFactory()._base_environ(
                PATH_INFO=path,
                REQUEST_METHOD="POST",
                CONTENT_TYPE=f"multipart/form-data; boundary={BOUNDARY}",
                CONTENT_LENGTH=str(body_path.stat().st_size),
                HTTP_COOKIE=cookie,
                HTTP_X_FORWARDED_PROTO="https",
                HTTP_REFERER="https://testserver/",
                **{"wsgi.input": stream, "wsgi.url_scheme": "https"},
            )
            return handler(environ).status_code

    with tempfile.TemporaryDirectory(prefix="pooljudge-upload-") as scratch:
        scratch_path = Path(scratch)
        # Warm up: every module, template and connection the upload needs, on a small file.
        warm = scratch_path / "warm.body"
        write_body(warm, files=1, mb=0.25, compress=args.gzip, to=args.to)
        assert post(warm) == 302, "the warm-up upload was refused"
        body = scratch_path / "big.body"
        expected = write_body(body, files=args.files, mb=args.mb, compress=args.gzip, to=args.to)
        before_pk = Upload.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        reset_peak()
        baseline = status_kb("VmRSS")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if args.cap_mb:
            cap = status_kb("VmSize") * 1024 + args.cap_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        started = time.perf_counter()
        try:
            status = post(body)
            error = ""
        except MemoryError:
            status, error = 0, "MemoryError"
        seconds = time.perf_counter() - started
        peak = status_kb("VmHWM")
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    stored = []
    for upload in Upload.objects.filter(pk__gt=before_pk).order_by("pk"):
        digest = hashlib.sha256()
        for data in upload.chunks.order_by("seq").values_list("data", flat=True).iterator(2):
            digest.update(data)
        stored.append(
            {
                "name": upload.name,
                "size": upload.size,
                "sha256": upload.sha256,
                "bytes_match": digest.hexdigest() == upload.sha256,
            }
        )
    print(
        json.dumps(
            {
                "status": status,
                "error": error,
                "expected": [{"name": n, "sha256": s, "size": z} for n, s, z in expected],
                "stored": stored,
                "baseline_kb": baseline,
                "peak_kb": peak,
                "seconds": round(seconds, 2),
                "chunk_bytes": CHUNK_BYTES,
            }
        )
    )


if __name__ == "__main__":
    main()
