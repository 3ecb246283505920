import dataclasses
import json

from django.core.management.base import BaseCommand, CommandError

from campaigns.cli import get_campaign
from pooling.pools import PLANNER_DEPTHS, plan


def by_tag(per_run: dict[str, dict], tags: dict[int, str]) -> dict[str, dict]:
    """Per-run rows keyed by run tag (what organisers know a run by), each with its database id
    beside it; a tag two runs of the pool share (a run and its replacement) gets its id too."""
    named = [(tags.get(int(key), key), int(key), row) for key, row in per_run.items()]
    counts: dict[str, int] = {}
    for tag, _pk, _row in named:
        counts[tag] = counts.get(tag, 0) + 1
    out = {}
    for tag, pk, row in named:
        key = tag if counts[tag] == 1 else f"{tag} (run {pk})"
        out[key] = {**row, "run": tag, "run_id": pk}
    return out


class Command(BaseCommand):
    help = "Print a pool's statistics and the depth planner (documents and hours per depth)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--pool", type=int, help="Pool version (the latest built one).")
        parser.add_argument("--depths", default=",".join(map(str, PLANNER_DEPTHS)))
        parser.add_argument("--seconds", type=float, help="Seconds per judgment for the hours.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, slug: str, **options) -> None:
        campaign = get_campaign(slug)
        try:
            depths = [int(d) for d in options["depths"].split(",") if d.strip()]
        except ValueError:
            raise CommandError("--depths takes comma-separated whole numbers.") from None
        pools = campaign.pools.built()
        pool = (pools.filter(version=options["pool"]) if options["pool"] else pools).first()
        if options["pool"] and pool is None:
            raise CommandError(f"No built pool v{options['pool']} in {slug}.")
        planner = plan(campaign=campaign, depths=depths, seconds=options["seconds"])
        tags = dict(campaign.runs.values_list("pk", "tag"))
        if options["json"]:
            out = {
                "pool": None
                if pool is None
                else {
                    "version": pool.version,
                    "strategy": pool.strategy,
                    "params": _params_by_tag(pool.params, tags),
                    "runs": sorted(pool.runs.values_list("tag", flat=True)),
                    "size": pool.size,
                    "stats": {
                        **pool.stats,
                        "per_run": by_tag(pool.stats.get("per_run", {}), tags),
                    },
                },
                "planner": {**planner, "rows": [dataclasses.asdict(r) for r in planner["rows"]]},
            }
            self.stdout.write(json.dumps(out, indent=2))
            return
        if pool is not None:
            totals = pool.stats["totals"]
            self.stdout.write(f"Pool v{pool.version}: {pool.describe()}")
            self.stdout.write(
                f"  {pool.size:,} documents, {totals['topics']} topics, {totals['runs']} runs, "
                f"{totals['distinct_share']:.1%} of runs x k distinct, "
                f"{totals['already_judged']:,} already judged"
            )
            self.stdout.write(f"  {'run':<30} {'unique':>8} {'judged in top k':>16}")
            for tag, row in by_tag(pool.stats["per_run"], tags).items():
                self.stdout.write(f"  {tag:<30} {row['unique']:>8} {row['judged_in_top_k']:>16}")
        self.stdout.write(
            f"Planner ({planner['runs']} runs, {planner['topics']} topics, "
            f"{planner['seconds_per_judgment']:.0f} s per judgment"
            f"{' measured' if planner['seconds_measured'] else ' assumed'}):"
        )
        self.stdout.write(
            f"  {'depth':>5} {'per topic':>10} {'min':>5} {'max':>5} {'total':>8} "
            f"{'runs x k':>9} {'new':>8} {'hours':>7} {'rel found':>9}"
        )
        for row in planner["rows"]:
            found = "" if row.relevant_found is None else f"{row.relevant_found:.0%}"
            self.stdout.write(
                f"  {row.depth:>5} {row.docs_per_topic_mean:>10.1f} {row.docs_per_topic_min:>5} "
                f"{row.docs_per_topic_max:>5} {row.total_docs:>8,} {row.share_of_runs_x_k:>9.0%} "
                f"{row.new_docs:>8,} {row.assessor_hours:>7.1f} {found:>9}"
            )


def _params_by_tag(params: dict, tags: dict[int, str]) -> dict:
    """The pool's parameters with per-run depths keyed by run tag, as they were given."""
    if not params.get("depth_per_run"):
        return params
    return {
        **params,
        "depth_per_run": {
            tags.get(int(key), key): depth for key, depth in params["depth_per_run"].items()
        },
    }
