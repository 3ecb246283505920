"""The export's pass over the rows: the qrels file (or one file per assessor), and the tallies
behind the bundle's documentation, from blocks of sidecar rows (:mod:`qrels.rows`, COPY text)
sorted by pair.

:class:`ExportPass` takes each block as it comes (the same block goes to the sidecar's writer,
:mod:`qrels.sidecar`). Blocks are cut at pair boundaries (a pair's trailing rows wait for the
next block), so each block is a run of whole pairs. Most blocks hold only what every campaign
has (verdicts of 0 or more, ids without escapes) and are handled a column at a time: the rows
of a block are sliced into columns, one-row pairs go to the qrels as they are, and only pairs
with several verdicts are resolved one by one (:class:`qrels.policies.Resolver`). The other
blocks (an imported negative label, an id with an escape, per-assessor files) go through the
row-by-row loop of :meth:`ExportPass._rows`. Both give the same files and tallies.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import compress, islice
from operator import eq, itemgetter, not_
from pathlib import Path

from campaigns.textfiles import MAX_ID_LENGTH
from qrels.copytext import unescape
from qrels.formats import write_qrels
from qrels.hashed_files import Background, BundleFile, HashedFile
from qrels.policies import Resolver, unjudged_label

# A row's fields the pass reads, by position (qrels.rows.JudgmentRow's order).
TOPIC, DOC, LABEL, ASSESSOR_ID, PSEUDONYM, FIRST_JUDGED_AT, POOL, WHO = range(8)


class QrelsWriter:
    """Qrels lines into a hashed file, counting lines per label, every id checked as
    :func:`qrels.formats.write_qrels` checks it. Callers append (topic id, doc id, label) to
    ``rows`` (or call :meth:`add`) and flush now and then, or hand over columns
    (:meth:`add_columns`)."""

    def __init__(
        self,
        path: Path,
        *,
        keep_open: bool = True,
        flush_lines: int = 8192,
        background: Background | None = None,
    ):
        self.file = HashedFile(
            path, keep_open=keep_open, flush_lines=flush_lines, background=background
        )
        self.labels: Counter[int] = Counter()
        self._label_texts: Counter[str] = Counter()
        self.rows: list[tuple[str, str, int]] = []
        self._flush_rows = flush_lines

    def add(self, topic_id: str, doc_id: str, label: int) -> None:
        self.rows.append((topic_id, doc_id, label))
        if len(self.rows) >= self._flush_rows:
            self.flush()

    def add_columns(self, topics: list[str], docs: list[str], labels: list[str]) -> None:
        """Lines for pairs given as columns of unescaped ids and labels (as text), in order.
        Call :meth:`flush` first if ``rows`` may hold lines."""
        n = len(topics)
        if not n:
            return
        parts = ["", " 0 ", "", " ", "", "\n"] * n
        parts[0::6] = topics
        parts[2::6] = docs
        parts[4::6] = labels
        text = "".join(parts)
        if not _plainly_valid(text, n, topics, docs):
            self.rows.extend(zip(topics, docs, map(int, labels), strict=True))
            self.flush()
            return
        self._label_texts.update(labels)
        self.file.write_block(text, n)

    def flush(self) -> None:
        rows = self.rows
        if not rows:
            return
        lines = [f"{topic_id} 0 {doc_id} {label}\n" for topic_id, doc_id, label in rows]
        if not _plainly_valid(
            "".join(lines),
            len(rows),
            list(map(itemgetter(0), rows)),
            list(map(itemgetter(1), rows)),
        ):
            out = _Lines()
            write_qrels(rows, out)  # raises ValueError naming the id that would not read back
            lines = out.parts
        self.labels.update(map(itemgetter(2), rows))
        self.file.extend(lines)
        rows.clear()

    def close(self, root: Path, description: str) -> BundleFile:
        self.flush()
        for text, count in self._label_texts.items():
            self.labels[int(text)] += count
        labels = {str(label): self.labels[label] for label in sorted(self.labels)}
        return self.file.close(root, description, labels)


def _plainly_valid(text: str, n: int, topics: Sequence[str], docs: Sequence[str]) -> bool:
    """Whether every id of ``n`` qrels lines (``text``, of ids ``topics`` and ``docs``) passes
    :func:`campaigns.textfiles.check_id` for certain, checked on the whole block at once: no
    id is empty (no line starts with a space, no two spaces meet) or longer than
    MAX_ID_LENGTH, and no id holds a space, a newline or anything else unprintable. When not,
    :func:`qrels.formats.write_qrels` checks the ids one by one (and names the bad one)."""
    return (
        text.count("\n") == n
        and text.count(" ") == 3 * n
        and "  " not in text
        and "\n " not in text
        and not text.startswith(" ")
        and text.replace("\n", "").isprintable()
        and max(map(len, topics)) <= MAX_ID_LENGTH
        and max(map(len, docs)) <= MAX_ID_LENGTH
    )


class _Lines:
    """A text stream that only collects what is written (``write`` is a list's append)."""

    def __init__(self):
        self.parts: list[str] = []
        self.write = self.parts.append


def file_name_for(name: str, taken: set[str]) -> str:
    """A file name (without extension) for an assessor's qrels: safe characters only, unique
    among ``taken`` (compared without case, as some file systems do)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "assessor"
    candidate, n = stem, 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{stem}-{n}"
    taken.add(candidate.lower())
    return candidate


class ExportPass:
    """The qrels (``qrels``, or with ``per_assessor`` one file per assessor under ``root``)
    and the documentation's tallies, from blocks of rows (:meth:`feed`, then :meth:`finish`).

    ``people`` maps the ids (as text) of the assessors who are people to the names the
    agreement figures use; ``models`` holds the ids of the models whose labels count (their
    qrels lines are counted in ``from_models``); ``write_unjudged`` writes a pooled pair nobody
    labelled as -1."""

    def __init__(
        self,
        *,
        root: Path,
        qrels: QrelsWriter | None,
        resolver: Resolver,
        people: Mapping[str, str],
        models: Collection[str] = (),
        write_unjudged: bool,
        per_assessor: bool,
        binary: bool,
        threshold: int,
    ):
        self.root = root
        self.qrels = qrels
        self.resolver = resolver
        self.people = people
        self.models = frozenset(models)
        # Assessors whose rows need the row-by-row loop: their labels are no verdicts to the
        # policy (adjudicated ones), or the qrels lines resting on them are counted (models).
        self._special = self.models | resolver.ignored
        self.from_models = [0, 0]  # qrels lines from models' labels only, from models' and others'
        self.write_unjudged = write_unjudged
        self.per_assessor = per_assessor
        self.binary = binary
        self.threshold = threshold
        self.per_assessor_files: dict[str, QrelsWriter] = {}
        self._taken_names: set[str] = set()
        # Tallies, keyed by the rows' COPY text (unescaped by finish): per topic and per
        # assessor, never per pair.
        self.labels_by_topic: Counter[tuple[str, str]] = Counter()  # (topic, label) -> rows
        self.judged: Counter[str] = Counter()  # topic -> pairs with a verdict
        self.judged_in_pool: Counter[str] = Counter()
        self.marked_unjudged: Counter[str] = Counter()  # topic -> pairs with negatives only
        self.rows_by: Counter[str] = Counter()  # assessor's display name -> rows
        self.verdicts_by: Counter[str] = Counter()  # ... -> rows with a label of 0 or more
        self.assessor_ids: dict[str, str] = {}  # display name -> assessor id
        # People's verdicts on pairs two or more people judged, for the agreement figures.
        self.overlap: dict[str, dict[tuple[str, str], int]] = {}
        self.done = 0  # judgments (rows with a label) so far
        self._held: list[list[str]] = []  # the last pair's rows, held for the next block

    # --- Blocks ----------------------------------------------------------------------------------

    def feed(self, block: str) -> None:
        """One block of COPY text (whole lines; see :func:`qrels.sidecar.block_rows`)."""
        # Only a row's first eight values are read: each line is split that far, and the rest
        # of it (the sidecar's columns) stays one string.
        rows = [line.split("\t", 8) for line in block[:-1].split("\n")]
        if min(map(len, rows)) < 8:
            raise ValueError("A block of COPY text with a line of fewer than 8 values.")
        if self._held:
            rows = self._held + rows
        # Hold the last pair back: its rows may go on in the next block.
        last = len(rows) - 1
        topic, doc = rows[last][TOPIC], rows[last][DOC]
        while last and rows[last - 1][TOPIC] == topic and rows[last - 1][DOC] == doc:
            last -= 1
        self._held = rows[last:]
        if last:
            self._pairs(rows[:last])

    def finish(self) -> None:
        """The held rows: call once every block is in."""
        if self._held:
            self._pairs(self._held)
            self._held = []

    def _pairs(self, rows: list[list[str]]) -> None:
        """Whole pairs, a row (its values, the first eight at least) each."""
        columns = list(islice(zip(*rows, strict=False), 8))  # a ninth value: the rest of the line
        topics, docs, labels = columns[TOPIC], columns[DOC], columns[LABEL]
        if (
            self.per_assessor
            or (self._special and not self._special.isdisjoint(columns[ASSESSOR_ID]))
            or "-" in "".join(labels)
            or "\\" in "".join(topics)
            or "\\" in "".join(docs)
        ):
            self._rows(zip(*columns, strict=True))
        else:
            self._columns(columns)

    # --- The common case, a column at a time -----------------------------------------------------

    def _columns(self, columns: list[tuple[str, ...]]) -> None:
        """Pairs whose labels are all 0 or more (or missing: a pooled pair nobody labelled) and
        whose ids hold no escape."""
        topics, docs, labels, assessor_ids, _, _, pools, whos = columns
        n = len(topics)
        # continues[i]: row i belongs to row i - 1's pair.
        continues = [False]
        continues += map(eq, islice(docs, 1, None), docs)
        if any(continues):
            continues = [
                same_doc and same_topic
                for same_doc, same_topic in zip(
                    continues, [False, *map(eq, islice(topics, 1, None), topics)], strict=True
                )
            ]
        starts = list(map(not_, continues))

        if "" in labels:  # pooled pairs nobody labelled: no judgment behind the row
            labelled = list(map(bool, labels))
            row_topics = list(compress(topics, labelled))
            row_labels = list(compress(labels, labelled))
            row_whos = list(compress(whos, labelled))
            row_ids = compress(assessor_ids, labelled)
        else:
            row_topics, row_labels, row_whos, row_ids = topics, labels, whos, assessor_ids
        if row_topics and row_topics[0] == row_topics[-1]:  # one topic (rows are sorted)
            for label, count in Counter(row_labels).items():
                self.labels_by_topic[row_topics[0], label] += count
        else:
            self.labels_by_topic.update(zip(row_topics, row_labels, strict=True))
        assessors = Counter(row_whos)
        self.rows_by.update(assessors)
        self.verdicts_by.update(assessors)  # every label here is 0 or more
        if len(self.assessor_ids) < len(self.rows_by):
            for who, assessor_id in zip(row_whos, row_ids, strict=True):
                self.assessor_ids.setdefault(who, assessor_id)
        self.done += len(row_labels)

        # One entry per pair (its first row); a pair of several rows is resolved below.
        pair_topics = list(compress(topics, starts))
        pair_docs = list(compress(docs, starts))
        pair_labels = list(compress(labels, starts))
        pair_pools = list(compress(pools, starts))
        judged_topics = list(compress(pair_topics, pair_labels))
        in_pool = compress(judged_topics, compress(pair_pools, pair_labels))
        if judged_topics and judged_topics[0] == judged_topics[-1]:
            self.judged[judged_topics[0]] += len(judged_topics)
            self.judged_in_pool[judged_topics[0]] += len(list(in_pool))
        else:
            self.judged.update(judged_topics)
            self.judged_in_pool.update(in_pool)
        if self.binary:
            threshold = self.threshold
            pair_labels = [
                ("1" if int(label) >= threshold else "0") if label else label
                for label in pair_labels
            ]
        if len(pair_topics) < n:
            self._resolve_shared_pairs(columns, continues, pair_labels)
        if self.qrels is None:
            return
        if "" in pair_labels:
            unjudged = "-1" if self.write_unjudged else ""
            pair_labels = [
                label or (unjudged if pool else "")
                for label, pool in zip(pair_labels, pair_pools, strict=True)
            ]
            keep = list(map(bool, pair_labels))
            pair_topics = list(compress(pair_topics, keep))
            pair_docs = list(compress(pair_docs, keep))
            pair_labels = list(compress(pair_labels, keep))
        self.qrels.flush()
        self.qrels.add_columns(pair_topics, pair_docs, pair_labels)

    def _resolve_shared_pairs(
        self, columns: list[tuple[str, ...]], continues: list[bool], pair_labels: list[str]
    ) -> None:
        """The label (in ``pair_labels``, by pair) of each pair with several rows, resolved
        by the policy, and the people's verdicts on it for the agreement figures."""
        topics, docs, labels, assessor_ids, pseudonyms, firsts, _, _ = columns
        resolver, people, overlap = self.resolver, self.people, self.overlap
        following = list(compress(range(len(continues)), continues))
        k = 0
        merged = 0  # rows before the current pair that continue an earlier row's pair
        while k < len(following):
            start = following[k] - 1
            end = following[k] + 1
            k += 1
            while k < len(following) and following[k] == end:
                end += 1
                k += 1
            topic = topics[start]
            verdicts = [
                (assessor_ids[i], int(labels[i]), firsts[i], pseudonyms[i])
                for i in range(start, end)
            ]
            pair_labels[start - merged] = str(resolver(topic, verdicts))
            merged += end - start - 1
            by_people = [v for v in verdicts if v[0] in people]
            if len(by_people) > 1:
                pair = (topic, docs[start])
                for v in by_people:
                    overlap.setdefault(people[v[0]], {})[pair] = v[1]

    # --- Everything else, a row at a time --------------------------------------------------------

    def _rows(self, rows: Iterable[tuple[str, ...]]) -> None:
        """Pairs of any kind, row by row (a pair's rows are consecutive)."""
        pair_topic = pair_doc = None
        verdicts: list = []
        negatives: list[int] = []
        pooled = False
        qrels_rows = self.qrels.rows if self.qrels is not None else None
        for topic, doc, label_text, assessor_id, pseudonym, first, pool, who in rows:
            if doc != pair_doc or topic != pair_topic:
                if pair_topic is not None:
                    self._finish_pair(pair_topic, pair_doc, verdicts, negatives, pooled)
                pair_topic, pair_doc = topic, doc
                verdicts, negatives, pooled = [], [], False
            if pool:
                pooled = True
            if not label_text:  # a pooled pair nobody judged: no judgment, no sidecar row
                continue
            self.done += 1
            label = int(label_text)
            # An adjudicated label settles others' verdicts: it is no label of its own in the
            # topic's distribution, and no assessor's file (the sidecar lists it, by its kind).
            settled = assessor_id in self.resolver.adjudicated
            if not settled:
                self.labels_by_topic[topic, label_text] += 1
            self.rows_by[who] += 1
            self.assessor_ids.setdefault(who, assessor_id)
            if label >= 0:
                self.verdicts_by[who] += 1
                verdicts.append((assessor_id, label, first, pseudonym))
            else:
                negatives.append(label)
            if self.per_assessor and not settled:
                self._per_assessor_file(who).add(
                    unescape(topic), unescape(doc), self._binary(label)
                )
        if pair_topic is not None:
            self._finish_pair(pair_topic, pair_doc, verdicts, negatives, pooled)
        if qrels_rows is not None:
            self.qrels.flush()  # type: ignore[union-attr]

    def _binary(self, label: int) -> int:
        if self.binary and label >= 0:
            return 1 if label >= self.threshold else 0
        return label

    def _per_assessor_file(self, who: str) -> QrelsWriter:
        writer = self.per_assessor_files.get(who)
        if writer is None:
            file_name = file_name_for(unescape(who), self._taken_names)
            writer = self.per_assessor_files[who] = QrelsWriter(
                self.root / "qrels" / f"{file_name}.txt", keep_open=False, flush_lines=1024
            )
        return writer

    def _finish_pair(
        self, pair_topic: str, pair_doc: str, verdicts: list, negatives: list[int], pooled: bool
    ) -> None:
        topic_id = unescape(pair_topic) if "\\" in pair_topic else pair_topic
        doc_id = unescape(pair_doc) if "\\" in pair_doc else pair_doc
        qrels_rows = self.qrels.rows if self.qrels is not None else None
        label = None
        if verdicts:
            # Per-assessor files need no policy (and refuse must not run on them). None: no
            # label here is a verdict the policy weighs.
            label = self.resolver(topic_id, verdicts) if qrels_rows is not None else verdicts[0][1]
        if label is not None:
            self.judged[pair_topic] += 1
            if pooled:
                self.judged_in_pool[pair_topic] += 1
            if len(verdicts) > 1:
                by_people = [v for v in verdicts if v[0] in self.people]
                if len(by_people) > 1:
                    pair = (topic_id, doc_id)
                    for v in by_people:
                        self.overlap.setdefault(self.people[v[0]], {})[pair] = v[1]
            if qrels_rows is not None:
                qrels_rows.append((topic_id, doc_id, label))
                if self.models:
                    by_models = sum(1 for v in verdicts if v[0] in self.models)
                    if by_models:
                        self.from_models[by_models < len(verdicts)] += 1
        else:
            if negatives:
                self.marked_unjudged[pair_topic] += 1
            # An imported negative label is written as it came; a pooled pair nobody labelled
            # only when unjudged pairs are asked for (qrels.policies, "Negative labels").
            if qrels_rows is not None and (negatives or (self.write_unjudged and pooled)):
                qrels_rows.append((topic_id, doc_id, unjudged_label(negatives)))

    # --- Results ---------------------------------------------------------------------------------

    def verdicts_by_topic(self) -> dict[str, dict[int, int]]:
        """topic id -> label -> judgments."""
        result: dict[str, dict[int, int]] = {}
        for (topic, label), count in self.labels_by_topic.items():
            labels = result.setdefault(unescape(topic), {})
            labels[int(label)] = labels.get(int(label), 0) + count
        return result

    def per_topic(self, tally: Counter[str]) -> dict[str, int]:
        """One of the per-topic pair counts, keyed by topic id."""
        return {unescape(topic): count for topic, count in tally.items() if count}

    def by_assessor(self) -> dict[str, list]:
        """assessor's display name -> [assessor id, judgments, verdicts (labels >= 0)]."""
        return {
            unescape(who): [self.assessor_ids[who], rows, self.verdicts_by[who]]
            for who, rows in self.rows_by.items()
        }

    def qrels_files(self, describe: Callable[[str], str]) -> list[BundleFile]:
        """The per-assessor files, closed, in file-name order (``describe(display name)``)."""
        files = self.per_assessor_files
        return [
            files[who].close(self.root, describe(unescape(who)))
            for who in sorted(files, key=lambda who: files[who].file.path.name)
        ]
