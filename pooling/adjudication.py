"""Adaptive adjudication: which pooled document of a topic to judge next, given the judgments.

Pure and deterministic, like ``pooling.strategies``: nothing here touches Django. The judging
screen (through ``pooling.adaptive``), ``manage.py replay`` and ``bench/adjudication.py`` all drive
the same :class:`Adjudicator`, so a replay measures exactly what assessors are served.

One adjudicator holds one topic: every run's ranked list of that topic's pooled documents (best
first), the labels given so far, and what each order needs to choose the next document.

Orders
    ``depth``   all rank-1 documents of every run (runs in the order given), then rank 2, …: the
                order in which a depth-k pool fills up.
    ``random``  a seeded shuffle of the topic's documents (the static order assessors get today).
    ``mtf``     move-to-front (Cormack, Palmer & Clarke, SIGIR 1998): every run starts with the same
                priority; the current run's next unjudged document is judged while its documents
                keep coming back relevant; a non-relevant one lowers its priority by one and the
                turn passes to the first run (in the order given) with the highest priority.
    ``bandit``  MaxMean (Losada, Parapar & Barreiro, SAC 2016, IP&M 2017): each run is an arm with a
                Beta(1, 1) prior on "its next document is relevant"; the run with the highest
                posterior mean (rel + 1) / (judged + 2) contributes its next unjudged document; ties
                go to the first run in the order given.

Credit (how a judgment feeds the runs' evidence, for ``bandit``)
    ``prefix``  (default) a run's evidence is the judged prefix of its list: every run is credited
                with every judged document up to its first unjudged one, whoever chose it. A run
                that retrieved a document another run contributed learns from it too, and evidence
                never depends on the order in which judgments arrive (so concurrent assessors end in
                the state a sequential replay gives).
    ``pulled``  only the run whose turn chose the document is credited (Losada et al.'s reading of
                an arm pull); burn-in documents credit every run holding them in their burn-in
                depth. ``bench/adjudication.py`` measures both.
    MTF always moves on the chosen run's outcome: that is what the method is.

Burn-in and budget (Voorhees, CIKM 2018)
    ``burn_in`` d: every run's top-d documents are judged first (in depth order) before adaptive
    choice starts, so assessors learn the topic on the documents every run ranks first and every
    run gets at least a shallow evaluation. ``budget``: the topic stops after this many judgments.

Documents being judged by someone else (claimed, not yet judged) are passed as ``pending``: the
choice skips them as if judged, so two assessors sharing a topic never get the same document.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pooling import stopping
from pooling.stopping import DEFAULT_METHOD, DEFAULT_TARGET, Estimate

ORDERS = ("depth", "random", "mtf", "bandit")
ADAPTIVE_ORDERS = ("mtf", "bandit")
CREDITS = ("prefix", "pulled")
RECALL_POINTS = (0.5, 0.8, 0.9, 0.95)


class AdjudicationError(ValueError):
    """The order cannot be set up as asked (a sentence for the organiser)."""


@dataclass(frozen=True)
class Choice:
    """The next document and the run whose turn chose it (None in burn-in, depth and random)."""

    doc_id: str
    run: str | None


@dataclass
class Adjudicator:
    """One topic's adaptive order. ``runs`` maps run key -> ranked document ids (best first, each
    id at most once); the runs' order is the order given (ties go to the earlier run)."""

    runs: Mapping[str, Sequence[str]]
    order: str = "bandit"
    credit: str = "prefix"
    burn_in: int = 0
    budget: int | None = None
    seed: int = 0
    relevant_from: int = 1

    # Derived and mutable state (built in __post_init__).
    run_keys: list[str] = field(init=False)
    docs: list[str] = field(init=False)
    lists: list[list[int]] = field(init=False)
    labels: dict[int, int] = field(init=False)
    chosen_by: dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise AdjudicationError(
                f"Unknown order {self.order!r}: choose one of {', '.join(ORDERS)}."
            )
        if self.credit not in CREDITS:
            raise AdjudicationError(
                f"Unknown credit {self.credit!r}: choose one of {', '.join(CREDITS)}."
            )
        if self.burn_in < 0:
            raise AdjudicationError(f"Burn-in depth must be 0 or more, not {self.burn_in}.")
        if self.budget is not None and self.budget < 1:
            raise AdjudicationError(f"A budget must be at least 1 judgment, not {self.budget}.")
        self.run_keys = list(self.runs)
        index: dict[str, int] = {}
        self.docs = []
        self.lists = []
        for key in self.run_keys:
            ranked: list[int] = []
            seen: set[int] = set()
            for doc in self.runs[key]:
                d = index.get(doc)
                if d is None:
                    d = index[doc] = len(self.docs)
                    self.docs.append(doc)
                if d in seen:
                    raise AdjudicationError(f"Run {key!r} lists document {doc!r} twice.")
                seen.add(d)
                ranked.append(d)
            self.lists.append(ranked)
        self.index = index
        # doc -> [(run, position)], to move the cursors of the runs a judgment concerns.
        self.holders: list[list[tuple[int, int]]] = [[] for _ in self.docs]
        for r, ranked in enumerate(self.lists):
            for position, d in enumerate(ranked):
                self.holders[d].append((r, position))
        n_runs = len(self.lists)
        self.labels = {}
        self.chosen_by = {}
        self.cursor = [0] * n_runs  # first unjudged position of each run's list
        self.rel = [0] * n_runs
        self.judged = [0] * n_runs
        self.priority = [0] * n_runs
        self.current: int | None = None
        self.depth_order = self._depth_order(None)
        self.burn_order = self._depth_order(self.burn_in) if self.burn_in else []
        self._burn_pointer = 0
        self._static_pointer = 0
        if self.order == "random":
            shuffled = list(range(len(self.docs)))
            _random.Random(self.seed).shuffle(shuffled)
            self.static_order = shuffled
        elif self.order == "depth":
            self.static_order = self.depth_order
        else:
            self.static_order = []

    def _depth_order(self, depth: int | None) -> list[int]:
        longest = max((len(ranked) for ranked in self.lists), default=0)
        stop = longest if depth is None else min(depth, longest)
        seen: set[int] = set()
        result = []
        for position in range(stop):
            for ranked in self.lists:
                if position < len(ranked) and ranked[position] not in seen:
                    seen.add(ranked[position])
                    result.append(ranked[position])
        return result

    # --- State -----------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.docs)

    @property
    def judged_count(self) -> int:
        return len(self.labels)

    @property
    def relevant_count(self) -> int:
        return sum(1 for label in self.labels.values() if label >= self.relevant_from)

    @property
    def in_burn_in(self) -> bool:
        self._skip_judged_burn_in()
        return self._burn_pointer < len(self.burn_order)

    def _skip_judged_burn_in(self) -> None:
        while (
            self._burn_pointer < len(self.burn_order)
            and self.burn_order[self._burn_pointer] in self.labels
        ):
            self._burn_pointer += 1

    def exhausted(self, pending: int = 0) -> bool:
        """True when the budget is spent or nothing is left to judge."""
        used = self.judged_count + pending
        return used >= self.size or (self.budget is not None and used >= self.budget)

    # --- Choosing --------------------------------------------------------------------------------

    def next(self, pending: Collection[str] = ()) -> Choice | None:
        """The next document to judge, skipping ``pending`` (documents someone is judging now);
        None when the topic is done or its budget spent."""
        blocked = {self.index[doc] for doc in pending if doc in self.index}
        if self.exhausted(len(blocked - self.labels.keys())):
            return None
        if self.burn_order:
            self._skip_judged_burn_in()
            for d in self.burn_order[self._burn_pointer :]:
                if d not in self.labels and d not in blocked:
                    return Choice(self.docs[d], None)
            if self.in_burn_in:
                # Every burn-in document left is being judged by someone: adaptive choice starts
                # only once they are all in (their labels are its first evidence).
                return None
        if self.static_order:
            while (
                self._static_pointer < len(self.static_order)
                and self.static_order[self._static_pointer] in self.labels
            ):
                self._static_pointer += 1
            for d in self.static_order[self._static_pointer :]:
                if d not in self.labels and d not in blocked:
                    return Choice(self.docs[d], None)
            return None
        run, d = self._choose_run(blocked)
        if run is None:
            return None
        return Choice(self.docs[d], self.run_keys[run])

    def _next_open(self, r: int, blocked: set[int]) -> int | None:
        ranked = self.lists[r]
        for position in range(self.cursor[r], len(ranked)):
            d = ranked[position]
            if d not in self.labels and d not in blocked:
                return d
        return None

    def _choose_run(self, blocked: set[int]) -> tuple[int | None, int]:
        if self.order == "mtf":
            # The current run keeps its turn while it holds the top priority (it has not yet
            # returned a non-relevant document at this level).
            top = max((p for r, p in enumerate(self.priority) if self._has_open(r)), default=None)
            if self.current is not None and self.priority[self.current] == top:
                d = self._next_open(self.current, blocked)
                if d is not None:
                    return self.current, d
            key = self.priority
        else:
            key = [(rel + 1) / (n + 2) for rel, n in zip(self.rel, self.judged, strict=True)]
        best: int | None = None
        best_doc = -1
        for r in sorted(range(len(self.lists)), key=lambda r: -key[r]):
            d = self._next_open(r, blocked)
            if d is not None:
                best, best_doc = r, d
                break
        return best, best_doc

    def _has_open(self, r: int) -> bool:
        return self.cursor[r] < len(self.lists[r])

    # --- Judging ---------------------------------------------------------------------------------

    def judge(self, doc_id: str, label: int, *, run: str | None = None) -> None:
        """Record ``label`` for ``doc_id`` (chosen on ``run``'s turn, if any). A second call for
        the same document is a revision: the evidence it gave is corrected, not counted twice."""
        d = self.index.get(doc_id)
        if d is None:
            raise AdjudicationError(f"Document {doc_id!r} is not in this topic's pool.")
        r_chosen = None
        if run is not None:
            if run not in self.runs:
                raise AdjudicationError(f"Unknown run {run!r}.")
            r_chosen = self.run_keys.index(run)
        new = label >= self.relevant_from
        if d in self.labels:
            old = self.labels[d] >= self.relevant_from
            self.labels[d] = label
            if old != new:
                self._revise(d, +1 if new else -1)
            return
        self.labels[d] = label
        if r_chosen is not None:
            self.chosen_by[d] = r_chosen
        for r, position in self.holders[d]:
            if self.cursor[r] == position:
                self._advance(r)
        if self.credit == "pulled":
            for r in self._credited(d):
                self.judged[r] += 1
                self.rel[r] += new
        if self.order == "mtf" and r_chosen is not None:
            self.current = r_chosen
            if not new:
                self.priority[r_chosen] -= 1

    def _credited(self, d: int) -> list[int]:
        """Pulled credit: the run that chose d, or every run holding it within the burn-in."""
        if d in self.chosen_by:
            return [self.chosen_by[d]]
        return [r for r, position in self.holders[d] if position < self.burn_in]

    def _advance(self, r: int) -> None:
        ranked = self.lists[r]
        position = self.cursor[r]
        while position < len(ranked) and ranked[position] in self.labels:
            if self.credit == "prefix":
                self.judged[r] += 1
                self.rel[r] += self.labels[ranked[position]] >= self.relevant_from
            position += 1
        self.cursor[r] = position

    def _revise(self, d: int, delta: int) -> None:
        if self.credit == "prefix":
            for r, position in self.holders[d]:
                if position < self.cursor[r]:
                    self.rel[r] += delta
        else:
            for r in self._credited(d):
                self.rel[r] += delta
        r_chosen = self.chosen_by.get(d)
        if self.order == "mtf" and r_chosen is not None:
            # A non-relevant verdict cost the run one priority level; revising it gives it back
            # (and the reverse).
            self.priority[r_chosen] += delta

    # --- Stopping estimate -----------------------------------------------------------------------

    def estimate(self, method: str = DEFAULT_METHOD) -> Estimate:
        """How many relevant documents are left among the unjudged ones, and the estimated recall
        (``pooling.stopping``; the default method learns a fusion of the runs on the judgments)."""
        return stopping.estimate(self, method)


