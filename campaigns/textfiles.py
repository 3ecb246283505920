"""Reading uploaded text files: bytes, gzip, decoding, lines, ids, and the one error type.

Every parser in Pooljudge reads its input through these helpers, so the rules are the same for
runs, qrels, topics and documents: gzip is recognised by its name or its magic bytes (and refused
when it inflates like a bomb), text is strict UTF-8 with or without a BOM, CRLF and a missing
final newline are fine, and every problem is reported with the file name and line number.

The only exception a parser raises for bad input is :class:`ParseError`, which carries every
problem found (up to :data:`MAX_PROBLEMS`) and how many more there were. Nothing here imports
Django.
"""

from __future__ import annotations

import codecs
import itertools
import os
import re
import unicodedata
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

MAX_PROBLEMS = 100
# Lines listed for a problem found on many lines (the rest are counted).
GROUP_LINES = 3
MAX_ID_LENGTH = 200

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# Below this size a decompressed file is never called a bomb, whatever its ratio: a small file of
# repeated lines legitimately compresses more than 200 times.
BOMB_ALLOWANCE = 1 << 20
CHUNK_SIZE = 1 << 20
SNIFF_SIZE = 4096  # bytes at the start of a file that tell UTF-16 or binary from text
GZIP_WBITS = 16 + zlib.MAX_WBITS
ENCODING_HINT = "pass --encoding if the file is not UTF-8"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file, where the user can find it.

    The same message on several lines is one problem: ``line`` is the first of them, ``also``
    the next few and ``also_more`` how many more there were."""

    source: str
    line: int | None
    message: str
    also: tuple[int, ...] = ()
    also_more: int = 0

    @property
    def occurrences(self) -> int:
        """How many lines have this problem (1 for a problem of the whole file)."""
        return 1 + len(self.also) + self.also_more

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.source}: {self.message}"
        if not self.also:
            return f"{self.source} line {self.line}: {self.message}"
        listed = ", ".join(map(str, (self.line, *self.also)))
        more = f" … ({self.also_more:,} more)" if self.also_more else ""
        return f"{self.source} lines {listed}{more}: {self.message}"


class ParseError(Exception):
    """All problems found (up to MAX_PROBLEMS kept) and how many more there were."""

    def __init__(self, problems: Iterable[Problem], *, more: int = 0) -> None:
        self.problems: list[Problem] = list(problems)
        self.more = more
        super().__init__(self.problems, more)

    @classmethod
    def single(cls, source: str, line: int | None, message: str) -> ParseError:
        return cls([Problem(source, line, message)])

    @property
    def count(self) -> int:
        """How many problems there were: every line of a grouped one, and those not kept."""
        return sum(problem.occurrences for problem in self.problems) + self.more

    def __str__(self) -> str:
        lines = [str(problem) for problem in self.problems]
        if self.more == 1:
            lines.append("… and 1 more problem")
        elif self.more > 1:
            lines.append(f"… and {self.more} more problems")
        return "\n".join(lines)

    def __reduce__(self):
        # Celery and multiprocessing pickle exceptions: keep the keyword-only argument.
        return (_rebuild_parse_error, (self.problems, self.more))


def _rebuild_parse_error(problems: list[Problem], more: int) -> ParseError:
    return ParseError(problems, more=more)


class ProblemCollector:
    """Collects problems of one file: the first MAX_PROBLEMS kept, the rest only counted.

    A message already reported for another line joins that problem (its first GROUP_LINES
    lines are listed, the rest counted), so that a file with one mistake on every line reads
    as one problem, not as a hundred copies of it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._kept: list[tuple[int | None, str, list[int], list[int]]] = []
        self._by_message: dict[str, int] = {}  # message -> its index in _kept
        self._last_line: dict[int, int] = {}  # index in _kept -> the last line it was found on
        self.more = 0

    def add(self, line: int | None, message: str) -> None:
        if line is not None:
            group = self._by_message.get(message)
            if group is not None:
                if self._last_line[group] == line:
                    return  # the same thing found twice on one line is still one line
                self._last_line[group] = line
                _first, _message, also, more = self._kept[group]
                if len(also) < GROUP_LINES - 1:
                    also.append(line)
                else:
                    more[0] += 1
                return
        if len(self._kept) < MAX_PROBLEMS:
            if line is not None:
                self._by_message[message] = len(self._kept)
                self._last_line[len(self._kept)] = line
            self._kept.append((line, message, [], [0]))
        else:
            self.more += 1

    @property
    def problems(self) -> list[Problem]:
        return [
            Problem(self.source, line, message, tuple(also), more[0])
            for line, message, also, more in self._kept
        ]

    def __bool__(self) -> bool:
        return bool(self._kept)

    def __len__(self) -> int:
        """How many problems were reported, kept or not (every line of a grouped one)."""
        return sum(1 + len(also) + more[0] for _, _, also, more in self._kept) + self.more

    def error(self) -> ParseError:
        return ParseError(self.problems, more=self.more)

    def raise_if_any(self) -> None:
        if self._kept:
            raise self.error()


