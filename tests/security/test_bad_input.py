"""The bad-input corpus: every kind of file (topics, documents, runs, qrels) with broken encodings
(invalid UTF-8, UTF-16, BOM, NUL), CR and CRLF line ends, huge lines, wrong column counts, NaN,
inf and 1e309, duplicates, negative labels and unknown topics, through the whole import path.

Each case has one defined outcome:

- refused: a ParseError whose problem names the file, the line (None for a problem with the file
  as a whole, such as a cross-check against the campaign) and says what is wrong; the database is
  exactly as it was (every row of topics, documents, runs, run topics, assessors, judgments and
  revisions; each bad file also starts by changing something that exists, so that a partial
  import could not go unnoticed);
- normalised, as campaigns/textfiles.py and the formats document it (BOM dropped, CRLF read as
  LF, UTF-16 read when its encoding is given, duplicates of the same qrels label collapsed with a
  warning, negative labels kept, huge lines kept whole): the database holds exactly what the
  equivalent clean file gives in an identical campaign, or what the case checks.

Every case runs twice: through the import functions (what the command line calls) and through
the Files page (upload, stored bytes, import job), where NUL bytes are already refused at upload.
The parsers alone are tested in tests/formats/.
"""

from __future__ import annotations

import gzip
import html
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from campaigns.imports import ImportSummary, import_documents, import_topics
from campaigns.members import add_member
from campaigns.models import (
    Assessor,
    Campaign,
    Document,
    Job,
    Judgment,
    JudgmentRevision,
    Topic,
    Upload,
)
from campaigns.scales import SCALES
from campaigns.textfiles import ParseError
from pooling.imports import import_runs
from pooling.models import Run, RunTopic
from qrels.imports import import_qrels

KINDS = ("topics", "documents", "runs", "qrels")
NAME = "bad.txt"
SOURCE = "NIST"  # the imported assessor every qrels case writes to

# What each campaign holds before a case: the bad files below start by changing it.
SEED_TOPICS = b"1\tTopic one\n2\tTopic two\n"
SEED_DOCUMENTS = b"d1\tFirst document\nd2\tSecond document\n"
SEED_RUN = b"1 Q0 d1 1 2.0 base\n1 Q0 d2 2 1.0 base\n2 Q0 d2 1 1.0 base\n"
SEED_QRELS = b"1 0 d1 1\n2 0 d2 0\n"
# Runs cases import this good file first, then the case's file: on SQLite its rows are written
# before the bad file is read, on PostgreSQL they are in the COPY: either way they must go.
GOOD_RUN = ("good.txt", b"1 Q0 d2 1 3.0 fresh\n2 Q0 d1 1 1.5 fresh\n")


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    data: bytes
    # Refused: a phrase of the problem's message and its line (None: about the whole file).
    phrase: str | None = None
    line: int | None = None
    # Normalised: stores what this clean file stores, and/or passes ``check``.
    same_as: bytes | None = None
    check: Callable[[Campaign], None] | None = None
    warning: str | None = None
    options: dict = field(default_factory=dict)
    # The Files page refuses the upload itself (nothing stored, no job) with this phrase.
    at_upload: str | None = None
    alone: bool = False  # runs: without GOOD_RUN before it
    lines: int = 1  # refused: how many lines have the problem (said once, from the first)

    @property
    def refused(self) -> bool:
        return self.phrase is not None

    def files(self, data: bytes | None = None) -> list[tuple[str, bytes]]:
        file = (NAME, self.data if data is None else data)
        if self.kind == "runs" and not self.alone:
            return [GOOD_RUN, file]
        return [file]


def refused(kind, id, data, phrase, line, **more) -> Case:
    return Case(id=id, kind=kind, data=data, phrase=phrase, line=line, **more)


def normalised(kind, id, data, **more) -> Case:
    assert more.get("same_as") is not None or more.get("check") is not None
    return Case(id=id, kind=kind, data=data, **more)


# --- Checks of normalised cases -----------------------------------------------------------------

HUGE_WORDS = b"word " * 400_000  # 2 MB on one line
HUGE_BODY = "lorem ipsum dolor " * 160_000  # 2.9 MB: longer than a 1 MiB read block


def huge_title_kept(campaign: Campaign) -> None:
    topic = campaign.topics.get(topic_id="3")
    assert topic.title == HUGE_WORDS.decode().strip()


