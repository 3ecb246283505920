"""Benchmark: scoring all 143 TREC-COVID round-1 runs from the stored runs, against pytrec_eval
reading the files; and agreement over 100,000 doubly-judged pairs read from the database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/pj_reports python bench/evaluate.py

DATABASE_URL names the server (and the prefix of the throwaway database): the benchmark creates
``<name>_evalbench``, migrates it, imports the 143 runs (pooling.imports.import_runs) and the
round-1 qrels (qrels.imports.import_qrels) from ../shared/data/trec-covid-round1, adds a second
campaign with two assessors who judged the same 100,000 (topic, document) pairs (written with
COPY), measures, and drops the database (``--keep`` keeps it for a rerun with ``--reuse``).

Printed, each the best of --repeat runs, all in this one process:
  (a) stored     the campaign's qrels from the database (qrels.policies.campaign_qrels), every
                 RunTopic row read as tuples (qrels.queries.stored_runs: values_list, the
                 packed float64 scores through numpy.frombuffer) and qrels.evaluation.evaluate_runs
                 for AP, nDCG@10, P@10, Rprec and bpref (one reused RelevanceEvaluator)
  (b) files      pytrec_eval.parse_qrel and pytrec_eval.parse_run on the same files, one
                 RelevanceEvaluator for the same five measures, evaluate() per run
  the ratio (a)/(b) (target: at most 1.2) and the largest difference between their scores;
  the page's whole report (seven measures, pool facts) for reference; and for agreement, the
  matrix page (every pair, no bootstrap) and the pair page (1,000 bootstrap resamples, overall
  and per topic), each including reading the judgments (target: under a second).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.statistics_modes import MODES, set_mode  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "trec-covid-round1"
QRELS = DATA / "qrels" / "qrels-rnd1.txt"
SLUG = "bench-covid"
AGREEMENT_SLUG = "bench-agreement"
FIVE = ("AP", "nDCG@10", "P@10", "Rprec", "bpref")
TREC_FIVE = {"map", "ndcg_cut.10", "P.10", "Rprec", "bpref"}
TREC_KEYS = {"AP": "map", "nDCG@10": "ndcg_cut_10", "P@10": "P_10", "Rprec": "Rprec"}
TREC_KEYS["bpref"] = "bpref"
PAIRS, AGREEMENT_TOPICS = 100_000, 50


def bench_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        sys.exit("bench/evaluate.py needs DATABASE_URL=postgres://… (PostgreSQL)")
    name = parts.path.lstrip("/") + "_evalbench"
    return urlunsplit(parts._replace(path="/" + name)), name


def admin_url(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/postgres"))


def create_database(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "bench-evaluate-secret-key-0123456789"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
    )


def drop_database(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("SECRET_KEY", "bench-evaluate-secret-key-0123456789-abcdefghijklmnop")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pooljudge.settings")
    import django

    django.setup()


def best_of(repeat: int, call):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


# --- Data -----------------------------------------------------------------------------------------


def import_covid(paths: list[Path]) -> None:
    from campaigns.models import Campaign, Topic
    from campaigns.scales import SCALES
    from pooling.imports import import_runs
    from qrels.imports import import_qrels

    campaign = Campaign.objects.create(slug=SLUG, title="TREC-COVID round 1", relevance_threshold=1)
    campaign.save_rubric(list(SCALES["graded3"].labels), note="preset")
    Topic.objects.bulk_create(
        Topic(campaign=campaign, topic_id=str(n), position=n) for n in range(1, 31)
    )
    start = time.perf_counter()
    summary = import_runs(campaign=campaign, sources=[(p.name, str(p)) for p in paths])
    print(f"  imported {summary.message()} in {time.perf_counter() - start:.1f} s", flush=True)
    import_qrels(campaign=campaign, source=str(QRELS), name=QRELS.name, assessor="NIST-round1")


def fill_agreement() -> None:
    """Two assessors, the same 100,000 pairs over 50 topics, labels 0-2 agreeing 70% of the
    time, through COPY."""
    from django.db import connection, transaction

    from campaigns.models import Assessor, Campaign, Judgment, Topic
    from campaigns.scales import SCALES

    rng = random.Random(7)
    with transaction.atomic():
        campaign = Campaign.objects.create(
            slug=AGREEMENT_SLUG, title="Agreement benchmark", relevance_threshold=1
        )
        campaign.save_rubric(list(SCALES["graded3"].labels), note="preset")
        topics = [
            Topic.objects.create(campaign=campaign, topic_id=f"{n:03d}", position=n)
            for n in range(1, AGREEMENT_TOPICS + 1)
        ]
        first, second = (
            Assessor.objects.create(campaign=campaign, name=name) for name in ("ann", "ben")
        )
        columns = (
            "campaign_id, topic_id, doc_id, assessor_id, label, source, judged_at, "
            "first_judged_at, note, unreadable, unsure, version, iteration"
        )
        stamp = "2025-03-01 09:00:00+00"
        lines = []
        for i in range(PAIRS):
            topic = topics[i % AGREEMENT_TOPICS].pk
            label = rng.choice((0, 0, 0, 0, 1, 2))
            other = label if rng.random() < 0.7 else rng.choice((0, 1, 2))
            for who, given in ((first, label), (second, other)):
                lines.append(
                    f"{campaign.pk}\t{topic}\tdoc{i:07d}\t{who.pk}\t{given}\tjudged\t{stamp}\t"
                    f"{stamp}\t\tf\tf\t1\t\n"
                )
        with connection.cursor() as cursor:
            with cursor.cursor.copy(
                f"COPY {Judgment._meta.db_table} ({columns}) FROM STDIN"
            ) as copy:
                copy.write("".join(lines))
            cursor.execute("ANALYZE")


# --- Measurements ---------------------------------------------------------------------------------


def stored(campaign):
    from qrels.evaluation import evaluate_runs
    from qrels.policies import campaign_qrels
    from qrels.queries import current_runs, stored_runs

    qrels = campaign_qrels(campaign=campaign)
    loaded = time.perf_counter()
    runs = stored_runs(runs=current_runs(campaign))
    read = time.perf_counter() - loaded
    scores = evaluate_runs(qrels, runs, measures=FIVE, relevance_threshold=1)
    return scores, read


def from_files(paths: list[Path]):
    import pytrec_eval

    start = time.perf_counter()
    with QRELS.open() as handle:
        qrels = pytrec_eval.parse_qrel(handle)
    runs = {}
    for path in paths:
        with path.open() as handle:
            runs[path.name] = pytrec_eval.parse_run(handle)
    parsed = time.perf_counter() - start
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, TREC_FIVE, relevance_level=1)
    results = {name: evaluator.evaluate(run) for name, run in runs.items()}
    return results, parsed, len(qrels)


def tags_by_file(paths: list[Path]) -> dict[str, str]:
    """file name -> run tag (the sixth column of its first line)."""
    tags = {}
    for path in paths:
        with path.open() as handle:
            tags[path.name] = handle.readline().split()[5]
    return tags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark database.")
    parser.add_argument("--reuse", action="store_true", help="Reuse a kept benchmark database.")
    parser.add_argument(
        "--statistics",
        choices=("both", *MODES),
        default="both",
        help="measure without planner statistics (none), after ANALYZE (fresh), or both",
    )
    args = parser.parse_args()
    if not (DATA / "runs").is_dir() or not QRELS.is_file():
        sys.exit(f"{DATA} is absent: the benchmark needs the TREC-COVID round-1 runs and qrels.")
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("Set DATABASE_URL=postgres://… (the benchmark creates <name>_evalbench there).")
    paths = sorted((DATA / "runs").iterdir())
    target_url, name = bench_url(url)
    if not args.reuse:
        print(f"creating database {name} …", flush=True)
        create_database(target_url, name)
    setup_django(target_url)
    try:
        if not args.reuse:
            print(f"importing {len(paths)} runs and the round-1 qrels …", flush=True)
            import_covid(paths)
            fill_agreement()
        for mode in MODES if args.statistics == "both" else (args.statistics,):
            set_mode(mode)
            print(f"--- planner statistics: {mode} ---", flush=True)
            measure(paths, args.repeat)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(url, name)


def measure(paths: list[Path], repeat: int) -> None:
    from campaigns.models import Campaign
    from pooling.models import RunTopic
    from qrels.agreement_data import agreement_data
    from qrels.runscores import QrelsSource, evaluation_report

    campaign = Campaign.objects.get(slug=SLUG)
    lines = sum(RunTopic.objects.filter(run__campaign=campaign).values_list("length", flat=True))
    print(f"{campaign.runs.count()} runs, {lines:,} ranked documents, 30 topics; best of {repeat}")
    # Alternate the two so that neither profits from a warmer machine.
    a_times, b_times = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        scores, read = stored(campaign)
        a_times.append((time.perf_counter() - start, read))
        start = time.perf_counter()
        direct, parsed, topic_count = from_files(paths)
        b_times.append((time.perf_counter() - start, parsed))
    (a, a_read), (b, b_parse) = min(a_times), min(b_times)
    tags = tags_by_file(paths)
    by_tag = {tags[name]: result for name, result in direct.items()}
    worst = 0.0
    for s in scores:
        for measure, key in TREC_KEYS.items():
            mean = sum(v[key] for v in by_tag[s.run].values()) / topic_count
            worst = max(worst, abs(mean - s.mean[measure]))
            for topic, values in s.per_topic.items():
                worst = max(worst, abs(values[measure] - by_tag[s.run][topic][key]))
    print(
        f"(a) stored runs + evaluate_runs, 5 measures: {a:6.2f} s "
        f"(reading {a_read:.2f} s, qrels and scoring {a - a_read:.2f} s)"
    )
    print(
        f"(b) pytrec_eval on the files, 5 measures:    {b:6.2f} s "
        f"(parsing {b_parse:.2f} s, scoring {b - b_parse:.2f} s)"
    )
    print(f"ratio (a)/(b): {a / b:.2f}x (target <= 1.2x); largest score difference {worst:.1e}")
    page, report = best_of(1, lambda: evaluation_report(campaign=campaign, source=QrelsSource()))
    print(
        f"the evaluation page's whole report (7 measures incl. infAP and Judged@10, pool facts): "
        f"{page:.2f} s for {len(report.runs)} runs"
    )

    other = Campaign.objects.get(slug=AGREEMENT_SLUG)
    matrix, data = best_of(repeat, lambda: agreement_data(campaign=other, bootstrap=0))
    (pair,) = data.pairs
    detail, _ = best_of(
        repeat, lambda: agreement_data(campaign=other, assessors=["ann", "ben"], bootstrap=1000)
    )
    print(
        f"agreement over {pair.n:,} doubly-judged pairs from the database "
        f"(kappa {pair.cohen_kappa:.3f}, {len(pair.per_topic)} topics):"
    )
    print(f"  matrix page (read + every statistic, per topic):        {matrix:.2f} s")
    print(f"  pair page (read + statistics + 1,000-resample intervals): {detail:.2f} s")
    print("  target: under 1 s each")


if __name__ == "__main__":
    main()