def shown(value: str, limit: int = 60) -> str:
    """A value quoted for a message, cut short when it is long (a whole line pasted as an id)."""
    if len(value) > limit:
        value = value[:limit] + "…"
    return repr(value)


# --- Bytes ---------------------------------------------------------------------------------------


def parse_bounded_int(text: str, what: str, limit: int) -> tuple[int | None, str | None]:
    """(value, None) or (None, why not): an integer in ASCII digits (sign allowed, no ``_``, no
    other scripts' digits, which int() would take) within ±limit. ``what`` names the column."""
    if not text.isascii() or "_" in text:
        return None, f"{what} {shown(text)} is not an integer"
    try:
        value = int(text)
    except ValueError:
        return None, f"{what} {shown(text)} is not an integer"
    if not -limit <= value <= limit:
        return None, f"{what} {shown(text)} is out of range"
    return value, None


def source_name(source: str | os.PathLike | BinaryIO, name: str | None = None) -> str:
    """The file name to show in messages: `name` if given, else the path or the file's name."""
    if name:
        return name
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    file_name = getattr(source, "name", None)
    return file_name if isinstance(file_name, str) and file_name else "<upload>"


def _is_gzip(data: bytes, name: str) -> bool:
    return data[:2] == GZIP_MAGIC or name.lower().endswith(".gz")


def read_bytes(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    max_ratio: int = 200,
    max_bytes: int | None = None,
) -> bytes:
    """The whole file as bytes, gunzipped when its name ends in .gz or it starts with gzip magic.

    Raises ParseError (naming the file) when the file cannot be read, is corrupt or truncated
    gzip, inflates to more than `max_ratio` times its compressed size (and more than 1 MiB), or
    holds more than `max_bytes` bytes once decompressed.
    """
    display = source_name(source, name)
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as file:
                if max_bytes is None:
                    raw = file.read()
                else:  # enough to tell a plain file is too big, without reading all of it
                    raw = file.read(max_bytes + 1)
                    if _is_gzip(raw, display):
                        raw += file.read()
        except OSError as error:
            raise ParseError.single(display, None, f"cannot be read ({error.strerror})") from None
    else:
        try:
            raw = source.read()
        except OSError as error:
            raise ParseError.single(display, None, f"cannot be read ({error})") from None
        if isinstance(raw, str):
            raise TypeError("read_bytes needs a file opened in binary mode")
    if _is_gzip(raw, display):
        return _gunzip(raw, display, max_ratio=max_ratio, max_bytes=max_bytes)
    if max_bytes is not None and len(raw) > max_bytes:
        raise ParseError.single(display, None, f"is larger than the limit of {max_bytes:,} bytes")
    return raw


def _gunzip(raw: bytes, display: str, *, max_ratio: int, max_bytes: int | None) -> bytes:
    if raw[:2] != GZIP_MAGIC:
        raise ParseError.single(display, None, "is named .gz but is not a gzip file")
    limit = max(max_ratio * len(raw), BOMB_ALLOWANCE)
    if max_bytes is not None:
        limit = min(limit, max_bytes)
    chunks: list[bytes] = []
    total = 0
    for chunk, _consumed in _inflate([raw], display):
        total += len(chunk)
        if total > limit:
            raise _too_big(display, max_ratio=max_ratio, max_bytes=max_bytes, total=total)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_big(display: str, *, max_ratio: int, max_bytes: int | None, total: int) -> ParseError:
    if max_bytes is not None and total > max_bytes:
        return ParseError.single(
            display, None, f"is larger than the limit of {max_bytes:,} bytes once decompressed"
        )
    return ParseError.single(
        display,
        None,
        f"decompresses to more than {max_ratio} times its compressed size: "
        "refused as a possible gzip bomb",
    )


