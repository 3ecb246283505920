"""Benchmark: the organisers' Documents page search (campaigns.models.DocumentQuerySet.search,
one page of 50 and its count) on a campaign of 100,000 documents, beside a second campaign of
20,000 that must not slow it.

    DATABASE_URL=postgres://…/pj_NAME nice -n 10 python bench/document_search.py

Creates ``<name>_docsbench`` beside DATABASE_URL's database, migrates it, imports the documents
with ``import_documents`` (JSONL, about 1.5 kB of text each: words drawn from a Zipf-like
vocabulary of 30,000, so there are common words, rare ones and words in no document), ANALYZEs,
prints the best of --repeat for each search with the plan's access path, and drops the database
(--keep keeps it). Target: a page (count and rows) under 0.3 s whatever the search.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.evaluate import best_of, create_database, drop_database, setup_django  # noqa: E402

VOCABULARY = 30_000


def word(i: int) -> str:
    # Pronounceable, distinct: w0 "baba", and so on; rank i is drawn with weight 1/(i+1).
    letters = "bdfgklmnprstvz"
    vowels = "aeiou"
    out = []
    while True:
        out.append(letters[i % len(letters)] + vowels[(i // len(letters)) % len(vowels)])
        i //= len(letters) * len(vowels)
        if not i:
            return "".join(out) + "x"


def write_documents(path: Path, *, count: int, prefix: str, seed: int) -> None:
    rng = random.Random(seed)
    words = [word(i) for i in range(VOCABULARY)]
    # Cumulative weights once: random.choices would add up 30,000 weights on every call.
    cumulative = list(itertools.accumulate(1 / (i + 1) for i in range(VOCABULARY)))
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            body = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(150, 300)))
            title = " ".join(rng.choices(words, cum_weights=cumulative, k=8)).capitalize()
            record = {"id": f"{prefix}{n:07d}", "title": title, "text": body}
            out.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database.")
    parser.add_argument(
        "--compare-import",
        type=int,
        default=0,
        metavar="N",
        help="Also import N documents with the search indexes dropped, then N with them, "
        "back to back (what the indexes cost an import).",
    )
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        sys.exit("Set DATABASE_URL=postgres://… (the benchmark creates <name>_docsbench there).")
    name = parts.path.lstrip("/") + "_docsbench"
    target = urlunsplit(parts._replace(path="/" + name))
    print(f"creating database {name} …", flush=True)
    create_database(target, name)
    setup_django(target)
    try:
        fill(args.documents)
        measure(args.repeat)
        if args.compare_import:
            compare_import(args.compare_import)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(url, name)


def fill(documents: int) -> None:
    from django.db import connection

    from campaigns.imports import import_documents
    from campaigns.models import Campaign

    for slug, count, prefix, seed in (
        ("docs-big", documents, "doc", 1),
        ("docs-other", documents // 5, "oth", 2),
    ):
        campaign = Campaign.objects.create(slug=slug, title=slug)
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "documents.jsonl"
            write_documents(path, count=count, prefix=prefix, seed=seed)
            start = time.perf_counter()
            import_documents(campaign=campaign, source=path, name="documents.jsonl", format="jsonl")
            seconds = time.perf_counter() - start
            print(f"imported {count:,} documents into {slug} in {seconds:.1f} s", flush=True)
    judge(Campaign.objects.get(slug="docs-big"))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def judge(campaign) -> None:
    """Two people judge the first 1,000 documents for each of 100 topics (200,000 verdicts),
    every one under topic 1 as well: what a document's page reads."""
    from campaigns.models import Assessor, Judgment, Topic

    topics = Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(n), title=f"topic {n}", position=n)
        for n in range(1, 101)
    )
    people = [Assessor.objects.create(campaign=campaign, name=name) for name in ("ann", "ben")]
    start = time.perf_counter()
    for topic in topics:
        Judgment.objects.bulk_create(
            Judgment(
                campaign=campaign,
                topic=topic,
                doc_id=f"doc{(topic.position * 997 + n) % 100_000:07d}",
                assessor=person,
                label=n % 3,
            )
            for person in people
            for n in range(1_000)
        )
    print(f"wrote 200,000 verdicts in {time.perf_counter() - start:.1f} s", flush=True)


