"""Uploaded files and the importers that consume them.

Each app registers the importers for the data it owns (campaigns: topics and documents; pooling:
runs; qrels: qrels) in its ``AppConfig.ready``. The campaign's Files page lists the registry and
sends each upload to its importer's task by name, so no app imports an app above it.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile as DjangoUploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile, StopUpload
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from campaigns.models import Campaign, Job, Upload, UploadChunk

CHUNK_BYTES = 4 * 1024 * 1024
# Compressed bytes of an upload inflated in the request to catch a gzip bomb (see _GzipCheck).
GZIP_CHECK_BYTES = 64 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
# Formats that are certainly not text files (or gzip of one).
BINARY_SIGNATURES = {
    b"\x89PNG": "a PNG image",
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a zip archive",
    b"\x7fELF": "an executable",
    b"GIF8": "a GIF image",
    b"\xff\xd8\xff": "a JPEG image",
    b"BZh": "a bzip2 archive",
    b"\xfd7zXZ": "an xz archive",
    b"SQLite format": "a SQLite database",
}
_SAFE_NAME = re.compile(r"^[\w.+-][\w .+()-]{0,200}$")


class UploadRefused(ValueError):
    """The file cannot be accepted; nothing was stored."""


@dataclass(frozen=True)
class Importer:
    kind: str
    title: str
    task_name: str
    help: str
    multiple: bool = False
    formats: tuple[str, ...] = ()
    options: tuple[str, ...] = field(default=())


IMPORTERS: dict[str, Importer] = {}


def register(importer: Importer) -> None:
    IMPORTERS[importer.kind] = importer


def check_name(name: str) -> str:
    """The file name as given, if it is a plain name; path parts and control characters are
    refused rather than cleaned, so what is stored is what the user sees."""
    if "/" in name or "\\" in name or name in {".", ".."} or name.startswith(".."):
        raise UploadRefused(f"The file name {name!r} contains a path; upload a plain file.")
    if not _SAFE_NAME.match(name):
        raise UploadRefused(
            f"The file name {name!r} has characters other than letters, digits, spaces "
            "and . _ - + ( )."
        )
    return name


def sniff(head: bytes, name: str) -> None:
    """Refuse files that are plainly not text (or gzipped text)."""
    if head.startswith(GZIP_MAGIC):
        return
    for signature, what in BINARY_SIGNATURES.items():
        if head.startswith(signature):
            raise UploadRefused(f"{name} is {what}, not a text file.")
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UploadRefused(f"{name} contains NUL bytes: it is not a text file.")


def human_bytes(count: float) -> str:
    """``1 GiB``, ``200 MiB``, ``100 bytes``: a limit as people read it."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:.3g} {unit}"
        count /= 1024
    return f"{count:,.3g} TiB"


@dataclass(frozen=True)
class Limits:
    """What one upload may hold (settings POOLJUDGE_MAX_UPLOAD_*), as the Files page states it."""

    files: int
    file_bytes: int
    total_bytes: int

    @classmethod
    def current(cls) -> Limits:
        return cls(
            files=settings.POOLJUDGE_MAX_UPLOAD_FILES,
            file_bytes=settings.POOLJUDGE_MAX_UPLOAD_BYTES,
            total_bytes=settings.POOLJUDGE_MAX_UPLOAD_TOTAL_BYTES,
        )

    @property
    def file_count(self) -> str:
        return f"{self.files:,}"

    @property
    def file_size(self) -> str:
        return human_bytes(self.file_bytes)

    @property
    def total_size(self) -> str:
        return human_bytes(self.total_bytes)

    def file_too_big(self, name: str) -> str:
        return (
            f"{name} is larger than the limit of {human_bytes(self.file_bytes)} per file; "
            "nothing was stored. Import bigger files with the command line."
        )

    def too_many_files(self) -> str:
        return (
            f"More than {self.files:,} files were sent at once; nothing was stored. Upload them "
            f"in batches of at most {self.files:,}, or import them with the command line."
        )

    def too_much_in_all(self) -> str:
        return (
            f"The files sent at once come to more than {human_bytes(self.total_bytes)}; nothing "
            "was stored. Upload them in smaller batches, or import them with the command line."
        )