def huge_body_kept(campaign: Campaign) -> None:
    document = campaign.documents.get(doc_id="big")
    assert document.body == HUGE_BODY
    assert len(document.body_html) > len(HUGE_BODY)


def negative_labels_kept(campaign: Campaign) -> None:
    """-1 (pooled, not judged) and other negative labels are stored as they are, never clamped."""
    assert sorted(campaign.judgments.values_list("topic__topic_id", "doc_id", "label")) == [
        ("1", "d1", 2),
        ("1", "d2", -1),
        ("1", "d3", -2),
        ("2", "d2", 0),
    ]


# --- The corpus ---------------------------------------------------------------------------------

UTF8_BOM = b"\xef\xbb\xbf"
UTF8 = "pass --encoding if the file is not UTF-8"
UTF16 = "is UTF-16 text (it starts with a UTF-16 byte-order mark)"
NUL_AT_UPLOAD = "contains NUL bytes: it is not a text file"
EMPTY_AT_UPLOAD = "The submitted file is empty."

TOPICS = [
    refused("topics", "empty-file", b"", "is empty", None, at_upload=EMPTY_AT_UPLOAD),
    refused(
        "topics", "invalid-utf8", b"1\tNew title\n3\tCaf\xe9\n", f"0xE9 at column 6); {UTF8}", 2
    ),
    refused("topics", "utf16", "1\tNew title\n3\tThree\n".encode("utf-16"), UTF16, None),
    normalised(
        "topics",
        "utf16-with-encoding",
        "1\tNew title\n3\tCafé\n".encode("utf-16"),
        same_as="1\tNew title\n3\tCafé\n".encode(),
        options={"encoding": "utf-16"},
    ),
    normalised(
        "topics",
        "latin1-with-encoding",
        "1\tNew title\n3\tCafé\n".encode("latin-1"),
        same_as="1\tNew title\n3\tCafé\n".encode(),
        options={"encoding": "latin-1"},
    ),
    normalised("topics", "bom", UTF8_BOM + b"3\tThree\n", same_as=b"3\tThree\n"),
    refused(
        "topics",
        "nul",
        b"1\tNew title\n3\tTh\x00ree\n",
        "contains a NUL byte",
        2,
        at_upload=NUL_AT_UPLOAD,
    ),
    normalised(
        "topics", "crlf", b"1\tNew title\r\n3\tThree\r\n", same_as=b"1\tNew title\n3\tThree\n"
    ),
    refused(
        "topics",
        "cr-line-ends",
        b"1\tNew title\r3\tThree\r4\tFour\r",  # read as one line, it would have 4 columns
        "carriage return (CR)",
        1,
    ),
    normalised("topics", "huge-line", b"3\t" + HUGE_WORDS + b"\n", check=huge_title_kept),
    refused(
        "topics", "huge-id", b"1\tNew title\n" + b"x" * 300 + b"\tLong\n", "longer than 200", 2
    ),
    refused(
        "topics",
        "five-columns",
        b"1\tNew title\n3\ta\tb\tc\td\n",
        "has 5 tab-separated columns; expected 2 (id, title)",
        2,
    ),
    refused(
        "topics",
        "one-column",
        b"1\tNew title\n{3 Three}\n",
        "has 1 tab-separated column;",
        2,
        options={"format": "tsv"},
    ),
    refused(
        "topics",
        "duplicate-id",
        b"1\tNew title\n3\tThree\n3\tAgain\n",
        "topic id '3' repeats the topic of line 2",
        3,
    ),
    refused(
        "topics",
        "jsonl-id-1e309",
        b'{"id": "1", "title": "New title"}\n{"id": 1e309, "title": "x"}\n',
        "topic id 'id' must be a string or an integer, not float",
        2,
    ),
    refused(
        "topics",
        "jsonl-title-nan",
        b'{"id": "1", "title": "New title"}\n{"id": "3", "title": NaN}\n',
        "'title' must be a string, not float",
        2,
    ),
    refused(
        "topics",
        "jsonl-lone-surrogate",
        b'{"id": "1", "title": "New title"}\n{"id": "3", "title": "a\\ud800b"}\n',
        "'title' contains an unpaired surrogate",
        2,
    ),
]

