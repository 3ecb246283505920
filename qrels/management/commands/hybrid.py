"""``manage.py hybrid PEOPLE MODEL``: simulate a hybrid budget from two qrels files.

People judge at most B % of each topic's pairs, routed where the model is least sure; the rest
is filled with the model's labels calibrated per topic (``qrels/hybrid.py`` says how). Prints
binary Cohen's kappa of the merged qrels against the people's, per budget and routing, averaged
over ``--seeds`` seeds (each seed's value with ``--json``). No campaign, no database.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from campaigns.textfiles import ParseError, decode_lines, read_bytes
from qrels import hybrid
from qrels.formats import read_qrels_file


def _read(path: str, what: str) -> dict[tuple[str, str], int]:
    try:
        parsed = read_qrels_file(path, on_conflict="refuse")
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror or exc}") from None
    except ParseError as exc:
        raise CommandError(f"The {what} qrels are refused:\n{exc}") from None
    return {(j.topic_id, j.doc_id): j.label for j in parsed.judgments}


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class Command(BaseCommand):
    help = "Hybrid budget: people judge B % of each topic where the model is least sure."

    def add_arguments(self, parser) -> None:
        parser.add_argument("people", help="The people's qrels (the reference).")
        parser.add_argument("model", help="The model's qrels on the same pairs.")
        parser.add_argument(
            "--probabilities",
            help="The model's probability of relevance per pair: 'topic docid p' lines.",
        )
        parser.add_argument(
            "--budget",
            type=float,
            nargs="+",
            default=list(hybrid.DEFAULT_BUDGETS),
            help="Percent of each topic's pairs people judge (10 20 30 40 50 60).",
        )
        parser.add_argument(
            "--routing", nargs="+", choices=hybrid.ROUTINGS, default=list(hybrid.ROUTINGS)
        )
        parser.add_argument("--threshold", type=int, default=2, help="Relevant from (2).")
        parser.add_argument("--seed", type=int, default=0, help="First seed (0).")
        parser.add_argument("--seeds", type=int, default=5, help="Seeds to average (5).")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, people: str, model: str, **options) -> None:
        for budget in options["budget"]:
            if not 0 <= budget <= 100:
                raise CommandError(f"--budget {budget}: a percentage in [0, 100].")
        if options["seeds"] < 1:
            raise CommandError("--seeds: at least 1.")
        people_labels = _read(people, "people's")
        model_labels = _read(model, "model's")
        probabilities = None
        if options["probabilities"]:
            path = options["probabilities"]
            try:
                lines = decode_lines(read_bytes(path), source=path)
                probabilities = hybrid.parse_probabilities(lines, source=path)
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror or exc}") from None
            except ParseError as exc:
                raise CommandError(f"The probabilities are refused:\n{exc}") from None
        common = people_labels.keys() & model_labels.keys()
        if not common:
            raise CommandError(f"{people} and {model} have no (topic, document) pair in common.")
        seeds = range(options["seed"], options["seed"] + options["seeds"])
        points = hybrid.curve(
            people=people_labels,
            model=model_labels,
            budgets=options["budget"],
            routings=options["routing"],
            seeds=seeds,
            threshold=options["threshold"],
            probabilities=probabilities,
        )
        alone = hybrid.model_alone_kappa(
            people=people_labels, model=model_labels, threshold=options["threshold"]
        )
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "pairs": len(common),
                        "only_people": len(people_labels.keys() - common),
                        "only_model": len(model_labels.keys() - common),
                        "threshold": options["threshold"],
                        "model_alone_kappa": alone,
                        "seeds": list(seeds),
                        "curve": [
                            {
                                "budget": p.budget,
                                "routing": p.routing,
                                "kappa": p.mean,
                                "kappas": p.kappas,
                            }
                            for p in points
                        ],
                    },
                    indent=2,
                )
            )
            return
        self.stdout.write(
            f"{len(common):,} pairs in both files ({len(people_labels.keys() - common):,} only "
            f"in the people's, {len(model_labels.keys() - common):,} only in the model's); "
            f"binary kappa (label >= {options['threshold']}) against the people's qrels, "
            f"mean of {len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
        )
        self.stdout.write(f"model alone: {_f(alone)}")
        routings = options["routing"]
        self.stdout.write("budget  " + "  ".join(f"{r:>9}" for r in routings))
        by_key = {(p.budget, p.routing): p for p in points}
        for budget in options["budget"]:
            cells = "  ".join(f"{_f(by_key[(budget, r)].mean):>9}" for r in routings)
            self.stdout.write(f"{budget:>5g} %  {cells}")