class UploadLimits(FileUploadHandler):
    """First of ``FILE_UPLOAD_HANDLERS``: counts the files and bytes of a multipart request while
    it streams in, before any handler stores them, and stops a file (or the whole request) the
    moment it passes a limit. The refusal is left on ``request.upload_refusals`` for the view to
    show on its page; what was refused never reaches a view (Django's own 100-file limit
    would answer a bare "Bad Request (400)" instead, so it is set above this one)."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.limits = Limits.current()
        self.files = 0
        self.total = 0
        self.file_size = 0
        if content_length and content_length > self.limits.total_bytes + 1024 * 1024:
            self._refuse(self.limits.too_much_in_all())
            raise StopUpload(connection_reset=False)

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.files += 1
        self.file_size = 0
        if self.files > self.limits.files:
            self._refuse(self.limits.too_many_files())
            raise StopUpload(connection_reset=False)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.file_size += len(raw_data)
        self.total += len(raw_data)
        if self.total > self.limits.total_bytes:
            self._refuse(self.limits.too_much_in_all())
            raise StopUpload(connection_reset=False)
        if self.file_size > self.limits.file_bytes:
            self._refuse(self.limits.file_too_big(self.file_name))
            raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None

    def _refuse(self, message: str) -> None:
        if self.request is not None:
            refusals = getattr(self.request, "upload_refusals", [])
            refusals.append(message)
            self.request.upload_refusals = refusals


def upload_refusals(request) -> list[str]:
    """The limits a request's files passed while they streamed in (see UploadLimits)."""
    return list(getattr(request, "upload_refusals", []))


class _GzipCheck:
    """Inflates a gzip upload as it streams in (never whole, in bounded pieces) and refuses a
    gzip bomb. Only the first GZIP_CHECK_BYTES are inflated in the request, which is where a bomb
    shows (its point is a small input); the import reads the whole file within the same ratio."""

    def __init__(self, name: str, size: int | None) -> None:
        self.name = name
        self.size = size
        self.inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
        self.fed = 0
        self.total = 0

    def limit(self, size: int) -> int:
        return max(settings.POOLJUDGE_MAX_GZIP_RATIO * size, 1024 * 1024)

    def feed(self, block: memoryview) -> None:
        if self.fed >= GZIP_CHECK_BYTES:
            return
        block = block[: GZIP_CHECK_BYTES - self.fed]
        self.fed += len(block)
        limit = self.limit(self.size if self.size is not None else GZIP_CHECK_BYTES)
        # Small slices in, bounded pieces out: zlib's copies of unconsumed input stay small.
        for start in range(0, len(block), 64 * 1024):
            data: bytes | memoryview = block[start : start + 64 * 1024]
            try:
                while data:
                    self.total += len(self.inflater.decompress(data, 1024 * 1024))
                    if self.total > limit:
                        self.refuse()
                    data = self.inflater.unconsumed_tail
                    if self.inflater.eof:
                        rest = self.inflater.unused_data
                        self.inflater = zlib.decompressobj(wbits=47)  # concatenated members
                        data = rest + data
            except zlib.error:
                raise UploadRefused(f"{self.name} is not a valid gzip file.") from None

    def finish(self, size: int) -> None:
        if self.total > self.limit(size):
            self.refuse()

    def refuse(self) -> None:
        raise UploadRefused(
            f"{self.name} expands more than {settings.POOLJUDGE_MAX_GZIP_RATIO}x when "
            "decompressed; refusing it as a possible gzip bomb."
        )


def _blocks(file) -> Iterator[memoryview]:
    """The file's bytes in blocks of CHUNK_BYTES (the last one shorter), each read into the same
    buffer: whatever the file's size, one chunk is held. A block is valid until the next."""
    buffer = memoryview(bytearray(CHUNK_BYTES))
    filled = 0
    readinto = getattr(file, "readinto", None)
    if readinto is not None and callable(getattr(file, "seek", None)):
        file.seek(0)
        while True:
            count = readinto(buffer[filled:])
            filled += count or 0
            if filled == CHUNK_BYTES or (not count and filled):
                yield buffer[:filled]
                filled = 0
            if not count:
                return
    for piece in file.chunks(CHUNK_BYTES):  # a file object without readinto
        piece = memoryview(piece)
        while piece:
            taken = piece[: CHUNK_BYTES - filled]
            buffer[filled : filled + len(taken)] = taken
            filled += len(taken)
            piece = piece[len(taken) :]
            if filled == CHUNK_BYTES:
                yield buffer
                filled = 0
    if filled:
        yield buffer[:filled]