MANY_DOCUMENTS = b"".join(b"m%d\tDocument number %d\n" % (n, n) for n in range(1500))
DOCUMENTS = [
    refused("documents", "empty-file", b"", "is empty", None, at_upload=EMPTY_AT_UPLOAD),
    refused(
        "documents",
        "invalid-utf8-after-1500-documents",  # streamed and flushed in batches before the error
        b"d1\tReplaced text\n" + MANY_DOCUMENTS + b"dx\tCaf\xe9\n",
        f"0xE9 at column 7); {UTF8}",
        1502,
    ),
    refused("documents", "utf16", "d1\tReplaced\nd3\tThree\n".encode("utf-16"), UTF16, None),
    refused(
        "documents",
        "utf16-without-bom",
        "d1\tReplaced\nd3\tThree\n".encode("utf-16-le"),
        "contains NUL bytes throughout: it looks like UTF-16",
        None,
        at_upload=NUL_AT_UPLOAD,
    ),
    normalised(
        "documents",
        "utf16-with-encoding",
        "d1\tReplaced\nd3\tCafé\n".encode("utf-16"),
        same_as="d1\tReplaced\nd3\tCafé\n".encode(),
        options={"encoding": "utf-16"},
    ),
    normalised(
        "documents",
        "bom",
        UTF8_BOM + b"d1\tReplaced\nd3\tThree\n",
        same_as=b"d1\tReplaced\nd3\tThree\n",
    ),
    refused(
        "documents",
        "nul",
        b"d1\tReplaced\nd3\tTh\x00ree\n",
        "contains a NUL byte",
        2,
        at_upload=NUL_AT_UPLOAD,
    ),
    refused(
        "documents",
        "nul-after-8-kib",  # past what the upload sniffs: the import finds it
        b"d1\tReplaced\n" + MANY_DOCUMENTS[:9000].rpartition(b"\n")[0] + b"\nd3\tTh\x00ree\n",
        "contains a NUL byte",
        MANY_DOCUMENTS[:9000].rpartition(b"\n")[0].count(b"\n") + 3,
    ),
    normalised(
        "documents",
        "crlf",
        b"d1\tReplaced\r\nd3\tThree\r\n",
        same_as=b"d1\tReplaced\nd3\tThree\n",
    ),
    refused(
        "documents",
        "cr-line-ends",
        b"d1\tReplaced\rd3\tThree\r",  # read as one line, it would have 3 columns
        "carriage return (CR)",
        1,
    ),
    normalised(
        "documents",
        "huge-line",
        b'{"id": "d1", "text": "Replaced"}\n{"id": "big", "text": "%s"}\n' % HUGE_BODY.encode(),
        check=huge_body_kept,
    ),
    refused(
        "documents",
        "invalid-utf8-after-a-huge-line",
        b'{"id": "big", "text": "%s"}\n{"id": "d3", "text": "caf\xe9"}\n' % HUGE_BODY.encode(),
        f"0xE9 at column 26); {UTF8}",
        2,
    ),
    refused(
        "documents", "huge-id", b"d1\tReplaced\n" + b"x" * 300 + b"\tLong\n", "longer than 200", 2
    ),
    refused(
        "documents",
        "four-columns",
        b"d1\tReplaced\nd3\ta\tb\tc\n",
        "has 4 tab-separated columns; expected 2 (id, text) or 3",
        2,
    ),
    refused(
        "documents",
        "duplicate-id",
        b"d1\tReplaced\nd3\tThree\nd3\tAgain\n",
        "document id 'd3' repeats the document of line 2",
        3,
    ),
    refused(
        "documents",
        "jsonl-id-nan",
        b'{"id": "d1", "text": "Replaced"}\n{"id": NaN, "text": "x"}\n',
        "document id 'id' must be a string or an integer, not float",
        2,
    ),
    refused(
        "documents",
        "jsonl-escaped-nul",
        b'{"id": "d1", "text": "Replaced"}\n{"id": "d3", "text": "a\\u0000b"}\n',
        "'text' contains a NUL character",
        2,
    ),
]