def _inflate(blocks: Iterable[bytes], display: str) -> Iterator[tuple[bytes, int]]:
    """Gunzip a stream of compressed blocks (several gzip members allowed).

    Yields (decompressed chunk, compressed bytes consumed so far), in chunks of at most
    CHUNK_SIZE, so that a caller can stop a bomb before it has been inflated.
    """
    decompressor = zlib.decompressobj(GZIP_WBITS)
    consumed = 0
    for block in blocks:
        consumed += len(block)
        data = block
        while data:
            if decompressor.eof:
                # After a member: zero padding, another member, or garbage.
                data = data.lstrip(b"\x00")
                if not data:
                    break
                if data[0] != GZIP_MAGIC[0]:
                    raise ParseError.single(
                        display, None, "has data after the end of its gzip stream"
                    )
                decompressor = zlib.decompressobj(GZIP_WBITS)
            chunk = _decompress(decompressor, data, display)
            if chunk:
                yield chunk, consumed
            data = decompressor.unused_data if decompressor.eof else decompressor.unconsumed_tail
    # Output held back when the last call filled its CHUNK_SIZE exactly.
    while not decompressor.eof:
        chunk = _decompress(decompressor, b"", display)
        if not chunk:
            raise ParseError.single(display, None, "is a truncated gzip file (it ends too early)")
        yield chunk, consumed


def _decompress(decompressor, data: bytes, display: str) -> bytes:
    try:
        return decompressor.decompress(data, CHUNK_SIZE)
    except zlib.error as error:
        raise ParseError.single(display, None, f"is not a valid gzip file ({error})") from None


# --- Text ----------------------------------------------------------------------------------------


def _check_start(data: bytes, source: str, encoding: str | None) -> bytes:
    """Refuse UTF-16 (unless an encoding is given) and drop a UTF-8 BOM."""
    if encoding is None and data[:2] in UTF16_BOMS:
        raise ParseError.single(
            source,
            None,
            "is UTF-16 text (it starts with a UTF-16 byte-order mark): save it as UTF-8, "
            "or pass --encoding utf-16",
        )
    if data[:3] == UTF8_BOM and (encoding is None or _normal_encoding(encoding) == "utf-8"):
        return data[3:]
    return data


def _line_problems(
    data: bytes, source: str, codec: str, first_line: int = 1, sniff: bytes | None = None
) -> ParseError:
    """The error for text with NUL bytes or undecodable bytes: every bad line, in order.

    `data` holds whole lines, the first numbered `first_line`; `sniff` is the start of the file
    (after any BOM) when `data` is only a part of it. A file full of NUL bytes gets one word on
    UTF-16 or binary content instead of a problem per line.
    """
    head = data[:SNIFF_SIZE] if sniff is None else sniff
    nuls = head.count(b"\x00")
    if nuls >= 4 and nuls * 4 > len(head):
        return ParseError.single(
            source,
            None,
            "contains NUL bytes throughout: it looks like UTF-16 or a binary file, not UTF-8 text",
        )
    utf8 = _normal_encoding(codec) == "utf-8"
    problems = ProblemCollector(source)
    for number, raw in enumerate(data.split(b"\n"), first_line):
        if b"\x00" in raw:
            problems.add(number, "contains a NUL byte")
            continue
        try:
            raw.decode(codec)
        except UnicodeDecodeError as error:
            where = f"byte 0x{raw[error.start]:02X} at column {error.start + 1}"
            if utf8:
                problems.add(number, f"is not valid UTF-8 ({where}); {ENCODING_HINT}")
            else:
                problems.add(number, f"cannot be decoded as {codec} ({where})")
    if not problems:  # a sequence cut by a newline cannot happen in these encodings; never lose it
        problems.add(None, f"cannot be decoded as {codec}")
    return problems.error()


def _decode_other(data: bytes, source: str, encoding: str) -> str:
    try:
        text = data.decode(encoding)
    except LookupError:
        raise ParseError.single(source, None, f"unknown encoding {encoding!r}") from None
    except UnicodeDecodeError as error:
        before = data[: error.start].decode(encoding, errors="replace")
        line = before.count("\n") + 1
        raise ParseError.single(
            source, line, f"cannot be decoded as {encoding} (byte offset {error.start})"
        ) from None
    if text[:1] == "\ufeff":
        text = text[1:]
    if "\x00" in text:
        problems = ProblemCollector(source)
        for number, line in enumerate(text.split("\n"), 1):
            if "\x00" in line:
                problems.add(number, "contains a NUL character")
        raise problems.error()
    return text


def decode_text(data: bytes, *, source: str, encoding: str | None = None) -> str:
    """The file's text: strict UTF-8 (BOM dropped) unless `encoding` is given.

    Raises ParseError for UTF-16 without an encoding, NUL bytes, and undecodable bytes (naming
    every bad line). Line endings are left as they are.
    """
    data = _check_start(data, source, encoding)
    codec = "utf-8" if encoding is None else encoding
    try:
        codecs.lookup(codec)
    except LookupError:
        raise ParseError.single(source, None, f"unknown encoding {codec!r}") from None
    if not _ascii_compatible(codec):
        return _decode_other(data, source, codec)
    if b"\x00" not in data:
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            pass
    raise _line_problems(data, source, codec)


