"""Micro-benchmark: the run parser against a split-only floor, on generated runs.

    python bench/parse_runs.py                        # 20 runs x 50 topics x 1000 docs
    python bench/parse_runs.py --runs 100 --trectools # the import benchmark's size, and TrecTools

Prints, per stage, the best of --repeat CPU times (time.process_time, which other processes on
a busy machine disturb less than wall time):
  floor        for line in lines: line.split()            (lines already decoded and split)
  parse        pooling.formats.parse_run_text(text)        (text already decoded)
  floor+read   read, decode and split the files, then the floor loop
  read_run     pooling.formats.read_run_file(path)         (the import's hot path)
  trectools    trectools.TrecRun(path)                     (with --trectools)
and the ratios parse/floor and read_run/floor+read.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pooling.formats import parse_run_text, read_run_file


def generate(directory: Path, *, runs: int, topics: int, depth: int, scores: str) -> list[Path]:
    """Write `runs` run files of `topics` x `depth` lines; return their paths."""
    rng = random.Random(2024)
    paths = []
    for number in range(runs):
        tag = f"run_{number:03d}"
        lines = []
        for topic in range(1, topics + 1):
            values = sorted((rng.random() * 30 for _ in range(depth)), reverse=True)
            if scores == "short":
                texts = [f"{value:.4f}" for value in values]  # ties appear, as in real runs
            else:
                texts = [repr(value) for value in values]  # full precision: slow for float()
            docs = rng.sample(range(10_000_000), depth)
            separator = "\t" if number % 2 else " "
            lines += [
                separator.join((str(topic), "Q0", f"DOC-{doc:08d}", str(rank), text, tag))
                for rank, (doc, text) in enumerate(zip(docs, texts, strict=True), 1)
            ]
        path = directory / f"{tag}.txt"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def best_of(repeat: int, work) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--scores", choices=("short", "repr"), default="short")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trectools", action="store_true", help="also time TrecTools")
    parser.add_argument("--dir", type=Path, help="existing run files to use instead")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        if args.dir:
            paths = sorted(p for p in args.dir.iterdir() if p.is_file())
        else:
            paths = generate(
                Path(scratch),
                runs=args.runs,
                topics=args.topics,
                depth=args.depth,
                scores=args.scores,
            )
        texts = [path.read_bytes().decode() for path in paths]
        all_lines = [text.split("\n") for text in texts]
        count = sum(text.count("\n") for text in texts)
        size = sum(map(len, texts))
        print(f"{len(paths)} files, {count:,} lines, {size / 1e6:.1f} MB")

        def floor() -> None:
            for lines in all_lines:
                for line in lines:
                    line.split()

        def parse() -> None:
            for text in texts:
                parse_run_text(text)

        def floor_read() -> None:
            for path in paths:
                for line in path.read_bytes().decode().split("\n"):
                    line.split()

        def read_run() -> None:
            for path in paths:
                read_run_file(path)

        results = {
            "floor": best_of(args.repeat, floor),
            "parse": best_of(args.repeat, parse),
            "floor+read": best_of(args.repeat, floor_read),
            "read_run": best_of(args.repeat, read_run),
        }
        if args.trectools:
            import warnings

            from trectools import TrecRun

            warnings.filterwarnings("ignore")
            results["trectools"] = best_of(1, lambda: [TrecRun(str(p)) for p in paths])
        for stage, seconds in results.items():
            print(f"{stage:12s} {seconds:7.3f} s  {seconds / count * 1e9:6.0f} ns/line")
        print(f"parse / floor            {results['parse'] / results['floor']:.2f}x")
        print(f"read_run / floor+read    {results['read_run'] / results['floor+read']:.2f}x")
        if "trectools" in results:
            print(f"read_run / trectools     {results['read_run'] / results['trectools']:.2f}x")


if __name__ == "__main__":
    main()