def compare_import(count: int) -> None:
    """Import ``count`` documents into a new campaign without the search indexes, then the same
    into another with them: the indexes' cost to an import, on the same machine a moment apart."""
    import importlib

    from django.db import connection

    from campaigns.imports import import_documents
    from campaigns.models import Campaign

    migration = importlib.import_module("campaigns.migrations.0010_document_search_indexes")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "documents.jsonl"
        write_documents(path, count=count, prefix="cmp", seed=3)
        times = {}
        for label, statements in (("without", migration.DROP), ("with", migration.CREATE)):
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
            campaign = Campaign.objects.create(slug=f"docs-{label}", title=label)
            start = time.perf_counter()
            import_documents(campaign=campaign, source=path, name="documents.jsonl", format="jsonl")
            times[label] = time.perf_counter() - start
            print(
                f"imported {count:,} documents {label} the search indexes in {times[label]:.1f} s"
            )
    print(f"  the indexes' cost: {times['with'] / times['without']:.2f}x the import's time")


def access_path(queryset) -> str:
    """The index the plan of ``queryset`` reads the documents through."""
    from django.db import connection

    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    for index in ("document_words_idx", "document_id_prefix_idx", "document_id_unique"):
        if index in plan:
            return index
    return "sequential scan" if "Seq Scan" in plan else "other"


def measure(repeat: int) -> None:
    from django.core.paginator import Paginator

    from campaigns.models import Campaign

    campaign = Campaign.objects.get(slug="docs-big")
    cases = [
        ("an exact id", "doc0054321"),
        ("an id prefix (100 ids)", "doc00123"),
        ("an id in no document", "nope"),
        ("one common word", word(0)),
        ("two common words", f"{word(0)} {word(1)}"),
        ("a rare word", word(20_000)),
        ("a rare and a common word", f"{word(20_000)} {word(3)}"),
        ("a word in no document", "zzzzunseen"),
        ("a word's beginning", word(25)[:3]),
        ("blank: every document, last page", ""),
    ]
    judged_only = [("blank, only judged documents", "")]
    print(f"one page of 50 and its count, best of {repeat}:")
    for title, text in cases:
        found = campaign.documents.search(text).only("doc_id", "title")

        def page(found=found):
            paginator = Paginator(found, 50)
            return paginator.count, list(paginator.page(paginator.num_pages))

        seconds, (count, _) = best_of(repeat, page)
        print(
            f"  {title:<36} {seconds * 1000:7.1f} ms  {count:>7,} found  via {access_path(found)}"
        )
    from django.db.models import Exists, OuterRef

    from campaigns.models import Judgment

    for title, text in judged_only:
        judged = Judgment.objects.filter(campaign=campaign, doc_id=OuterRef("doc_id"))
        found = campaign.documents.search(text).filter(Exists(judged)).only("doc_id", "title")

        def page(found=found):
            paginator = Paginator(found, 50)
            return paginator.count, list(paginator.page(paginator.num_pages))

        seconds, (count, _) = best_of(repeat, page)
        print(f"  {title:<36} {seconds * 1000:7.1f} ms  {count:>7,} found")
    from qrels.documents import document_verdicts, judgment_counts

    doc_id = "doc0001997"  # topic 2's first document
    seconds, groups = best_of(repeat, lambda: document_verdicts(campaign=campaign, doc_id=doc_id))
    verdicts = sum(len(g.verdicts) for g in groups)
    print(
        f"  a document's verdicts ({verdicts} under {len(groups)} topics) {seconds * 1000:7.1f} ms"
    )
    ids = [f"doc{n:07d}" for n in range(1990, 2040)]
    seconds, _ = best_of(repeat, lambda: judgment_counts(campaign=campaign, doc_ids=ids))
    print(f"  verdict counts of a page of 50 documents {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
