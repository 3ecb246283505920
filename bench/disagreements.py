"""Benchmark: the agreement pages' list of pairs (qrels.queries.pairs_both_judged, the page's
two queries) over two assessors who judged the same 100,000 (topic, document) pairs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pj_NAME nice -n 10 python bench/disagreements.py

Creates ``<name>_pairsbench`` beside DATABASE_URL's database, migrates it, writes the pairs with
COPY (bench/evaluate.py's fill_agreement: 50 topics, labels 0-2 agreeing 70% of the time),
ANALYZEs, prints the best of --repeat for each filter, and drops the database (--keep keeps it).
Target: a page under 0.5 s whatever the number of pairs behind it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.evaluate import (  # noqa: E402
    AGREEMENT_SLUG,
    best_of,
    create_database,
    drop_database,
    fill_agreement,
    setup_django,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database.")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        sys.exit("Set DATABASE_URL=postgres://… (the benchmark creates <name>_pairsbench there).")
    name = parts.path.lstrip("/") + "_pairsbench"
    target = urlunsplit(parts._replace(path="/" + name))
    print(f"creating database {name} …", flush=True)
    create_database(target, name)
    setup_django(target)
    try:
        fill_agreement()
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        measure(args.repeat)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(url, name)


def measure(repeat: int) -> None:
    from campaigns.models import Assessor, Campaign
    from qrels.queries import PairFilter, pairs_both_judged

    campaign = Campaign.objects.get(slug=AGREEMENT_SLUG)
    ann, ben = (Assessor.objects.get(campaign=campaign, name=n).pk for n in ("ann", "ben"))
    cases = [
        ("every pair (the n), first page", PairFilter(), 0),
        ("every pair, last page", PairFilter(), None),
        ("one cell: ann 2, ben 0", PairFilter(a_label=2, b_label=0), 0),
        ("disagreements (distance >= 1)", PairFilter(distance=1), 0),
        ("one topic, distance >= 2", PairFilter(topic="017", distance=2), 0),
        ("binary cell: ann 1, ben 0", PairFilter(binary=True, a_label=1, b_label=0), 0),
    ]
    print(f"100 pairs a page, best of {repeat}:")
    for title, where, offset in cases:
        if offset is None:
            total = pairs_both_judged(campaign=campaign, a=ann, b=ben, where=where, limit=1).total
            offset = (total - 1) // 100 * 100
        seconds, page = best_of(
            repeat,
            lambda where=where, offset=offset: pairs_both_judged(
                campaign=campaign, a=ann, b=ben, where=where, limit=100, offset=offset
            ),
        )
        print(f"  {title:34s} {page.total:7,} pairs  {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