# --- Replay -------------------------------------------------------------------------------------


@dataclass
class TopicReplay:
    """One topic replayed: the label of each judgment in order, and where the stopping rule said
    stop (the number of judgments made when it first did, None if never)."""

    topic_id: str
    relevant_total: int
    gains: list[int]  # relevant found after 1, 2, … judgments
    stop_at: int | None
    stop_estimate: float | None

    @property
    def judged(self) -> int:
        return len(self.gains)

    def needed(self, fraction: float) -> int | None:
        """Judgments needed to find ``fraction`` of the topic's relevant documents (None if the
        replay stopped first)."""
        want = math.ceil(fraction * self.relevant_total - 1e-9)
        if want <= 0:
            return 0
        for i, found in enumerate(self.gains, 1):
            if found >= want:
                return i
        return None

    def recall_at(self, judged: int) -> float:
        if self.relevant_total == 0:
            return 1.0
        found = self.gains[judged - 1] if judged else 0
        return found / self.relevant_total


def replay_topic(
    topic_id: str,
    runs: Mapping[str, Sequence[str]],
    qrels: Mapping[str, int],
    *,
    order: str,
    credit: str = "prefix",
    burn_in: int = 0,
    budget: int | None = None,
    seed: int = 0,
    relevant_from: int = 1,
    target: float = DEFAULT_TARGET,
    min_judged: int = 0,
    stopping_method: str = DEFAULT_METHOD,
    check_every: float = 0.005,
) -> TopicReplay:
    """Replay one topic as an assessor who answers from ``qrels`` (doc -> label; a document the
    qrels lack counts as non-relevant, as trec_eval reads it)."""
    adjudicator = Adjudicator(
        runs,
        order=order,
        credit=credit,
        burn_in=burn_in,
        budget=budget,
        seed=seed,
        relevant_from=relevant_from,
    )
    total = sum(1 for doc in adjudicator.docs if qrels.get(doc, relevant_from - 1) >= relevant_from)
    gains: list[int] = []
    found = 0
    stop_at = None
    stop_estimate = None
    # The estimate refits a model on the judgments (warm-started): asked after every
    # ``check_every`` of the pool (0.5 %), the stop lands at most that late, and it is no longer
    # asked once the rule said stop.
    every = max(1, int(adjudicator.size * check_every + 1e-9))
    while (choice := adjudicator.next()) is not None:
        label = qrels.get(choice.doc_id, relevant_from - 1)
        adjudicator.judge(choice.doc_id, label, run=choice.run)
        found += label >= relevant_from
        gains.append(found)
        if (
            stop_at is None
            and len(gains) % every == 0
            and len(gains) >= min_judged
            and not adjudicator.in_burn_in
        ):
            estimate = adjudicator.estimate(stopping_method)
            if estimate.suggests_stop(target):
                stop_at, stop_estimate = len(gains), estimate.recall
    return TopicReplay(topic_id, total, gains, stop_at, stop_estimate)