class _ChunkWriter:
    """Stores an upload's chunks as they are read. On PostgreSQL one binary COPY carries them,
    each written in pieces a fraction of a chunk long, so that psycopg and libpq never hold a
    whole chunk beside the one being read; on SQLite each chunk is one INSERT (SQLite copies the
    bound bytes once). Both bypass Django's cursor, which with DEBUG on keeps every statement
    with its parameters (here, the bytes as text)."""

    PIECE = 128 * 1024
    SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)

    def __init__(self, upload: Upload) -> None:
        self.upload = upload
        self.seq = 0
        self._stack = contextlib.ExitStack()
        self._copy = None

    def __enter__(self) -> _ChunkWriter:
        quote = connection.ops.quote_name
        table = quote(UploadChunk._meta.db_table)
        columns = ", ".join(map(quote, ("upload_id", "seq", "data")))
        self._cursor = self._stack.enter_context(connection.cursor()).cursor
        if connection.vendor == "postgresql":
            statement = f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"
            self._copy = self._stack.enter_context(self._cursor.copy(statement))
            self._copy.write(self.SIGNATURE)
        self._insert = f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s)"  # noqa: S608
        return self

    def write(self, block: memoryview) -> None:
        if self._copy is None:
            self._cursor.execute(self._insert, [self.upload.pk, self.seq, block])
        else:
            # One row: three fields, a bigint, an integer, and the bytes with their length.
            self._copy.write(struct.pack("!hiqiii", 3, 8, self.upload.pk, 4, self.seq, len(block)))
            for start in range(0, len(block), self.PIECE):
                self._copy.write(block[start : start + self.PIECE])
        self.seq += 1

    def __exit__(self, *exc_info) -> bool | None:
        # Leaving with an exception ends the COPY with CopyFail; the transaction rolls back.
        if self._copy is not None and exc_info[0] is None:
            self._copy.write(b"\xff\xff")
        return self._stack.__exit__(*exc_info)


@transaction.atomic
def store_upload(*, campaign: Campaign, kind: str, file: DjangoUploadedFile, user=None) -> Upload:
    """Store an uploaded file's bytes in the database as they are read, holding one chunk
    whatever the file's size. Raises UploadRefused (and stores nothing: the transaction rolls
    back) for a bad name, an oversize, empty or non-text file, or a gzip bomb."""
    name = check_name(file.name or "")
    limits = Limits.current()
    if file.size is not None and file.size > limits.file_bytes:
        raise UploadRefused(
            f"{name} is {file.size:,} bytes; the limit is {limits.file_bytes:,} bytes. "
            "Use the command line for bigger files."
        )
    upload = Upload.objects.create(
        campaign=campaign,
        kind=kind,
        name=name,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    digest = hashlib.sha256()
    size = 0
    gzip_check: _GzipCheck | None = None
    with _ChunkWriter(upload) as writer:
        for block in _blocks(file):
            if size == 0:
                head = bytes(block[:8192])
                sniff(head, name)
                if head.startswith(GZIP_MAGIC):
                    gzip_check = _GzipCheck(name, file.size)
            size += len(block)
            if size > limits.file_bytes:
                raise UploadRefused(limits.file_too_big(name))
            digest.update(block)
            if gzip_check is not None:
                gzip_check.feed(block)
            writer.write(block)
    if size == 0:
        raise UploadRefused(f"{name} is empty.")
    if gzip_check is not None:
        gzip_check.finish(size)
    upload.size = size
    upload.sha256 = digest.hexdigest()
    upload.save(update_fields=["size", "sha256"])
    return upload


def copy_upload(upload: Upload, path: Path) -> Path:
    """Write the upload's bytes to ``path``, one stored chunk at a time: an import then reads a
    plain file (streaming it, or in another process) and never holds the whole upload twice."""
    chunks = upload.chunks.order_by("seq").values_list("data", flat=True)
    with open(path, "wb") as file:
        for data in chunks.iterator(chunk_size=2):
            file.write(data)
    return path


def discard_bytes(upload_ids: list[int]) -> None:
    """Drop stored bytes once an import has succeeded; the metadata stays."""
    UploadChunk.objects.filter(upload_id__in=upload_ids).delete()


def retention() -> timedelta:
    return timedelta(hours=settings.POOLJUDGE_UPLOAD_RETENTION_HOURS)


def purge_expired_bytes(*, now: datetime | None = None) -> int:
    """Delete the stored bytes of uploads nobody will import any more: those whose job ended
    (failed, cancelled, or done and somehow left them) more than POOLJUDGE_UPLOAD_RETENTION_HOURS
    ago, and those of that age no job points to. A queued or running job keeps its bytes. The
    Upload rows stay, as the record of what was uploaded (name, size, SHA-256). Returns how many
    uploads lost their bytes."""
    cutoff = (now or timezone.now()) - retention()
    expired = Upload.objects.filter(
        Q(job__status__in=Job.FINAL, job__finished_at__lt=cutoff)
        | Q(job__isnull=True, created_at__lt=cutoff),
        Exists(UploadChunk.objects.filter(upload=OuterRef("pk"))),
    )
    ids = list(expired.values_list("pk", flat=True))
    if ids:
        UploadChunk.objects.filter(upload_id__in=ids).delete()
    return len(ids)


def bytes_kept_until(job: Job) -> datetime | None:
    """When the bytes of a failed or cancelled job's uploads will be deleted (None: they are
    gone already, or the job has none or has not ended)."""
    if job.status not in (Job.Status.FAILED, Job.Status.CANCELLED) or job.finished_at is None:
        return None
    if not UploadChunk.objects.filter(upload__job=job).exists():
        return None
    return job.finished_at + retention()
