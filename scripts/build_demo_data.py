#!/usr/bin/env python
"""Build the demo campaign's data in ``pooljudge/demo/`` (the files ``manage.py demo`` imports).

The collection is the documentation strings of the Python standard library; the topics, rubric
and assessor plan are written in this file; the runs come from ten retrieval systems that differ
the way TREC participants differ (BM25 settings, stemming, stop words, TF-IDF, query likelihood,
a weak coordination-level baseline).

Regenerate, from the repository root, on CPython 3.11 (the docstrings differ between versions):

    pip install -e '.[demo-data]'   # scipy, scikit-learn, bm25s and PyStemmer, pinned
    python scripts/build_demo_data.py

The output is deterministic: the same Python version and the same package versions give
byte-identical files (sorted orders everywhere, gzip with mtime 0, no dependence on hash seed).
``--out DIR`` writes elsewhere (e.g. to compare with ``sha256sum``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib
import inspect
import io
import json
import math
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import scipy.sparse as sp
import Stemmer
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer, TfidfVectorizer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "pooljudge" / "demo"
PYTHON = (3, 11)
MIN_WORDS = 15  # docstrings shorter than this say too little to judge
RUN_DEPTH = 100  # documents per topic in each run
POOL_DEPTH = 10  # the depth the demo campaign pools to (see overlap.json)

# ---------------------------------------------------------------------------------------------
# The collection: docstrings of a fixed list of standard-library modules.
# Pure-Python modules plus a few C ones (math, time, select...) that import without side
# effects on CPython 3.11 / Linux. Left out: GUI and demo modules (tkinter, idlelib, turtle,
# antigravity, this), tests, platform-specific ones (winreg, msvcrt), and modules deprecated in
# 3.11 and removed in 3.13 (cgi, asyncore, imp, telnetlib...).
# ---------------------------------------------------------------------------------------------
_MODULE_LIST = """
    abc argparse array ast asyncio asyncio.base_events asyncio.events asyncio.exceptions
    asyncio.futures asyncio.locks asyncio.queues asyncio.runners asyncio.streams
    asyncio.subprocess asyncio.taskgroups asyncio.tasks asyncio.timeouts base64 binascii bisect
    bz2 calendar cmath cmd codecs codeop collections collections.abc colorsys compileall
    concurrent.futures concurrent.futures.process concurrent.futures.thread configparser
    contextlib contextvars copy copyreg csv dataclasses datetime dbm decimal difflib dis doctest
    email email.charset email.contentmanager email.encoders email.errors email.generator
    email.header email.headerregistry email.iterators email.message email.mime.application
    email.mime.audio email.mime.base email.mime.image email.mime.multipart
    email.mime.nonmultipart email.mime.text email.parser email.policy email.utils encodings enum
    errno filecmp fileinput fnmatch fractions ftplib functools gc getopt getpass gettext glob
    graphlib gzip hashlib heapq hmac html html.entities html.parser http http.client
    http.cookiejar http.cookies http.server imaplib importlib importlib.abc importlib.machinery
    importlib.metadata importlib.resources importlib.util inspect io ipaddress itertools json
    json.decoder json.encoder keyword linecache locale logging logging.config logging.handlers
    lzma mailbox marshal math mimetypes mmap modulefinder multiprocessing
    multiprocessing.connection multiprocessing.managers multiprocessing.pool
    multiprocessing.shared_memory netrc numbers operator optparse os os.path pathlib pdb pickle
    pickletools pkgutil platform plistlib poplib pprint profile pstats py_compile pyclbr queue
    quopri random re reprlib rlcompleter runpy sched secrets select selectors shelve shlex shutil
    signal site smtplib socket socketserver sqlite3 ssl stat statistics string stringprep struct
    subprocess symtable sys sysconfig tabnanny tarfile tempfile textwrap threading time timeit
    token tokenize tomllib trace traceback tracemalloc types typing unicodedata unittest
    unittest.mock urllib urllib.error urllib.parse urllib.request urllib.response
    urllib.robotparser uuid venv warnings wave weakref webbrowser wsgiref wsgiref.handlers
    wsgiref.headers wsgiref.simple_server wsgiref.util wsgiref.validate xml xml.dom
    xml.dom.minidom xml.dom.pulldom xml.etree.ElementTree xml.parsers.expat xml.sax
    xml.sax.handler xml.sax.saxutils xml.sax.xmlreader xmlrpc.client xmlrpc.server zipapp zipfile
    zipimport zlib zoneinfo
    """
MODULES = sorted(_MODULE_LIST.split())

# Docstrings of builtin types' own members: a class that inherits or copies one of these
# ("Initialize self.  See help(type(self)) for accurate signature.") says nothing of its own.
_BUILTIN_TYPES = (object, type, dict, list, set, frozenset, str, bytes, int, float, tuple)


def _builtin_boilerplate() -> set[str]:
    texts = set()
    for typ in (*_BUILTIN_TYPES, BaseException, Exception):
        if typ.__doc__:
            texts.add(inspect.cleandoc(typ.__doc__))
        for name in dir(typ):
            doc = getattr(getattr(typ, name, None), "__doc__", None)
            if isinstance(doc, str):
                texts.add(inspect.cleandoc(doc))
    return texts


def _module_members(qualname: str, module: Any) -> Iterable[tuple[str, Any]]:
    """Public classes and functions of a module: its ``__all__``, else what it defines itself
    (including what its C accelerator ``_name`` defines for it)."""
    names = getattr(module, "__all__", None)
    explicit = names is not None
    if names is None:
        names = [name for name in vars(module) if not name.startswith("_")]
    own = {qualname, module.__name__}
    own |= {"_" + name.rsplit(".", 1)[-1] for name in tuple(own)}
    for name in sorted(set(names)):
        obj = getattr(module, name, None)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        if explicit or getattr(obj, "__module__", None) in own:
            yield name, obj


def _class_members(cls: type) -> Iterable[tuple[str, Any]]:
    """Methods and properties defined by the class itself (not inherited), plus ``__init__``."""
    for name, raw in sorted(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        obj = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        if inspect.isroutine(obj) or inspect.isdatadescriptor(obj):
            yield name, obj


def collect_documents() -> list[dict[str, str]]:
    """Walk MODULES; return the documents sorted by qualified name with ids d00001, d00002..."""
    raw: dict[str, Any] = {}
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink):
        warnings.simplefilter("ignore")
        for qualname in MODULES:
            module = importlib.import_module(qualname)
            raw.setdefault(qualname, module.__doc__)
            for name, obj in _module_members(qualname, module):
                member = f"{qualname}.{name}"
                raw.setdefault(member, obj.__doc__)
                if inspect.isclass(obj):
                    for attr, value in _class_members(obj):
                        raw.setdefault(f"{member}.{attr}", getattr(value, "__doc__", None))
    boilerplate = _builtin_boilerplate()
    seen: set[str] = set()
    docs = []
    for title in sorted(raw):
        doc = raw[title]
        if not isinstance(doc, str):
            continue
        text = inspect.cleandoc(doc)
        if text in boilerplate or len(text.split()) < MIN_WORDS or text in seen:
            continue
        seen.add(text)
        docs.append({"id": f"d{len(docs) + 1:05d}", "title": title, "text": text})
    return docs


# ---------------------------------------------------------------------------------------------
# Topics. Query = title + " " + description. Ids keep their leading zeros ("001"): topic ids are
# strings, and the demo should show it.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Topic:
    num: str
    title: str
    desc: str
    narr: str

    @property
    def query(self) -> str:
        return f"{self.title} {self.desc}"


TOPICS = [
    Topic(
        "001",
        "parse command-line options",
        "How do I define the options and positional arguments my script accepts and parse them "
        "from the command line?",
        "Relevant documents describe declaring command-line options or arguments, parsing "
        "sys.argv, or producing usage and help messages for a program (argparse, optparse, "
        "getopt). Documents about parsing other inputs, such as configuration files, shell "
        "command strings or URLs, are not relevant.",
    ),
    Topic(
        "002",
        "compress files into an archive",
        "How do I pack several files into a compressed zip or tar archive?",
        "Relevant documents describe creating an archive, adding files to one, or choosing its "
        "compression (zipfile, tarfile, shutil.make_archive). Compressing a single stream with "
        "gzip, bz2 or lzma is partly relevant. Documents only about reading or extracting an "
        "existing archive, or about compression algorithms' internals, are not relevant.",
    ),
    Topic(
        "003",
        "run tasks on thread pools",
        "How can I submit many function calls to a pool of worker threads and collect their "
        "results?",
        "Relevant documents describe executors or pools that run callables on worker threads or "
        "processes and return futures or results (submit, map, as_completed, wait). Documents "
        "about low-level threads, locks or events without a pool are not relevant, nor are "
        "documents about asyncio coroutines that do not involve an executor.",
    ),
    Topic(
        "004",
        "show differences between texts",
        "How do I compare two versions of a text and show which lines were added, removed or "
        "changed?",
        "Relevant documents describe computing or displaying differences between sequences of "
        "lines or strings, such as unified or context diffs, or similarity ratios between "
        "texts. Documents that compare files only for equality, or that compare numbers or "
        "objects, are at most marginally relevant. Documents that merely mention the word "
        "'difference' are not relevant.",
    ),
    Topic(
        "005",
        "convert between time zones",
        "How do I attach a time zone to a datetime and convert it to another zone or to UTC?",
        "Relevant documents describe time-zone-aware datetimes, tzinfo objects, UTC offsets, "
        "daylight saving time, or converting local time to and from UTC. Documents about dates "
        "and times that do not involve zones or offsets (calendars, formatting, measuring "
        "elapsed time) are not relevant.",
    ),
    Topic(
        "006",
        "read and write CSV files",
        "How do I read rows from a comma-separated values file and write rows back, handling "
        "quoting and delimiters?",
        "Relevant documents describe reading or writing CSV or similar delimited tabular text, "
        "dialects, quoting or delimiters. Documents about generic text files or line reading "
        "are only marginally relevant, and documents about other formats (JSON, INI "
        "configuration, spreadsheets) are not relevant.",
    ),
    Topic(
        "007",
        "secure random tokens",
        "How do I generate unpredictable random tokens or passwords that are safe for security "
        "purposes?",
        "Relevant documents describe cryptographically strong randomness: secure tokens, random "
        "bytes from the operating system, or comparing secrets safely. Documents about the "
        "ordinary pseudo-random generator for simulations and games are relevant only if they "
        "warn that it is not suitable for security. Documents about hashing or encryption "
        "without random generation are not relevant.",
    ),
    Topic(
        "008",
        "hash file contents",
        "How do I compute a cryptographic digest such as SHA-256 of a file's contents?",
        "Relevant documents describe computing message digests or checksums of data or files "
        "(hashlib, hmac, CRC functions), including feeding data in chunks. Documents about "
        "Python's hash() of objects, hash tables or hashable types are not relevant.",
    ),
    Topic(
        "009",
        "serialize objects to bytes",
        "How do I turn arbitrary Python objects into bytes to store or send them, and restore "
        "them later?",
        "Relevant documents describe pickling, marshalling or persistent storage of Python "
        "objects (pickle, marshal, shelve, copyreg). Text serialization such as JSON is partly "
        "relevant. Documents about packing fixed binary records or encoding text into bytes "
        "are not relevant.",
    ),
    Topic(
        "010",
        "network timeouts and errors",
        "How do I make network calls give up after a timeout and detect connection errors so "
        "that I can retry them?",
        "Relevant documents describe setting timeouts on sockets, connections or requests, or "
        "the exceptions raised when a connection times out, is refused or is reset. Documents "
        "about timeouts that have nothing to do with networking (locks, queues, subprocesses) "
        "are at most marginally relevant; documents about networking without timeouts or "
        "errors are not relevant.",
    ),
    Topic(
        "011",
        "temporary files and directories",
        "How do I create a temporary file or directory that is cleaned up automatically?",
        "Relevant documents describe creating temporary files or directories, where they are "
        "created, and how they are removed. Documents about ordinary file creation or deletion "
        "that are not temporary are not relevant.",
    ),
    Topic(
        "012",
        "decimal arithmetic for money",
        "How do I do exact decimal arithmetic and rounding, for example for currency amounts?",
        "Relevant documents describe decimal (base ten) numbers, fixed precision, quantizing "
        "and rounding modes, or arithmetic contexts. Exact fractions are partly relevant. "
        "Documents about binary floating-point or integer arithmetic that do not address "
        "decimal precision are not relevant.",
    ),
    Topic(
        "013",
        "regular expression matching",
        "How do I search text for a regular expression pattern and extract the matched groups?",
        "Relevant documents describe compiling, matching, searching, splitting or substituting "
        "with regular expressions, or working with match objects and groups. Shell-style "
        "wildcards (fnmatch, glob) are not regular expressions and are not relevant, nor is "
        "structural pattern matching with match statements.",
    ),
    Topic(
        "014",
        "log to a rotating file",
        "How do I send log messages to a file that is rotated when it grows too large or at "
        "regular times?",
        "Relevant documents describe logging handlers that write to files, especially rotation "
        "by size or time and backup counts. Other logging handlers and logging configuration "
        "are partly relevant. Documents about writing files without logging are not relevant.",
    ),
    Topic(
        "015",
        "walk a directory tree",
        "How do I visit every file and subdirectory below a directory, recursively?",
        "Relevant documents describe traversing directory trees: generating the files in every "
        "subdirectory, recursive globbing, or copying or deleting whole trees. Listing a single "
        "directory is partly relevant. Documents about paths as strings without touching the "
        "file system are not relevant.",
    ),
    Topic(
        "016",
        "send e-mail",
        "How do I compose an e-mail message and send it through an SMTP server?",
        "Relevant documents describe sending mail over SMTP or building messages to send "
        "(headers, MIME parts, attachments). Documents about reading or fetching mail (IMAP, "
        "POP3, mailboxes) are not relevant, nor are documents about parsing received messages.",
    ),
    Topic(
        "017",
        "combinations and permutations",
        "How do I iterate over all combinations, permutations or Cartesian products of items?",
        "Relevant documents describe generating or counting combinations, permutations or "
        "products of elements. Other iterator tools (chaining, slicing, grouping) are only "
        "marginally relevant. Documents about random sampling or shuffling are not relevant.",
    ),
    Topic(
        "018",
        "priority queue",
        "How do I keep items in a priority queue so that the smallest or most urgent one is "
        "always taken first?",
        "Relevant documents describe heaps or priority queues: pushing items and popping the "
        "smallest, or queues that retrieve entries in priority order. Plain FIFO or LIFO "
        "queues are only marginally relevant, and sorting a list once is not relevant.",
    ),
    Topic(
        "019",
        "mock objects in unit tests",
        "How do I replace a dependency with a mock object in a unit test and check how it was "
        "called?",
        "Relevant documents describe mock objects, patching attributes during a test, or "
        "asserting on calls made to a mock. Documents about other unit-testing machinery (test "
        "cases, assertions, runners) are partly relevant. Documents that use the words fake or "
        "test in another sense are not relevant.",
    ),
    Topic(
        "020",
        "parse XML documents",
        "How do I parse an XML file or string into a tree or a stream of events and read its "
        "elements?",
        "Relevant documents describe parsing XML into element trees, DOM trees or SAX or pull "
        "events, and navigating the result. Documents only about writing or serializing XML, "
        "or about parsing HTML, are not relevant.",
    ),
]

# ---------------------------------------------------------------------------------------------
# Rubric (TREC Deep Learning style, four levels) and the assessor plan.
# ---------------------------------------------------------------------------------------------
RUBRIC_EXAMPLE_TOPIC = "004"
RUBRIC = {
    "title": "Python standard library: finding the right documentation",
    "description": (
        "Twenty information needs of a working Python programmer, judged against the "
        "documentation strings of the Python 3.11 standard library (modules, classes, functions "
        "and methods). Each document is one docstring; its title is the qualified name of the "
        "object it documents. Pools were built from ten retrieval systems (BM25 variants, "
        "TF-IDF, query likelihood and a coordination-level baseline)."
    ),
    "guidelines": (
        "Read the topic's description and narrative before the first document, and come back "
        "to them when unsure: judge each document against the narrative, not against the title "
        "alone. The narrative says what counts and, just as important, what does not.\n\n"
        "Imagine the programmer who wrote the topic reading this docstring: would it tell them "
        "what to use and how? A docstring that documents exactly the function they need is "
        "perfectly relevant even if it is short. Sharing words with the topic is not enough.\n\n"
        "Judge each document on its own. Do not lower a grade because you already saw a "
        "similar or better document, and do not guess how other documents were judged; you "
        "are not shown which system found a document or where it ranked, on purpose.\n\n"
        "If a document cannot be read (garbled, empty, in a form you cannot follow), flag it "
        "as unreadable instead of guessing. If you cannot decide between two grades, choose the "
        "lower one and flag the judgment as unsure; you can revise any judgment later."
    ),
    "threshold": 2,
    "example_topic": RUBRIC_EXAMPLE_TOPIC,
    "example_topic_title": "show differences between texts",
    "labels": [
        {
            "value": 0,
            "name": "Irrelevant",
            "description": (
                "The document has nothing to do with the topic's need, or only shares words "
                "with it."
            ),
            "example": (
                "textwrap.indent (topic 004): adds a prefix to selected lines of a text; it "
                "shares the words 'lines' and 'text' with the topic but has nothing to do with "
                "differences."
            ),
            "key": "0",
        },
        {
            "value": 1,
            "name": "Related",
            "description": (
                "The document is on a related subject but does not answer the need; the "
                "programmer would have to keep looking."
            ),
            "example": (
                "filecmp.cmp (topic 004): tells whether two files are equal, but does not show "
                "what differs between them."
            ),
            "key": "1",
        },
        {
            "value": 2,
            "name": "Highly relevant",
            "description": (
                "The document answers part of the need, or answers it in a way that needs "
                "other documents to be put to use."
            ),
            "example": (
                "difflib.SequenceMatcher.get_opcodes (topic 004): describes the edit operations "
                "that turn one sequence into another; the programmer still has to print them."
            ),
            "key": "2",
        },
        {
            "value": 3,
            "name": "Perfectly relevant",
            "description": (
                "The document is dedicated to the need and, on its own, tells the programmer "
                "what to use and how."
            ),
            "example": (
                "difflib.unified_diff (topic 004): compares two sequences of lines and "
                "generates the delta as a unified diff, showing the changed lines with a few "
                "lines of context."
            ),
            "key": "3",
        },
    ],
}

ASSESSORS = ["ada", "grace"]
OVERLAP_TOPICS = ["004", "013"]  # one of each assessor's primary topics, judged by both


# ---------------------------------------------------------------------------------------------
# Text analysis.
# ---------------------------------------------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")  # runs of letters and digits: splits on _ . and punctuation
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS)
_STEMMER = Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lowercase words; identifiers split at dots, underscores and camelCase humps
    (``os.path.join`` -> os path join, ``DictReader`` -> dict reader)."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def analyze(text: str, *, stem: bool, stop: bool) -> list[str]:
    words = tokenize(text)
    if stop:
        words = [w for w in words if w not in STOP_WORDS]
    return _STEMMER.stemWords(words) if stem else words


@dataclass(frozen=True)
class Index:
    """Token lists of documents and queries, and a docs x terms count matrix (sorted vocab)."""

    doc_tokens: list[list[str]]
    query_tokens: list[list[str]]
    counts: sp.csr_matrix
    vocab: dict[str, int]


def build_index(docs: Sequence[dict], topics: Sequence[Topic], *, stem: bool, stop: bool) -> Index:
    doc_tokens = [analyze(f"{d['title']}\n{d['text']}", stem=stem, stop=stop) for d in docs]
    query_tokens = [analyze(t.query, stem=stem, stop=stop) for t in topics]
    vectorizer = CountVectorizer(analyzer=_identity)
    counts = vectorizer.fit_transform(doc_tokens).tocsr()
    vocab = {term: int(i) for term, i in sorted(vectorizer.vocabulary_.items())}
    return Index(doc_tokens, query_tokens, counts, vocab)


def _identity(tokens: list[str]) -> list[str]:
    return tokens


# ---------------------------------------------------------------------------------------------
# Scorers: each returns a callable(query_tokens) -> scores over all documents (float64), plus
# the documents a system retrieves: those containing at least one query term.
# ---------------------------------------------------------------------------------------------
Scorer = Callable[[list[str]], np.ndarray]


def bm25_scorer(index: Index, *, k1: float, b: float) -> Scorer:
    """BM25 (Lucene variant) from bm25s, indexed from our own token ids so that term ids do not
    depend on the hash seed."""
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
    ids = [[index.vocab[t] for t in toks] for toks in index.doc_tokens]
    retriever.index((ids, dict(index.vocab)), create_empty_token=False, show_progress=False)

    def score(query: list[str]) -> np.ndarray:
        qids = [index.vocab[t] for t in query if t in index.vocab]
        if not qids:
            return np.zeros(index.counts.shape[0])
        return np.asarray(retriever.get_scores(qids), dtype=np.float64)

    return score


def tfidf_scorer(index: Index) -> Scorer:
    """Cosine between l2-normalised TF-IDF vectors (scikit-learn's smoothed idf)."""
    vectorizer = TfidfVectorizer(analyzer=_identity, norm="l2")
    matrix = vectorizer.fit_transform(index.doc_tokens)

    def score(query: list[str]) -> np.ndarray:
        q = vectorizer.transform([query])
        return np.asarray((matrix @ q.T).toarray()).ravel()

    return score


def dirichlet_ql(counts: sp.spmatrix, query_ids: Sequence[int], mu: float) -> np.ndarray:
    """Query likelihood with Dirichlet smoothing:
    sum over query terms t of log((tf(t, d) + mu * P(t | C)) / (|d| + mu)).
    ``query_ids`` may repeat a term (it then counts as often as it occurs in the query)."""
    csc = sp.csc_matrix(counts, dtype=np.float64)
    doc_len = np.asarray(csc.sum(axis=1)).ravel()
    coll = np.asarray(csc.sum(axis=0)).ravel()
    p_coll = coll / coll.sum()
    scores = np.zeros(csc.shape[0])
    for t in query_ids:
        tf = csc[:, [t]].toarray().ravel()
        scores += np.log((tf + mu * p_coll[t]) / (doc_len + mu))
    return scores


def _check_dirichlet_ql() -> None:
    # d0 = "a b", d1 = "a a", collection: a=3, b=1 of 4 tokens. Query "b", mu = 1:
    # d0: log((1 + 1/4) / 3), d1: log((0 + 1/4) / 3).
    toy = sp.csr_matrix(np.array([[1, 1], [2, 0]]))
    got = dirichlet_ql(toy, [1], mu=1.0)
    assert np.allclose(got, [math.log(1.25 / 3), math.log(0.25 / 3)]), got
    # A repeated query term doubles its contribution; "a" favours the document with more a's.
    got = dirichlet_ql(toy, [0, 0], mu=1.0)
    assert np.allclose(got, [2 * math.log(1.75 / 3), 2 * math.log(2.75 / 3)]), got
    assert got[1] > got[0]


def ql_scorer(index: Index, *, mu: float) -> Scorer:
    def score(query: list[str]) -> np.ndarray:
        qids = [index.vocab[t] for t in query if t in index.vocab]
        return dirichlet_ql(index.counts, qids, mu)

    return score


def coordination_scorer(index: Index) -> Scorer:
    """Coordination level: the number of distinct query terms the document contains."""
    binary = (index.counts > 0).astype(np.float64).tocsr()

    def score(query: list[str]) -> np.ndarray:
        qids = sorted({index.vocab[t] for t in query if t in index.vocab})
        return np.asarray(binary[:, qids].sum(axis=1)).ravel()

    return score


@dataclass(frozen=True)
class System:
    tag: str
    description: str
    stem: bool
    stop: bool
    make: Callable[[Index], Scorer]


SYSTEMS = [
    System(
        "bm25-k12-b75",
        "BM25 k1=1.2 b=0.75, Snowball stemming, stop words removed",
        True,
        True,
        lambda ix: bm25_scorer(ix, k1=1.2, b=0.75),
    ),
    System(
        "bm25-k09-b40",
        "BM25 k1=0.9 b=0.4, stemmed, stop words removed",
        True,
        True,
        lambda ix: bm25_scorer(ix, k1=0.9, b=0.4),
    ),
    System(
        "bm25-k20-b30",
        "BM25 k1=2.0 b=0.3, stemmed, stop words removed",
        True,
        True,
        lambda ix: bm25_scorer(ix, k1=2.0, b=0.3),
    ),
    System(
        "bm25-keepstop",
        "BM25 k1=1.2 b=0.75, stemmed, stop words kept",
        True,
        False,
        lambda ix: bm25_scorer(ix, k1=1.2, b=0.75),
    ),
    System(
        "bm25-nostem",
        "BM25 k1=1.2 b=0.75, no stemming, stop words removed",
        False,
        True,
        lambda ix: bm25_scorer(ix, k1=1.2, b=0.75),
    ),
    System(
        "tfidf-cos",
        "TF-IDF cosine (scikit-learn), stemmed, stop words removed",
        True,
        True,
        tfidf_scorer,
    ),
    System(
        "tfidf-cos-nostem",
        "TF-IDF cosine (scikit-learn), no stemming, stop words removed",
        False,
        True,
        tfidf_scorer,
    ),
    System(
        "ql-dir1000",
        "query likelihood, Dirichlet mu=1000, stemmed, stop words removed",
        True,
        True,
        lambda ix: ql_scorer(ix, mu=1000.0),
    ),
    System(
        "ql-dir2000-nostem",
        "query likelihood, Dirichlet mu=2000, no stemming, stop words removed",
        False,
        True,
        lambda ix: ql_scorer(ix, mu=2000.0),
    ),
    System(
        "coord-level",
        "weak baseline: number of distinct query terms in the document, no stemming",
        False,
        True,
        coordination_scorer,
    ),
]


def rank(scores: np.ndarray, matching: np.ndarray, docids: Sequence[str], depth: int):
    """The top ``depth`` matching documents in trec_eval's order: score as written (%.6f)
    descending, ties by document id descending. Returns [(docid, score_text)]."""
    rows = []
    for i in np.flatnonzero(matching):
        text = f"{scores[i]:.6f}"
        rows.append((float(text), docids[i], text))
    rows.sort(key=lambda row: (row[0], row[1]), reverse=True)
    return [(docid, text) for _, docid, text in rows[:depth]]


def make_runs(docs: Sequence[dict], topics: Sequence[Topic]) -> dict[str, dict[str, list]]:
    docids = [d["id"] for d in docs]
    indexes: dict[tuple[bool, bool], Index] = {}
    runs: dict[str, dict[str, list]] = {}
    for system in SYSTEMS:
        key = (system.stem, system.stop)
        if key not in indexes:
            indexes[key] = build_index(docs, topics, stem=system.stem, stop=system.stop)
        index = indexes[key]
        scorer = system.make(index)
        run = {}
        for topic, query in zip(topics, index.query_tokens, strict=True):
            qids = sorted({index.vocab[t] for t in query if t in index.vocab})
            matching = np.asarray(index.counts[:, qids].sum(axis=1)).ravel() > 0
            run[topic.num] = rank(scorer(query), matching, docids, RUN_DEPTH)
        runs[system.tag] = run
    return runs


# ---------------------------------------------------------------------------------------------
# Output.
# ---------------------------------------------------------------------------------------------
def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_gzip(path: Path, text: str) -> None:
    # mtime=0 and no file name in the header: the same text always gives the same bytes.
    write_bytes(path, gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))