def replay(
    runs: Mapping[str, Mapping[str, Sequence[str]]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    topics: Iterable[str] | None = None,
    **options,
) -> list[TopicReplay]:
    """replay_topic for every topic (run key -> topic -> ranked list; topic -> doc -> label)."""
    topic_ids = list(topics) if topics is not None else sorted(qrels, key=_natural)
    result = []
    for topic_id in topic_ids:
        lists = {key: by_topic[topic_id] for key, by_topic in runs.items() if topic_id in by_topic}
        result.append(replay_topic(topic_id, lists, qrels.get(topic_id, {}), **options))
    return result


def _natural(text: str) -> tuple:
    return (0, int(text), text) if text.isdigit() else (1, 0, text)


def condense(
    runs: Mapping[str, Mapping[str, Sequence[str]]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, list[str]]]:
    """Each run's lists cut down to the judged documents (the replay's universe is the judged
    pairs: an unjudged document's label is unknown, so no order may be credited for it)."""
    return {
        key: {
            topic_id: [doc for doc in ranked if doc in qrels.get(topic_id, ())]
            for topic_id, ranked in by_topic.items()
            if topic_id in qrels
        }
        for key, by_topic in runs.items()
    }


def gain_curve(replays: Sequence[TopicReplay], points: int = 100) -> list[tuple[int, float]]:
    """(judgments summed over topics, fraction of all relevant found) at ``points`` budget steps,
    each topic spending the same share of its pool. Topics judge in parallel, so the curve at x
    is every topic's curve at its share of x."""
    total_relevant = sum(t.relevant_total for t in replays) or 1
    total = sum(t.judged for t in replays)
    curve = []
    for step in range(points + 1):
        share = step / points
        spent = found = 0
        for t in replays:
            k = round(share * t.judged)
            spent += k
            found += t.gains[k - 1] if k else 0
        curve.append((spent, found / total_relevant))
    if total and curve[-1][0] != total:
        curve.append((total, sum(t.gains[-1] for t in replays if t.gains) / total_relevant))
    return curve


def leave_one_run_out(
    runs: Mapping[str, Mapping[str, Sequence[str]]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    top: int = 10,
    fraction: float = DEFAULT_TARGET,
    **options,
) -> dict[str, float]:
    """For each run: replay without it, stop each topic when ``fraction`` of its relevant
    documents are found, and give the share of the left-out run's top ``top`` documents (over
    all topics) that were judged by then. A run the adaptive order would leave unevaluated shows
    a low share."""
    topic_ids = sorted(qrels, key=_natural)
    result = {}
    for left_out in runs:
        others = {key: lists for key, lists in runs.items() if key != left_out}
        judged = wanted = 0
        for topic_id in topic_ids:
            lists = {k: t[topic_id] for k, t in others.items() if topic_id in t}
            labels = qrels[topic_id]
            head = list(runs[left_out].get(topic_id, ()))[:top]
            if not head:
                continue
            adjudicator = Adjudicator(lists, **options)
            threshold = adjudicator.relevant_from
            total = sum(1 for doc in adjudicator.docs if labels.get(doc, 0) >= threshold)
            want = math.ceil(fraction * total - 1e-9)
            found = 0
            while found < want and (choice := adjudicator.next()) is not None:
                label = labels.get(choice.doc_id, threshold - 1)
                adjudicator.judge(choice.doc_id, label, run=choice.run)
                found += label >= threshold
            done = {adjudicator.docs[d] for d in adjudicator.labels}
            judged += sum(1 for doc in head if doc in done)
            wanted += len(head)
        result[left_out] = judged / wanted if wanted else 1.0
    return result
