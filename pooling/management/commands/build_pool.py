import time

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from campaigns.cli import StderrProgress, get_campaign
from campaigns.models import Job
from pooling.models import Pool
from pooling.pools import ORDERS, PoolDefinitionError, create_pool


def parse_strata(text: str) -> list[dict]:
    """``1-10:1,11-100:0.1`` -> strata dicts (ranks inclusive, rate as a fraction)."""
    strata = []
    for part in text.split(","):
        try:
            ranks, rate = part.split(":")
            first, last = ranks.split("-")
            strata.append({"first_rank": int(first), "last_rank": int(last), "rate": float(rate)})
        except ValueError:
            raise CommandError(
                f"Stratum {part!r} is not FIRST-LAST:RATE (e.g. 1-10:1,11-100:0.1)."
            ) from None
    return strata


def parse_depths(text: str) -> dict[str, int]:
    """``bm25=50,tfidf=20`` -> per-run depths."""
    depths = {}
    for part in text.split(","):
        tag, _, value = part.partition("=")
        if not value.isdigit():
            raise CommandError(f"Per-run depth {part!r} is not TAG=K.")
        depths[tag] = int(value)
    return depths


class Command(BaseCommand):
    help = "Build a pool as a background job (depth, sample, rrf or rbp; optionally residual)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--strategy", choices=Pool.Strategy.values, default="depth")
        parser.add_argument("--depth", type=int, help="depth: k; rrf/rbp: how deep runs are read")
        parser.add_argument("--depth-per-run", help="depth: per-run k, e.g. bm25=50,tfidf=20")
        parser.add_argument("--strata", help="sample: e.g. 1-10:1,11-100:0.1")
        parser.add_argument("--budget", type=int, help="rrf/rbp: documents per topic")
        parser.add_argument("--k", type=float, default=60, help="rrf: the constant k (60)")
        parser.add_argument("--p", type=float, default=0.8, help="rbp: persistence p (0.8)")
        parser.add_argument("--aggregate", choices=["sum", "max"], default="sum")
        parser.add_argument(
            "--order",
            choices=ORDERS,
            default="trec_eval",
            help="trec_eval (score, ties by docid desc) or the file's rank column",
        )
        parser.add_argument(
            "--residual", action="store_true", help="Only pairs not yet judged in the campaign."
        )
        parser.add_argument("--runs", nargs="+", metavar="TAG", help="Contributing runs (all).")
        parser.add_argument("--topics", help="Comma-separated topic ids (all the runs rank).")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--note", default="")
        parser.add_argument("--wait", action="store_true", help="Show progress until it ends.")

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        runs = None
        if options["runs"]:
            found = {
                run.tag: run for run in campaign.runs.current().filter(tag__in=options["runs"])
            }
            missing = sorted(set(options["runs"]) - found.keys())
            if missing:
                raise CommandError(f"No run tagged {', '.join(missing)} in {slug}.")
            runs = [found[tag] for tag in options["runs"]]
        topics = None
        if options["topics"]:
            wanted = [t.strip() for t in options["topics"].split(",") if t.strip()]
            topics = list(campaign.topics.filter(topic_id__in=wanted))
            missing = sorted(set(wanted) - {t.topic_id for t in topics})
            if missing:
                raise CommandError(f"No topic {', '.join(missing)} in {slug}.")
        params = {
            "depth": options["depth"],
            "budget": options["budget"],
            "k": options["k"],
            "p": options["p"],
            "aggregate": options["aggregate"],
            "order": options["order"],
            "residual": options["residual"],
        }
        if options["strata"]:
            params["strata"] = parse_strata(options["strata"])
        if options["depth_per_run"]:
            params["depth_per_run"] = parse_depths(options["depth_per_run"])
        try:
            with transaction.atomic():
                pool = create_pool(
                    campaign=campaign,
                    strategy=options["strategy"],
                    params=params,
                    runs=runs,
                    topics=topics,
                    seed=options["seed"],
                    note=options["note"],
                )
        except PoolDefinitionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Pool v{pool.version} (id {pool.pk}): job {pool.job_id} queued.")
        if options["wait"]:
            self._wait(pool)

    def _wait(self, pool: Pool) -> None:
        progress = StderrProgress()
        job = pool.job
        while True:
            job.refresh_from_db()
            if job.is_final:
                break
            progress(job.progress_done, job.progress_total, job.progress_message)
            time.sleep(0.3)
        progress.close()
        pool.refresh_from_db()
        if job.status != Job.Status.DONE:
            raise CommandError(f"Job {job.pk} {job.status}: {job.error}")
        totals = pool.stats.get("totals", {})
        self.stdout.write(
            f"Pool v{pool.version} built: {pool.size:,} documents over {totals.get('topics', 0)} "
            f"topics ({totals.get('distinct_share', 0):.0%} of runs x k distinct)."
        )
