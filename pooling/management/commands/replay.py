"""``manage.py replay SLUG --qrels FILE``: judge a pool again from a qrels file, in each order.

The assessor answers from the qrels; every order is the one assessors are served
(``pooling.adjudication.Adjudicator``), over the run lists of the pool (the campaign's latest built
pool, or ``--pool VERSION``). Prints, per order, the judgments needed to find 50/80/90/95 % of
each topic's relevant documents (per topic with ``--topics``, and summed), the gain curve, where
the stopping rule (target 80 %, estimate ``--stopping``) says stop with the estimated and the true
recall there (per topic with ``--json``), and the leave-one-run-out
check: each run left out of the pool in turn, the share of its top 10 judged by the time the
others' order has found 80 % of the relevant documents.
"""

from __future__ import annotations

import json
import statistics

from django.core.management.base import BaseCommand, CommandError

from campaigns.cli import get_campaign
from campaigns.textfiles import ParseError
from pooling import adaptive
from pooling.adjudication import (
    ORDERS,
    RECALL_POINTS,
    AdjudicationError,
    TopicReplay,
    gain_curve,
    leave_one_run_out,
)
from pooling.stopping import DEFAULT_METHOD, METHODS
from qrels.formats import read_qrels_file


class Command(BaseCommand):
    help = "Replay a qrels file through the adaptive orders (depth, random, mtf, bandit)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--qrels", required=True, help="The file the assessor answers from.")
        parser.add_argument("--pool", type=int, help="Pool version (the latest built one).")
        parser.add_argument(
            "--order", nargs="+", choices=ORDERS, default=list(ORDERS), help="Orders (all four)."
        )
        parser.add_argument("--credit", choices=["prefix", "pulled"], default="prefix")
        parser.add_argument("--burn-in", type=int, default=0, help="Every run's top D first (0).")
        parser.add_argument("--budget", type=int, help="Judgments per topic at most.")
        parser.add_argument("--target", type=float, default=0.8, help="Stopping rule's recall.")
        parser.add_argument(
            "--stopping",
            choices=METHODS,
            default=DEFAULT_METHOD,
            help="The stopping estimate (pooling/stopping.py; fusion).",
        )
        parser.add_argument("--seed", type=int, default=0, help="Random order's seed.")
        parser.add_argument(
            "--all-pooled",
            action="store_true",
            help="Keep pooled documents the qrels lack (as not relevant); default: judged only.",
        )
        parser.add_argument("--no-loro", action="store_true", help="Skip leave-one-run-out.")
        parser.add_argument("--topics", action="store_true", help="Print every topic's counts.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        pools = campaign.pools.built()
        if options["pool"] is not None:
            pools = pools.filter(version=options["pool"])
        pool = pools.order_by("-version").first()
        if pool is None:
            which = f" v{options['pool']}" if options["pool"] is not None else ""
            raise CommandError(f"No built pool{which} in {slug}.")
        try:
            parsed = read_qrels_file(options["qrels"], on_conflict="max")
        except OSError as exc:
            raise CommandError(f"{options['qrels']}: {exc.strerror or exc}") from None
        except ParseError as exc:  # every problem, with its file and line
            raise CommandError(f"The qrels file is refused:\n{exc}") from None
        qrels: dict[str, dict[str, int]] = {}
        for judgment in parsed.judgments:
            qrels.setdefault(judgment.topic_id, {})[judgment.doc_id] = judgment.label
        lists = adaptive.pool_lists(pool)
        if not set(lists) & set(qrels):
            raise CommandError(
                f"The qrels judge none of pool v{pool.version}'s topics "
                f"({', '.join(sorted(lists)[:5])} …)."
            )
        settings = {
            "credit": options["credit"],
            "burn_in": options["burn_in"],
            "budget": options["budget"],
            "seed": options["seed"],
            "target": options["target"],
            "stopping_method": options["stopping"],
        }
        try:
            replays = adaptive.replay_orders(
                lists,
                qrels,
                orders=options["order"],
                judged_only=not options["all_pooled"],
                relevant_from=campaign.relevance_threshold,
                **settings,
            )
        except AdjudicationError as exc:
            raise CommandError(str(exc)) from None
        report = {order: _summary(topics) for order, topics in replays.items()}
        if not options["no_loro"]:
            by_run = _by_run(lists, qrels, judged_only=not options["all_pooled"])
            for order in options["order"]:
                shares = leave_one_run_out(
                    by_run,
                    qrels,
                    order=order,
                    fraction=options["target"],
                    credit=options["credit"],
                    burn_in=options["burn_in"],
                    seed=options["seed"],
                    relevant_from=campaign.relevance_threshold,
                )
                tags = dict(pool.runs.values_list("pk", "tag"))
                report[order]["leave_one_run_out_top10"] = {
                    tags.get(int(key), key): round(share, 4) for key, share in shares.items()
                }
        if options["json"]:
            self.stdout.write(json.dumps({"pool": pool.version, "orders": report}, indent=2))
            return
        self._print(pool, replays, report, options)

    def _print(self, pool, replays, report, options) -> None:
        out = self.stdout.write
        first = next(iter(replays.values()))
        relevant = sum(t.relevant_total for t in first)
        out(
            f"Pool v{pool.version} ({pool.describe()}): {len(first)} topics, "
            f"{sum(t.judged for t in first):,} documents, {relevant:,} relevant"
        )
        head = f"{'order':<8}" + "".join(f"{round(f * 100)}%".rjust(8) for f in RECALL_POINTS)
        head += "   stop: judged, recall in [75,90] %, median recall"
        if not options["no_loro"]:
            head += "   LORO top-10 min/mean"
        out(head)
        for order, summary in report.items():
            line = f"{order:<8}" + "".join(f"{n:>8,}" for n in summary["needed"].values())
            stop = summary["stop"]
            median = stop["median_recall"]
            line += f"   {stop['judged']:>6,}, {stop['within_75_90']}/{len(first)}, "
            line += f"{median:.0%}" if median is not None else "never"
            loro = summary.get("leave_one_run_out_top10")
            if loro:
                line += f"   {min(loro.values()):.0%} / {statistics.mean(loro.values()):.0%}"
            out(line)
        out("gain curve (judgments summed over topics: share of relevant found)")
        for order, summary in report.items():
            points = " ".join(f"{x:,}:{y:.0%}" for x, y in summary["gain_curve"])
            out(f"  {order}: {points}")
        if options["topics"]:
            for order, topics in replays.items():
                out(f"{order} per topic (topic: relevant, judgments for 50/80/90/95 %, stop)")
                for t in topics:
                    needed = "/".join(str(t.needed(f) or "-") for f in RECALL_POINTS)
                    out(f"  {t.topic_id}: {t.relevant_total}, {needed}, {t.stop_at or '-'}")


def _summary(topics: list[TopicReplay]) -> dict:
    stops = [t.recall_at(t.stop_at) for t in topics if t.stop_at is not None]
    curve = gain_curve(topics, points=10)
    return {
        "needed": {
            f"{round(f * 100)}%": sum(t.needed(f) or t.judged for t in topics)
            for f in RECALL_POINTS
        },
        "per_topic": {
            t.topic_id: {
                "relevant": t.relevant_total,
                "judged": t.judged,
                "needed": {f"{round(f * 100)}%": t.needed(f) for f in RECALL_POINTS},
                "stop_at": t.stop_at,
                "recall_at_stop": t.recall_at(t.stop_at) if t.stop_at else None,
                "estimated_recall_at_stop": t.stop_estimate,
            }
            for t in topics
        },
        "gain_curve": [(x, round(y, 4)) for x, y in curve],
        "stop": {
            "judged": sum(t.stop_at or t.judged for t in topics),
            "within_75_90": sum(1 for r in stops if 0.75 <= r <= 0.9),
            "median_recall": statistics.median(stops) if stops else None,
        },
    }


def _by_run(lists, qrels, *, judged_only: bool) -> dict[str, dict[str, list[str]]]:
    """run key -> topic id -> ranked list (the shape leave_one_run_out reads)."""
    runs: dict[str, dict[str, list[str]]] = {}
    for topic_id, by_run in lists.items():
        labels = qrels.get(topic_id)
        if not labels:
            continue
        for key, ranked in by_run.items():
            runs.setdefault(key, {})[topic_id] = (
                [d for d in ranked if d in labels] if judged_only else list(ranked)
            )
    return runs
