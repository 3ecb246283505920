"""Uploaded files and the importers that consume them.

Each app registers the importers for the data it owns (campaigns: topics and documents; pooling:
runs; qrels: qrels) in its ``AppConfig.ready``. The campaign's Files page lists the registry and
sends each upload to its importer's task by name, so no app imports an app above it.
"""

from __future__ import annotations

import hashlib
import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile as DjangoUploadedFile
from django.db import transaction

from campaigns.models import Campaign, Upload, UploadChunk

CHUNK_BYTES = 4 * 1024 * 1024
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


def _check_gzip_ratio(chunks: list[bytes], name: str, compressed_size: int) -> None:
    """Decompress in a stream (never whole) and refuse a gzip bomb before anything is stored."""
    limit = max(settings.POOLJUDGE_MAX_GZIP_RATIO * compressed_size, 1024 * 1024)
    inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
    total = 0
    try:
        for chunk in chunks:
            data = chunk
            while data:
                out = inflater.decompress(data, 1024 * 1024)
                total += len(out)
                if total > limit:
                    raise UploadRefused(
                        f"{name} expands more than {settings.POOLJUDGE_MAX_GZIP_RATIO}x when "
                        "decompressed; refusing it as a possible gzip bomb."
                    )
                data = inflater.unconsumed_tail
                if inflater.eof:
                    rest = inflater.unused_data
                    inflater = zlib.decompressobj(wbits=47)  # concatenated gzip members
                    data = rest + data
    except zlib.error:
        raise UploadRefused(f"{name} is not a valid gzip file.") from None


@transaction.atomic
def store_upload(*, campaign: Campaign, kind: str, file: DjangoUploadedFile, user=None) -> Upload:
    """Store an uploaded file's bytes in the database. Raises UploadRefused (nothing stored)
    for a bad name, an oversize or non-text file, or a gzip bomb."""
    name = check_name(file.name or "")
    if file.size is not None and file.size > settings.POOLJUDGE_MAX_UPLOAD_BYTES:
        raise UploadRefused(
            f"{name} is {file.size:,} bytes; the limit is "
            f"{settings.POOLJUDGE_MAX_UPLOAD_BYTES:,} bytes. Use the command line for bigger files."
        )
    chunks: list[bytes] = []
    digest = hashlib.sha256()
    size = 0
    for piece in file.chunks(CHUNK_BYTES):
        if not chunks:
            sniff(piece[:8192], name)
        size += len(piece)
        if size > settings.POOLJUDGE_MAX_UPLOAD_BYTES:
            raise UploadRefused(
                f"{name} is larger than {settings.POOLJUDGE_MAX_UPLOAD_BYTES:,} bytes."
            )
        digest.update(piece)
        chunks.append(piece)
    if size == 0:
        raise UploadRefused(f"{name} is empty.")
    if chunks[0].startswith(GZIP_MAGIC):
        _check_gzip_ratio(chunks, name, size)
    upload = Upload.objects.create(
        campaign=campaign,
        kind=kind,
        name=name,
        size=size,
        sha256=digest.hexdigest(),
        created_by=user if user is not None and user.is_authenticated else None,
    )
    UploadChunk.objects.bulk_create(
        UploadChunk(upload=upload, seq=seq, data=data) for seq, data in enumerate(_rechunk(chunks))
    )
    return upload


def _rechunk(pieces: list[bytes]) -> Iterator[bytes]:
    buffer = bytearray()
    for piece in pieces:
        buffer += piece
        while len(buffer) >= CHUNK_BYTES:
            yield bytes(buffer[:CHUNK_BYTES])
            del buffer[:CHUNK_BYTES]
    if buffer:
        yield bytes(buffer)


def upload_bytes(upload: Upload) -> io.BytesIO:
    """The upload's bytes, as a file object the parsers read (gzip is detected by them)."""
    data = b"".join(
        bytes(chunk) for chunk in upload.chunks.order_by("seq").values_list("data", flat=True)
    )
    return io.BytesIO(data)


def copy_upload(upload: Upload, path: Path) -> Path:
    """Write the upload's bytes to ``path``, one stored chunk at a time: an import then reads a
    plain file (streaming it, or in another process) and never holds the whole upload twice."""
    chunks = upload.chunks.order_by("seq").values_list("data", flat=True)
    with open(path, "wb") as file:
        for data in chunks.iterator(chunk_size=2):
            file.write(data)
    return path


def discard_bytes(upload_ids: list[int]) -> None:
    """Drop stored bytes once an import has finished either way; the metadata stays."""
    UploadChunk.objects.filter(upload_id__in=upload_ids).delete()