RUN = b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5 r\n2 Q0 d1 1 0.7 r\n"
RUNS = [
    refused(
        "runs",
        "no-break-space-in-an-id",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d\xc2\xa0x 2 0.5 r\n",
        "document id 'd\\xa0x' contains a no-break space (U+00A0)",
        2,
    ),
    refused(
        "runs",
        "invalid-utf8",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d\xe92 2 0.5 r\n",
        f"0xE9 at column 7); {UTF8}",
        2,
    ),
    refused("runs", "utf16", RUN.decode().encode("utf-16"), UTF16, None),
    normalised(
        "runs",
        "utf16-with-encoding",
        RUN.decode().encode("utf-16"),
        same_as=RUN,
        options={"encoding": "utf-16"},
        alone=True,  # the encoding is the import's, for every file of it
    ),
    normalised("runs", "bom", UTF8_BOM + RUN, same_as=RUN),
    refused(
        "runs",
        "nul",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5 r\n1 Q0 d3\x00 3 0.2 r\n",
        "contains a NUL byte",
        3,
        at_upload=NUL_AT_UPLOAD,
    ),
    normalised("runs", "crlf", RUN.replace(b"\n", b"\r\n"), same_as=RUN),
    normalised("runs", "crlf-and-lf-mixed", RUN.replace(b"\n", b"\r\n", 1), same_as=RUN),
    refused(
        "runs",
        "cr-line-ends",
        RUN.replace(b"\n", b"\r"),
        "has 18 columns; a run line has 6",
        1,
    ),
    refused(
        "runs",
        "huge-docid",
        b"1 Q0 d1 1 1.0 r\n1 Q0 " + b"x" * 2_000_000 + b" 2 0.5 r\n",
        "is longer than 200 characters",
        2,
    ),
    refused("runs", "huge-line-no-newline", b"x" * 3_000_000, "has 1 column; a run line has 6", 1),
    refused(
        "runs",
        "five-columns",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5\n",
        "has 5 columns; a run line has 6: topic Q0 docid rank score tag",
        2,
    ),
    refused("runs", "seven-columns", b"1 Q0 d1 1 1.0 r extra\n", "has 7 columns", 1),
    refused(
        "runs",
        "score-nan",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 NaN r\n",
        "score 'NaN' is not a number (NaN)",
        2,
    ),
    refused(
        "runs",
        "score-inf",
        b"1 Q0 d1 1 inf r\n1 Q0 d2 2 0.5 r\n",
        "score 'inf' is not a finite number",
        1,
    ),
    refused(
        "runs",
        "score-minus-infinity",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 -Infinity r\n",
        "score '-Infinity' is not a finite number",
        2,
    ),
    refused(
        "runs",
        "score-1e309",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5 r\n1 Q0 d3 3 1e309 r\n",
        "score '1e309' is not a finite number",
        3,
    ),
    refused(
        "runs",
        "duplicate-doc",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5 r\n1 Q0 d1 3 0.2 r\n",
        "document 'd1' appears twice in topic '1' of run 'r' (first at line 1)",
        3,
    ),
    refused(
        "runs",
        "unknown-topic",
        b"1 Q0 d1 1 1.0 r\n999 Q0 d2 1 0.5 r\n",
        "topic '999' (of run 'r') is not in the campaign; import the topics first",
        2,
    ),
    refused(
        "runs",
        "duplicate-tag-across-files",
        b"1 Q0 d1 1 1.0 fresh\n",
        "run tag 'fresh' is also the tag of good.txt (line 1)",
        1,
    ),
    refused(
        "runs",
        "tag-already-imported",
        b"1 Q0 d1 1 1.0 base\n",
        "a run tagged 'base' is already imported; import with --replace",
        1,
    ),
    refused(
        "runs",
        "two-tags",
        b"1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5 s\n",
        "has a second run tag, 's' (line 1 has 'r'; the file holds runs r, s): import with "
        "--split-tags",
        2,
    ),
    refused(
        "runs", "truncated-gzip", gzip.compress(RUN * 50)[:60], "is a truncated gzip file", None
    ),
]