def write_json(path: Path, obj: Any) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def topics_sgml(topics: Sequence[Topic]) -> str:
    parts = []
    for t in topics:
        for field in (t.title, t.desc, t.narr):
            assert not set("<>&") & set(field), f"no SGML markup in topic text: {field}"
        parts.append(
            f"<top>\n<num> Number: {t.num}\n<title> {t.title}\n\n<desc> Description:\n{t.desc}\n"
            f"\n<narr> Narrative:\n{t.narr}\n</top>\n"
        )
    return "\n".join(parts)


def pool_sizes(runs: dict[str, dict[str, list]], topic: str, depth: int) -> int:
    return len({docid for run in runs.values() for docid, _ in run.get(topic, [])[:depth]})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument(
        "--any-python",
        action="store_true",
        help=f"allow a Python other than {PYTHON[0]}.{PYTHON[1]} (the documents will differ)",
    )
    args = parser.parse_args(argv)
    if sys.version_info[:2] != PYTHON and not args.any_python:
        parser.error(f"run with Python {PYTHON[0]}.{PYTHON[1]} (or pass --any-python)")
    _check_dirichlet_ql()

    docs = collect_documents()
    titles = {d["title"] for d in docs}
    for label in RUBRIC["labels"]:
        name = label["example"].split(" ", 1)[0]
        assert name in titles, f"rubric example {name} is not in the collection"
    topic_ids = [t.num for t in TOPICS]
    example = next(t for t in TOPICS if t.num == RUBRIC_EXAMPLE_TOPIC)
    assert RUBRIC["example_topic_title"] == example.title
    assert len(set(topic_ids)) == len(topic_ids)
    assert set(OVERLAP_TOPICS) <= set(topic_ids)

    runs = make_runs(docs, TOPICS)

    out: Path = args.out
    write_gzip(
        out / "documents.jsonl.gz",
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs),
    )
    write_bytes(out / "topics.xml", topics_sgml(TOPICS).encode("utf-8"))
    for stale in sorted((out / "runs").glob("*.run.gz")):
        stale.unlink()  # a renamed or dropped system must not leave its old run behind
    for tag, run in runs.items():
        lines = [
            f"{topic} Q0 {docid} {rank_} {score} {tag}\n"
            for topic in topic_ids
            for rank_, (docid, score) in enumerate(run[topic], start=1)
        ]
        write_gzip(out / "runs" / f"{tag}.run.gz", "".join(lines))
    write_json(out / "rubric.json", RUBRIC)
    half = len(topic_ids) // 2
    write_json(
        out / "overlap.json",
        {
            "assessors": ASSESSORS,
            "primary": {ASSESSORS[0]: topic_ids[:half], ASSESSORS[1]: topic_ids[half:]},
            "overlap_topics": OVERLAP_TOPICS,
            "depth": POOL_DEPTH,
            "pool_sizes": {t: pool_sizes(runs, t, POOL_DEPTH) for t in topic_ids},
        },
    )

    print(f"{len(docs)} documents, {len(TOPICS)} topics, {len(runs)} runs -> {out}")
    for depth in (10, 20, 30):
        sizes = [pool_sizes(runs, t, depth) for t in topic_ids]
        print(
            f"pool depth {depth}: min {min(sizes)} mean {sum(sizes) / len(sizes):.1f} "
            f"max {max(sizes)}  per topic {sizes}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