def _normal_encoding(encoding: str) -> str:
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return encoding


def split_lines(text: str) -> list[str]:
    """Lines split on "\\n", each without a trailing "\\r"; a final "\\n" ends the last line."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    elif lines[-1].endswith("\r"):
        lines[-1] = lines[-1][:-1]
    return lines


def decode_lines(data: bytes, *, source: str, encoding: str | None = None) -> list[str]:
    """The file's lines: see decode_text for the decoding rules and split_lines for the split."""
    return split_lines(decode_text(data, source=source, encoding=encoding))


def _ascii_compatible(encoding: str) -> bool:
    """Whether lines of this encoding can be found by splitting the bytes on b"\\n"."""
    name = _normal_encoding(encoding)
    if name.startswith(("utf-16", "utf-32", "utf_16", "utf_32")):
        return False
    try:
        return "\n".encode(name) == b"\n" and "a".encode(name) == b"a"
    except (LookupError, UnicodeError):
        return False


def _raw_blocks(file: BinaryIO, display: str) -> Iterator[bytes]:
    while True:
        try:
            block = file.read(CHUNK_SIZE)
        except OSError as error:
            raise ParseError.single(display, None, f"cannot be read ({error})") from None
        if not block:
            return
        yield block


def _compressed_size(file: BinaryIO) -> int | None:
    try:
        position = file.tell()
        end = file.seek(0, os.SEEK_END)
        file.seek(position)
    except (OSError, AttributeError, ValueError):
        return None
    return end - position


def _byte_blocks(
    source: str | os.PathLike | BinaryIO, display: str, max_ratio: int
) -> Iterator[bytes]:
    """Blocks of the file's bytes, gunzipped (with the bomb check) when it is gzip."""
    if isinstance(source, (str, os.PathLike)):
        try:
            file = open(source, "rb")  # noqa: SIM115 (closed in the finally below)
        except OSError as error:
            raise ParseError.single(display, None, f"cannot be read ({error.strerror})") from None
        owned = True
    else:
        file, owned = source, False
    try:
        size = _compressed_size(file)
        blocks = _raw_blocks(file, display)
        first = next(blocks, b"")
        if isinstance(first, str):
            raise TypeError("iter_lines needs a file opened in binary mode")
        while len(first) < len(GZIP_MAGIC):  # a short read cannot show the magic bytes yet
            more = next(blocks, b"")
            if not more:
                break
            first += more
        if not _is_gzip(first, display):
            if first:
                yield first
            yield from blocks
            return
        if first[:2] != GZIP_MAGIC:
            raise ParseError.single(display, None, "is named .gz but is not a gzip file")
        total = 0
        for chunk, consumed in _inflate(itertools.chain([first], blocks), display):
            total += len(chunk)
            compressed = size if size is not None else consumed
            if total > max(max_ratio * compressed, BOMB_ALLOWANCE):
                raise _too_big(display, max_ratio=max_ratio, max_bytes=None, total=total)
            yield chunk
    finally:
        if owned:
            file.close()


def iter_lines(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    encoding: str | None = None,
    max_ratio: int = 200,
) -> Iterator[tuple[int, str]]:
    """Yield (line number, line) without holding the whole file: for large document collections.

    Same decoding rules and errors as read_bytes + decode_lines, except that the ParseError comes
    when the offending line is reached (lines before it have been yielded already).
    """
    for first, text in iter_text_blocks(source, name=name, encoding=encoding, max_ratio=max_ratio):
        yield from zip(itertools.count(first), text.split("\n"))