QRELS = [
    refused(
        "qrels",
        "no-break-space-in-an-id",
        b"1 0 d1 2\n1 0 d\xc2\xa0x 1\n",
        "document id 'd\\xa0x' contains a no-break space (U+00A0)",
        2,
    ),
    refused(
        "qrels",
        "three-columns-on-every-line",
        b"1 d1 2\n1 d2 1\n1 d3 0\n1 d4 0\n1 d5 1\n",
        "has 3 columns; a qrels line has 4",
        1,
        lines=5,
    ),
    refused("qrels", "invalid-utf8", b"1 0 d1 2\n1 0 d\xe92 1\n", f"0xE9 at column 6); {UTF8}", 2),
    refused("qrels", "utf16", b"1 0 d1 2\n1 0 d3 1\n".decode().encode("utf-16"), UTF16, None),
    refused(
        "qrels",
        "utf16-without-bom",
        b"1 0 d1 2\n1 0 d3 1\n".decode().encode("utf-16-le"),
        "contains NUL bytes throughout",
        None,
        at_upload=NUL_AT_UPLOAD,
    ),
    normalised("qrels", "bom", UTF8_BOM + b"1 0 d1 2\n1 0 d3 1\n", same_as=b"1 0 d1 2\n1 0 d3 1\n"),
    refused(
        "qrels",
        "nul",
        b"1 0 d1 2\n1 0 d3\x00 1\n",
        "contains a NUL byte",
        2,
        at_upload=NUL_AT_UPLOAD,
    ),
    normalised("qrels", "crlf", b"1 0 d1 2\r\n1 0 d3 1\r\n", same_as=b"1 0 d1 2\n1 0 d3 1\n"),
    refused(
        "qrels", "cr-line-ends", b"1 0 d1 2\r1 0 d3 1\r", "has 8 columns; a qrels line has 4", 1
    ),
    refused(
        "qrels",
        "huge-line",
        b"1 0 d1 2\n1 0 d3 " + b"9" * 1_000_000 + b"\n",
        "is not an integer",
        2,
    ),
    refused(
        "qrels",
        "three-columns",
        b"1 0 d1 2\n1 d3 1\n",
        "has 3 columns; a qrels line has 4: topic iteration docid label (is the iteration column",
        2,
    ),
    refused("qrels", "five-columns", b"1 0 d1 2\n1 0 d3 1 x\n", "has 5 columns", 2),
    refused("qrels", "label-nan", b"1 0 d1 2\n1 0 d3 NaN\n", "label 'NaN' is not an integer", 2),
    refused("qrels", "label-inf", b"1 0 d1 2\n1 0 d3 inf\n", "label 'inf' is not an integer", 2),
    refused(
        "qrels", "label-1e309", b"1 0 d1 2\n1 0 d3 1e309\n", "label '1e309' is not an integer", 2
    ),
    refused("qrels", "label-out-of-range", b"1 0 d1 2\n1 0 d3 4294967296\n", "is out of range", 2),
    normalised(
        "qrels",
        "duplicate-same-label",
        b"1 0 d1 2\n1 0 d3 1\n1 Q0 d3 1\n",
        same_as=b"1 0 d1 2\n1 0 d3 1\n",
        warning="line 3 repeats line 2 (same label): collapsed",
    ),
    refused(
        "qrels",
        "duplicate-conflicting-label",
        b"1 0 d1 2\n1 0 d3 1\n1 0 d3 0\n",
        "topic '1' document 'd3': label 0 conflicts with label 1 at line 2",
        3,
    ),
    normalised(
        "qrels",
        "duplicate-conflicting-label-policy-max",
        b"1 0 d1 2\n1 0 d3 1\n1 0 d3 0\n",
        same_as=b"1 0 d1 2\n1 0 d3 1\n",
        options={"on_conflict": "max"},
        warning="line 3: topic '1' document 'd3' label 0 conflicts with label 1 at line 2; kept 1",
    ),
    normalised(
        "qrels", "negative-labels", b"1 0 d1 2\n1 0 d2 -1\n1 0 d3 -2\n", check=negative_labels_kept
    ),
    refused(
        "qrels",
        "label-off-the-scale",
        b"1 0 d1 2\n1 0 d3 7\n",
        "label 7 is not on the campaign's scale (0, 1, 2; negative labels are always accepted): "
        "add the label on the rubric page",
        2,
    ),
    refused(
        "qrels",
        "unknown-topic",
        b"1 0 d1 2\n999 0 d3 1\n",
        "topic '999' is not in the campaign; import the topics first",
        2,
    ),
]

CORPUS = TOPICS + DOCUMENTS + RUNS + QRELS


# --- Campaigns, importing, and what the database holds --------------------------------------------


def seed(campaign: Campaign) -> Campaign:
    import_topics(campaign=campaign, source=io.BytesIO(SEED_TOPICS), name="seed-topics.tsv")
    import_documents(campaign=campaign, source=io.BytesIO(SEED_DOCUMENTS), name="seed-docs.tsv")
    import_runs(campaign=campaign, sources=[("seed-run.txt", io.BytesIO(SEED_RUN))])
    import_qrels(
        campaign=campaign, source=io.BytesIO(SEED_QRELS), name="seed.qrels", assessor=SOURCE
    )
    return campaign


@pytest.fixture
def campaigns(campaign) -> tuple[Campaign, Campaign]:
    """The campaign the cases go into, and an identical twin for the reference imports."""
    scale = SCALES["graded3"]
    twin = Campaign.objects.create(slug="twin", title="Twin", relevance_threshold=scale.threshold)
    twin.save_rubric(list(scale.labels))
    assert campaign.current_rubric().labels.count() == len(scale.labels)
    return seed(campaign), seed(twin)


@pytest.fixture
def logged_in(client, campaign):
    """The client of an organiser of the campaign (made without a password: hashing one costs
    more than a case)."""
    user = get_user_model().objects.create(username="olivia")
    add_member(campaign=campaign, user=user, role="organiser")
    client.force_login(user)
    return client


def import_directly(case: Case, campaign: Campaign, clean: bytes | None = None) -> ImportSummary:
    """What the command line does: the import function of the kind, on the file's bytes (or on
    the clean equivalent, with the default options)."""
    files = case.files(clean)
    options = case.options if clean is None else {}
    if case.kind == "runs":
        sources = [(name, io.BytesIO(content)) for name, content in files]
        return import_runs(campaign=campaign, sources=sources, **options)
    ((name, content),) = files
    source = io.BytesIO(content)
    if case.kind == "topics":
        return import_topics(campaign=campaign, source=source, name=name, **options)
    if case.kind == "documents":
        return import_documents(campaign=campaign, source=source, name=name, **options)
    return import_qrels(campaign=campaign, source=source, name=name, assessor=SOURCE, **options)


def upload_on_the_files_page(client, case: Case, campaign: Campaign, capture):
    """What an organiser does: POST the kind's form; the import job runs at commit (in-process)."""
    uploads = [SimpleUploadedFile(name, content) for name, content in case.files()]
    data = {f"{case.kind}-files": uploads if case.kind == "runs" else uploads[0]}
    qrels = {"assessor": SOURCE, "on_conflict": "refuse"} if case.kind == "qrels" else {}
    fields = {**qrels, **case.options}
    data.update({f"{case.kind}-{key}": value for key, value in fields.items()})
    with capture(execute=True):
        return client.post(reverse("campaigns:upload", args=[campaign.slug, case.kind]), data)


SNAPSHOT_MODELS = (Topic, Document, Run, RunTopic, Assessor, Judgment, JudgmentRevision)


def snapshot() -> dict[str, list[dict]]:
    """Every row of every model an import writes, exactly (ids and timestamps included)."""

    def plain(row: dict) -> dict:
        return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}

    return {
        model.__name__: [plain(row) for row in model.objects.order_by("pk").values()]
        for model in SNAPSHOT_MODELS
    }


def content(campaign: Campaign) -> dict[str, list[tuple]]:
    """What a campaign holds, without ids and times: equal for equivalent imports."""
    run_topics = RunTopic.objects.filter(run__campaign=campaign)
    judgments = Judgment.objects.filter(campaign=campaign)
    return {
        "topics": sorted(
            campaign.topics.values_list("topic_id", "title", "description", "narrative")
        ),
        "documents": sorted(
            campaign.documents.values_list("doc_id", "title", "body", "body_html", "is_html")
        ),
        "runs": sorted(
            (tag, superseded is None, source, lines, topics)
            for tag, superseded, source, lines, topics in campaign.runs.values_list(
                "tag", "superseded_at", "source_name", "line_count", "topic_count"
            )
        ),
        "run topics": sorted(
            (tag, topic, docids, bytes(scores), bytes(ranks), length)
            for tag, topic, docids, scores, ranks, length in run_topics.values_list(
                "run__tag", "topic__topic_id", "docids", "scores", "ranks", "length"
            )
        ),
        "judgments": sorted(
            judgments.values_list("assessor__name", "topic__topic_id", "doc_id", "label", "version")
        ),
        "revisions": sorted(
            JudgmentRevision.objects.filter(judgment__campaign=campaign).values_list(
                "judgment__topic__topic_id", "judgment__doc_id", "version", "label"
            )
        ),
        "assessors": sorted(
            (name, kind, len(details.get("imports", [])))
            for name, kind, details in campaign.assessors.values_list("name", "kind", "details")
        ),
    }