def iter_text_blocks(
    source: str | os.PathLike | BinaryIO,
    *,
    name: str | None = None,
    encoding: str | None = None,
    max_ratio: int = 200,
) -> Iterator[tuple[int, str]]:
    """Yield (number of its first line, text) for blocks of whole lines of about CHUNK_SIZE
    bytes, without holding the file: for parsers that work on text rather than line by line.

    A block's text is its lines joined by "\\n" (CRLF read as LF), without a final newline;
    every line is in exactly one block. Same decoding rules and errors as iter_lines.
    """
    display = source_name(source, name)
    if encoding is not None and not _ascii_compatible(encoding):
        # UTF-16/32 cannot be split on bytes; such files are rare enough to read whole.
        lines = decode_lines(
            read_bytes(source, name=name, max_ratio=max_ratio), source=display, encoding=encoding
        )
        if lines:
            yield 1, "\n".join(lines)
        return
    codec = "utf-8" if encoding is None else encoding
    try:
        codecs.lookup(codec)
    except LookupError:
        raise ParseError.single(display, None, f"unknown encoding {codec!r}") from None
    blocks = _byte_blocks(source, display, max_ratio)
    # The file's start, long enough to judge byte-order marks and NUL bytes as decode_lines does.
    head = b""
    for block in blocks:
        head += block
        if len(head) >= 2 * SNIFF_SIZE:
            break
    head = _check_start(head, display, encoding)
    sniff = head[:SNIFF_SIZE]
    number = 0
    carry = b""
    for block in itertools.chain([head], blocks):
        data = carry + block if carry else block
        cut = data.rfind(b"\n")
        if cut == -1:
            carry = data
            continue
        carry = data[cut + 1 :]
        text = _decode_text(data[:cut], display, codec, number + 1, sniff)
        yield number + 1, text
        number += text.count("\n") + 1
    if carry:
        yield number + 1, _decode_text(carry, display, codec, number + 1, sniff)


def _decode_text(data: bytes, display: str, codec: str, first: int, sniff: bytes) -> str:
    """Decode complete lines (without the final newline) starting at line number `first`,
    CRLF read as LF."""
    if b"\x00" not in data:
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            pass
        else:
            if "\r" in text:
                text = text.replace("\r\n", "\n")
                if text.endswith("\r"):  # the CR of a CRLF cut off with its LF
                    text = text[:-1]
            return text
    raise _line_problems(data, display, codec, first, sniff)


def numbered(lines: Iterable[str] | Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(line number, line) pairs from plain lines (numbered from 1) or from iter_lines pairs.

    Line ends a caller left on ("\\n", "\\r\\n", as from iterating an open file) are removed.
    """
    iterator = iter(lines)
    head = next(iterator, None)
    if head is None:
        return iter(())
    if isinstance(head, tuple):
        return itertools.chain([head], iterator)  # type: ignore[list-item]
    return enumerate(
        (line.rstrip("\r\n") for line in itertools.chain([head], iterator)),  # type: ignore[union-attr]
        1,
    )


# --- Lines and ids -------------------------------------------------------------------------------


def is_skippable(line: str) -> bool:
    """Blank (whitespace only) or a '#' comment line (after leading whitespace)."""
    stripped = line.lstrip()
    return not stripped or stripped[0] == "#"


_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"})
# trec_eval separates the columns of runs and qrels with ASCII whitespace only (C's isspace).
TREC_EVAL_WHITESPACE = " \t\n\r\f\v"
_TREC_EVAL_SPLIT = re.compile(r"[ \t\n\r\f\v]+")
# Whitespace to Python's str.split() but not to trec_eval: no-break spaces, the ASCII
# information separators (0x1C-0x1F), NEL, the Unicode spaces and line separators.
OTHER_WHITESPACE = re.compile(r"[^\S \t\n\r\f\v]")


def split_fields(line: str) -> list[str]:
    """The whitespace-separated columns of a run or qrels line, split as trec_eval splits them:
    on ASCII whitespace only. A no-break space inside an id stays inside it (and the id is then
    refused by :func:`check_id` with a message that names the character), where ``str.split()``
    would quietly make one more column of it."""
    if OTHER_WHITESPACE.search(line) is None:
        return line.split()
    stripped = line.strip(TREC_EVAL_WHITESPACE)
    return _TREC_EVAL_SPLIT.split(stripped) if stripped else []


def describe_char(char: str) -> str:
    """``a no-break space (U+00A0)``, or ``the character U+001C`` for one without a name."""
    name = unicodedata.name(char, "").lower()
    if not name:
        return f"the character U+{ord(char):04X}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name} (U+{ord(char):04X})"


def check_id(value: str) -> str | None:
    """None when `value` is a usable topic or document id, else why not.

    The reason completes a sentence whose subject is the id, e.g. f"document id {id!r} {reason}".
    Refused: empty ids, whitespace, control and invisible format characters, more than
    MAX_ID_LENGTH characters.
    """
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is longer than {MAX_ID_LENGTH} characters"
    if value.isascii():
        if value.isprintable() and " " not in value:
            return None
    elif value.isprintable():
        return None
    for char in value:
        if char.isspace():
            if char in TREC_EVAL_WHITESPACE:
                return "contains whitespace"
            return (
                f"contains {describe_char(char)}: trec_eval splits columns on ASCII whitespace "
                "only and would keep it inside the id, but most other tools split there; "
                "replace it (ids cannot contain whitespace)"
            )
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            return f"contains the control character U+{ord(char):04X}"
    return None