def assert_normalised(case: Case, campaign: Campaign, twin: Campaign) -> None:
    if case.same_as is not None:
        import_directly(case, twin, case.same_as)
        assert content(campaign) == content(twin)
    if case.check is not None:
        case.check(campaign)


# --- The tests ----------------------------------------------------------------------------------


def case_id(case: Case) -> str:
    return f"{case.kind}-{case.id}"


@pytest.mark.parametrize("case", CORPUS, ids=case_id)
def test_through_the_import_functions(case, campaigns):
    campaign, twin = campaigns
    before = snapshot()
    if case.refused:
        with pytest.raises(ParseError) as error:
            import_directly(case, campaign)
        # Exactly one problem (each case breaks one thing), where it is, saying what it is.
        ((problem,), more) = error.value.problems, error.value.more
        assert (problem.source, problem.line, more) == (NAME, case.line, 0), problem
        assert case.phrase in problem.message, problem
        assert problem.occurrences == error.value.count == case.lines
        assert snapshot() == before
        return
    summary = import_directly(case, campaign)
    assert snapshot() != before
    if case.warning is not None:
        assert any(case.warning in warning for warning in summary.warnings), summary.warnings
    assert_normalised(case, campaign, twin)


@pytest.mark.parametrize("case", CORPUS, ids=case_id)
def test_through_the_files_page(case, campaigns, logged_in, django_capture_on_commit_callbacks):
    campaign, twin = campaigns
    client = logged_in
    before = snapshot()
    response = upload_on_the_files_page(client, case, campaign, django_capture_on_commit_callbacks)
    if case.at_upload is not None:
        assert response.status_code == 400
        assert html.escape(case.at_upload) in response.content.decode()
        assert not Upload.objects.exists()
        assert not Job.objects.exists()
        assert snapshot() == before
        return
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(kind=f"import_{case.kind}")
    if case.refused:
        assert job.status == Job.Status.FAILED, job.error
        count = f"{case.lines} problem{'s' if case.lines > 1 else ''}"
        assert job.error == f"Nothing was imported: {count} found."
        ((problem,), more) = job.result["problems"], job.result["more"]
        where = f"{NAME}: " if case.line is None else f"{NAME} line {case.line}: "
        if case.lines > 1:
            where = f"{NAME} lines {case.line}, "
        assert (problem[: len(where)], more) == (where, 0), problem
        assert case.phrase in problem, problem
        assert snapshot() == before
        return
    assert job.status == Job.Status.DONE, (job.error, job.result)
    if case.warning is not None:
        assert any(case.warning in warning for warning in job.result["warnings"]), job.result
    assert_normalised(case, campaign, twin)


def test_the_corpus_covers_every_row_of_the_issue():
    """Every kind of bad input the issue lists is in the corpus for the kinds it applies to; and
    the summary line."""
    ids = {(case.kind, case.id) for case in CORPUS}
    assert len(ids) == len(CORPUS)  # unique ids
    wanted = {
        "invalid-utf8": KINDS,
        "utf16": KINDS,
        "bom": KINDS,
        "nul": KINDS,
        "crlf": KINDS,
        "cr-line-ends": KINDS,
        "huge": KINDS,
        "column": KINDS,
        "duplicate": KINDS,
        "nan": KINDS,
        "1e309": ("topics", "runs", "qrels"),
        "inf": ("runs", "qrels"),
        "negative-labels": ("qrels",),
        "unknown-topic": ("runs", "qrels"),
    }
    for topic, kinds in wanted.items():
        for kind in kinds:
            assert any(case.kind == kind and topic in case.id.lower() for case in CORPUS), (
                f"no {kind} case for {topic}"
            )
    with_line = [case for case in CORPUS if case.refused and case.line is not None]
    whole_file = [case for case in CORPUS if case.refused and case.line is None]
    kept = [case for case in CORPUS if not case.refused]
    at_upload = [case for case in CORPUS if case.at_upload]
    per_kind = ", ".join(f"{kind} {sum(c.kind == kind for c in CORPUS)}" for kind in KINDS)
    assert len(with_line) + len(whole_file) + len(kept) == len(CORPUS)
    print(
        f"\nbad-input corpus: {len(CORPUS)} cases ({per_kind}): {len(with_line)} refused with a "
        f"line number, {len(whole_file)} refused for the whole file, {len(kept)} normalised; "
        f"on the Files page {len(at_upload)} of them refused at upload"
    )
