"""The export bundle: qrels that trec_eval reads unchanged, the assessor sidecar, and the
collection's documentation, with a SHA-256 for every file.

A bundle is a directory (or one zip of it) holding:

``qrels.txt``
    ``topic 0 docid label``, one line per pair, labels resolved by a policy
    (:mod:`qrels.policies`), sorted by topic id then document id in code-point order. With
    ``per_assessor``, ``qrels/<assessor>.txt`` instead, one file per assessor with their own
    verdicts.
``judgments.tsv`` / ``judgments.jsonl``
    The sidecar: one row per current assessor judgment (imported ones too, marked by
    ``source``), in the qrels order then by assessor. See ``SIDECAR_COLUMNS`` and the README
    the bundle carries for the spreadsheet-safety and escaping rules.
``README.md`` / ``campaign.json``
    The documentation for people and for programs: scale and rubric (with its history), pools,
    completeness per topic, agreement, the export's options, software version, export time, and
    the SHA-256 of every data file (campaign.json also covers README.md).
``SHA256SUMS``
    ``sha256sum -c SHA256SUMS`` checks every other file, campaign.json included.

Everything streams: the judgments are read once, sorted by pair, from one query (COPY on
PostgreSQL) as blocks of COPY text. Each block goes to the sidecar's writer
(:mod:`qrels.sidecar`; for a large export a second process, so that formatting the sidecar
overlaps the rest) and to the export's pass (:mod:`qrels.export_pass`: the qrels and the tallies
behind the documentation), all written through buffered, hashing writers
(:mod:`qrels.hashed_files`). A zip is assembled from the finished files and streamed to its
destination, which need not be seekable (a database-backed writer for
:class:`qrels.models.Export`, a response, a file).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from django.db.models import Count, Exists, OuterRef
from django.template.loader import render_to_string
from django.utils import timezone

import pooljudge
from campaigns.models import (
    Assessor,
    Campaign,
    Judgment,
    JudgmentRevision,
    RubricVersion,
    Topic,
)
from pooling.models import Pool, PoolEntry, Run
from pooljudge.common import (
    ProgressFn,
    analyse_stale_tables,
    fewer_collections,
    neutralise,
    no_progress,
)
from qrels import agreement, sampled
from qrels.export_pass import ExportPass, QrelsWriter
from qrels.hashed_files import Background, BundleFile, HashingStream
from qrels.policies import (
    POLICIES,
    UNJUDGED,
    PolicyConflict,
    default_policy,
    resolver_for,
)
from qrels.queries import blind_labels
from qrels.rows import Scope, find_conflicts, scope, use_snapshot
from qrels.sidecar import (
    ESCAPE_RULE,
    SAFETY_RULE,
    SIDECAR_COLUMNS,
    TEXT_COLUMNS,
    SidecarProcess,
    SidecarWriter,
    decode_cell,
    open_sidecar,
    sidecar_blocks,
    sidecar_rows,
)

FORMAT = "pooljudge-export/1"
AGREEMENT_BOOTSTRAP = 1000
README_TOPIC_ROWS = 200
CHUNK_BYTES = 4 * 1024 * 1024


class ExportError(ValueError):
    """The export cannot be made as asked (a sentence for the organiser); nothing was written."""


@dataclass
class ExportResult:
    name: str  # the bundle's name: the zip's folder and file stem
    exported_at: datetime
    files: list[BundleFile]  # every file but SHA256SUMS, in bundle order
    manifest: dict[str, Any]  # what campaign.json holds
    readme: str
    directory: Path | None = None  # where the files are (None for a zip)
    zip_bytes: int | None = None
    zip_sha256: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def bundle_name(campaign: Campaign, at: datetime) -> str:
    """``<slug>-qrels-<YYYYmmdd-HHMMSS>``: safe as a file name anywhere (slugs are [a-z0-9-])."""
    return f"{campaign.slug}-qrels-{at.astimezone(UTC):%Y%m%d-%H%M%S}"


def _iso(at: datetime | None) -> str | None:
    if at is None:
        return None
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- Writers -------------------------------------------------------------------------------------


# --- The bundle ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportOptions:
    policy: str
    per_assessor: bool
    unjudged: str
    binary: bool
    include_imported: bool
    usernames: bool
    pool: int | None  # version
    zip: bool
    include_models: bool = False
    include_filled: bool = False

    def as_dict(self) -> dict[str, Any]:
        # include_filled is written only when asked: an export without filled labels keeps
        # the bytes it had before hybrid budgets existed.
        options = asdict(self)
        if not self.include_filled:
            del options["include_filled"]
        return options


def _judgment_count(s: Scope) -> int:
    judgments = Judgment.objects.filter(campaign=s.campaign, assessor__kind__in=s.kinds)
    if s.assessor_ids is not None:
        judgments = judgments.filter(assessor_id__in=s.assessor_ids)
    if s.pool is not None:
        judgments = judgments.filter(
            Exists(
                PoolEntry.objects.filter(
                    pool=s.pool, topic_id=OuterRef("topic_id"), doc_id=OuterRef("doc_id")
                )
            )
        )
    return judgments.count()


def export_bundle(
    *,
    campaign: Campaign,
    destination: Path | str | BinaryIO,
    policy: str | None = None,
    per_assessor: bool = False,
    unjudged: str = "omit",
    binary: bool = False,
    include_imported: bool = True,
    usernames: bool = False,
    pool: Pool | None = None,
    zip: bool = False,
    progress: ProgressFn = no_progress,
    include_models: bool = False,
    include_filled: bool = False,
    name: str | None = None,
    compresslevel: int = 6,
    now: datetime | None = None,
) -> ExportResult:
    """Write the campaign's export bundle.

    ``destination`` is a directory (created if missing; it must be empty) or, with ``zip``, a
    binary file object the zip is streamed to (its files sit in a folder named ``name``,
    default :func:`bundle_name`). The other options are those of
    :func:`qrels.policies.campaign_qrels`; ``usernames`` names people by login instead of their
    stable pseudonym; ``include_models`` lets models' labels into the qrels, the sidecar and
    the counts (they are left out by default), ``include_filled`` a hybrid budget's filled
    labels (assess/hybrid.py; left out by default too). Raises PolicyConflict (nothing
    written) under ``refuse`` when assessors disagree, ExportError for options the campaign
    cannot satisfy.
    """
    policy = policy or default_policy(campaign)
    if policy not in POLICIES:
        raise ExportError(f"Unknown policy {policy!r}; use one of {', '.join(POLICIES)}.")
    if unjudged not in UNJUDGED:
        raise ExportError(f"Unjudged pairs are 'omit' or '-1', not {unjudged!r}.")
    try:
        s = scope(
            campaign=campaign,
            include_imported=include_imported,
            pool=pool,
            include_models=include_models,
            include_filled=include_filled,
        )
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    # The tables every query below reads; a campaign's judgments arrive one at a time, so no
    # bulk write keeps their planner statistics fresh.
    analyse_stale_tables(Judgment, PoolEntry, Assessor, Topic)
    if policy == "refuse" and not per_assessor:
        conflicts = find_conflicts(s)
        if conflicts:
            raise PolicyConflict(conflicts)
    options = ExportOptions(
        policy=policy,
        per_assessor=per_assessor,
        unjudged=unjudged,
        binary=binary,
        include_imported=include_imported,
        usernames=usernames,
        pool=pool.version if pool is not None else None,
        zip=zip,
        include_models=include_models,
        include_filled=include_filled,
    )
    exported_at = now or timezone.now()
    name = name or bundle_name(campaign, exported_at)
    if not zip:
        directory = Path(destination)
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise ExportError(f"{directory} is not an empty directory.")
        directory.mkdir(parents=True, exist_ok=True)
        result = _write_files(directory, s, options, name, exported_at, progress)
        result.directory = directory
        return result
    with tempfile.TemporaryDirectory(prefix="pooljudge-export-") as tmp:
        result = _write_files(Path(tmp), s, options, name, exported_at, progress)
        progress(result.counts["judgments"], result.counts["judgments"], "zipping")
        stream = HashingStream(destination)  # type: ignore[arg-type]
        stamp = exported_at.timestamp()
        with zipfile.ZipFile(
            stream, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel
        ) as bundle:
            for path in [f.path for f in result.files] + ["SHA256SUMS"]:
                source = Path(tmp) / path
                os.utime(source, (stamp, stamp))
                bundle.write(source, f"{name}/{path}")
        stream.flush()
        result.zip_bytes = stream.size
        result.zip_sha256 = stream.digest.hexdigest()
    return result


def _write_files(
    root: Path,
    s: Scope,
    options: ExportOptions,
    name: str,
    exported_at: datetime,
    progress: ProgressFn,
) -> ExportResult:
    total = _judgment_count(s)
    progress(0, total, "reading judgments")
    background = Background()
    try:
        with fewer_collections():  # a few objects per judgment, nearly all short-lived
            return _write_bundle(root, s, options, name, exported_at, progress, total, background)
    finally:
        background.stop()


def _write_bundle(
    root: Path,
    s: Scope,
    options: ExportOptions,
    name: str,
    exported_at: datetime,
    progress: ProgressFn,
    total: int,
    background: Background,
) -> ExportResult:
    sidecar = open_sidecar(root, background, total)
    try:
        return _write_rows_and_documentation(
            root, s, options, name, exported_at, progress, total, background, sidecar
        )
    except BaseException:
        sidecar.abort()
        raise


def _write_rows_and_documentation(
    root: Path,
    s: Scope,
    options: ExportOptions,
    name: str,
    exported_at: datetime,
    progress: ProgressFn,
    total: int,
    background: Background,
    sidecar: SidecarWriter | SidecarProcess,
) -> ExportResult:
    campaign = s.campaign
    blocks = sidecar_blocks(
        s,
        usernames=options.usernames,
        pooled_unjudged=options.unjudged == "-1" and not options.per_assessor,
    )
    qrels = None if options.per_assessor else QrelsWriter(root / "qrels.txt", background=background)
    rows = ExportPass(
        root=root,
        qrels=qrels,
        resolver=resolver_for(s, options.policy, binary=options.binary),
        people={
            str(pk): name if options.usernames else pseudonym
            for pk, name, pseudonym in Assessor.objects.filter(
                campaign=campaign, kind=Assessor.Kind.PERSON
            ).values_list("pk", "name", "pseudonym")
        },
        # With models' labels asked for: how many qrels lines rest on them alone, or in part.
        models={
            str(pk)
            for pk in Assessor.objects.filter(
                campaign=campaign, kind=Assessor.Kind.MODEL
            ).values_list("pk", flat=True)
        }
        if s.include_models
        else set(),
        write_unjudged=options.unjudged == "-1",
        per_assessor=options.per_assessor,
        binary=options.binary,
        threshold=campaign.relevance_threshold,
    )
    # One pass over the rows, sorted by pair: each block goes to the sidecar's writer (maybe
    # in another process) and to the qrels and the tallies.
    for block in blocks:
        sidecar.feed(block)
        rows.feed(block.decode())
        progress(rows.done, total, "writing qrels and sidecar")
    rows.finish()
    done = rows.done
    progress(done, total, "computing agreement")

    files: list[BundleFile] = []
    if qrels is not None:
        files.append(
            qrels.close(root, "Qrels, four fields: topic 0 docid label (one label per pair).")
        )
    files += rows.qrels_files(lambda display: f"Qrels of assessor {display} alone.")
    # The agreement figures (a bootstrap) while the sidecar's process may still be writing.
    agreement_figures = _agreement(s, _blind(s, rows.overlap, rows.assessor_ids))
    progress(done, total, "writing documentation")
    files += sidecar.close()
    if qrels is not None and s.pool is not None and s.pool.strategy == Pool.Strategy.SAMPLE:
        files += _sample_eval_files(root, s.pool)

    manifest = _manifest(
        s,
        options,
        name=name,
        exported_at=exported_at,
        files=files,
        verdicts_by_topic=rows.verdicts_by_topic(),
        judged=rows.per_topic(rows.judged),
        judged_in_pool=rows.per_topic(rows.judged_in_pool),
        marked_unjudged=rows.per_topic(rows.marked_unjudged),
        by_assessor=rows.by_assessor(),
        agreement_figures=agreement_figures,
        from_models=rows.from_models if qrels is not None else None,
    )
    readme = render_readme(manifest)
    readme_bytes = readme.encode()
    (root / "README.md").write_bytes(readme_bytes)
    readme_file = BundleFile(
        path="README.md",
        sha256=hashlib.sha256(readme_bytes).hexdigest(),
        bytes=len(readme_bytes),
        lines=readme.count("\n"),
        description="This documentation, for people.",
    )
    files.append(readme_file)
    manifest["files"] = [_file_entry(f) for f in files]
    campaign_json = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    (root / "campaign.json").write_bytes(campaign_json)
    files.append(
        BundleFile(
            path="campaign.json",
            sha256=hashlib.sha256(campaign_json).hexdigest(),
            bytes=len(campaign_json),
            lines=campaign_json.count(b"\n"),
            description="This documentation, for programs (with the SHA-256 of every other file).",
        )
    )
    (root / "SHA256SUMS").write_text("".join(f"{f.sha256}  {f.path}\n" for f in files))
    counts = {
        "judgments": done,
        "qrels_lines": files[0].lines if qrels is not None else 0,
        "assessors": len(rows.rows_by),
        "files": len(files) + 1,
    }
    return ExportResult(
        name=name,
        exported_at=exported_at,
        files=files,
        manifest=manifest,
        readme=readme,
        counts=counts,
    )


def _sample_eval_files(root: Path, pool: Pool) -> list[BundleFile]:
    """For a stratified sampled pool: ``qrels.sample_eval.txt`` (NIST sample_eval's five
    columns, the labels of ``qrels.txt`` on the sampled pairs, -1 elsewhere in the pool) and
    ``sample_eval_strata.tsv`` (each topic's strata: size, sample, judged, inclusion
    probability). Read back from the qrels.txt just written, so both say the same."""
    labels: dict[str, dict[str, int]] = {}
    with (root / "qrels.txt").open(encoding="utf-8") as written:
        for line in written:
            topic, _iteration, doc, label = line.split()
            labels.setdefault(topic, {})[doc] = int(label)
    entries = list(
        PoolEntry.objects.filter(pool=pool)
        .order_by()
        .values_list("topic__topic_id", "doc_id", "stratum", "sampled", "inclusion_probability")
    )
    sample = sampled.pool_sample_qrels((e[:4] for e in entries), labels)
    strata = (pool.params or {}).get("strata", [])
    counts: dict[tuple[str, int], list] = {}  # (topic, stratum) -> [pooled, sampled, judged, p]
    for topic, doc, stratum, in_sample, probability in entries:
        row = counts.setdefault((topic, stratum), [0, 0, 0, probability])
        row[0] += 1
        row[1] += in_sample
        row[2] += in_sample and sample[topic][doc].label >= 0
    table = [
        "topic\tstratum\tfirst_rank\tlast_rank\trate\tpooled\tsampled\tjudged\t"
        "inclusion_probability\n"
    ]
    for (topic, stratum), (pooled, chosen, judged, probability) in sorted(counts.items()):
        ranks = strata[stratum] if stratum < len(strata) else {}
        table.append(
            f"{topic}\t{stratum + 1}\t{ranks.get('first_rank', '')}\t"
            f"{ranks.get('last_rank', '')}\t{ranks.get('rate', '')}\t{pooled}\t{chosen}\t"
            f"{judged}\t{probability!r}\n"
        )
    made = []
    for name, lines, description in (
        (
            "qrels.sample_eval.txt",
            list(sampled.format_sample_qrels(sample)),
            "Qrels for NIST's sample_eval.pl, five fields: topic 0 docid stratum label "
            "(-1: pooled, not in the sample or not judged yet).",
        ),
        (
            "sample_eval_strata.tsv",
            table,
            "The sampled pool's strata per topic: ranks, nominal rate, pooled, sampled and "
            "judged pairs, inclusion probability (TSV with a header).",
        ),
    ):
        data = "".join(lines).encode()
        (root / name).write_bytes(data)
        made.append(
            BundleFile(
                path=name,
                sha256=hashlib.sha256(data).hexdigest(),
                bytes=len(data),
                lines=len(lines),
                description=description,
            )
        )
    return made


def _file_entry(f: BundleFile) -> dict[str, Any]:
    entry = {
        "path": f.path,
        "sha256": f.sha256,
        "bytes": f.bytes,
        "lines": f.lines,
        "description": f.description,
    }
    if f.labels is not None:
        entry["labels"] = f.labels
    return entry


# --- The documentation ---------------------------------------------------------------------------


def _rubric_history(campaign: Campaign) -> list[dict[str, Any]]:
    history = []
    previous: dict[int, dict[str, str]] | None = None
    versions = campaign.rubric_versions.order_by("number").prefetch_related("labels")
    for version in versions:
        labels = {
            label.value: {
                "name": label.name,
                "description": label.description,
                "example": label.example,
                "key": label.key,
            }
            for label in version.labels.all()
        }
        changes = []
        if previous is None:
            changes.append("first version")
        else:
            for value in sorted(previous.keys() - labels.keys()):
                changes.append(f"label {value} ({previous[value]['name']}) removed")
            for value in sorted(labels.keys() - previous.keys()):
                changes.append(f"label {value} ({labels[value]['name']}) added")
            for value in sorted(labels.keys() & previous.keys()):
                for part in ("name", "description", "example", "key"):
                    if labels[value][part] != previous[value][part]:
                        changes.append(f"label {value}: {part} changed")
            if not changes:
                changes.append("no change to the labels")
        history.append(
            {
                "version": version.number,
                "created_at": _iso(version.created_at),
                "note": version.note,
                "changes": changes,
                "labels": [{"value": value, **labels[value]} for value in sorted(labels)],
            }
        )
        previous = labels
    return history


def _pools(s: Scope) -> list[dict[str, Any]]:
    result = []
    tags = dict(Run.objects.filter(campaign=s.campaign).values_list("pk", "tag"))
    for pool in s.pools:
        params = dict(pool.params)
        if params.get("depth_per_run"):
            params["depth_per_run"] = {
                tags.get(int(key), key): depth for key, depth in params["depth_per_run"].items()
            }
        result.append(
            {
                "version": pool.version,
                "strategy": pool.strategy,
                "description": pool.describe(),
                "params": params,
                "runs": sorted(pool.runs.values_list("tag", flat=True)),
                "seed": pool.seed,
                "software_version": pool.software_version,
                "size": pool.size,
                "topics": pool.topics.count(),
                "built_at": _iso(pool.built_at),
                "residual": pool.is_residual,
                "note": pool.note,
                "totals": (pool.stats or {}).get("totals"),
            }
        )
    return result


def _pooled_per_topic(s: Scope) -> dict[str, int]:
    if not s.pools:
        return {}
    # One pool holds a pair once; several may share pairs, which count once.
    count = Count("pk") if len(s.pools) == 1 else Count("doc_id", distinct=True)
    return dict(
        PoolEntry.objects.filter(pool__in=s.pools)
        .values("topic__topic_id")
        .annotate(n=count)
        .values_list("topic__topic_id", "n")
        .order_by()
    )


def _scale_values(campaign: Campaign) -> list[int]:
    from campaigns.models import Label

    return sorted(
        set(
            Label.objects.filter(rubric__campaign=campaign, value__gte=0).values_list(
                "value", flat=True
            )
        )
    )


def _blind(
    s: Scope, overlap: dict[str, dict[tuple[str, str], int]], assessor_ids: dict[str, str]
) -> dict[str, dict[tuple[str, str], int]]:
    """People's ``overlap`` with the blind verdict of each judgment revised after a reveal (the
    label before its first post-reveal revision, assess/reveal.py), as every agreement figure
    reads it (qrels.queries.blind_label); qrels.txt keeps the current label."""
    blind = blind_labels(s.campaign)
    if not blind:
        return overlap
    names = {str(pk): name for name, pk in assessor_ids.items()}
    for pk, assessor, topic, doc in Judgment.objects.filter(pk__in=list(blind)).values_list(
        "pk", "assessor_id", "topic__topic_id", "doc_id"
    ):
        given = overlap.get(names.get(str(assessor), ""))
        if given is not None and (topic, doc) in given:
            given[(topic, doc)] = blind[pk]
    return overlap


def _agreement(s: Scope, verdicts: dict[str, dict[tuple[str, str], int]]) -> dict[str, Any] | None:
    """Pairwise agreement between people over the pairs at least two of them judged
    (``verdicts``: assessor -> pair -> label, collected while the qrels were written)."""
    if len(verdicts) < 2:
        return None
    labels_seen = {label for given in verdicts.values() for label in given.values()}
    scale = sorted(set(_scale_values(s.campaign)) | labels_seen)
    threshold = s.campaign.relevance_threshold
    results = agreement.pairwise_agreement(
        verdicts, labels=scale, threshold=threshold, bootstrap=AGREEMENT_BOOTSTRAP
    )
    if not results:
        return None

    def figures(result: agreement.PairAgreement) -> dict[str, Any]:
        return {
            "n": result.n,
            "observed": result.observed,
            "cohen_kappa": result.cohen_kappa,
            "pooled_kappa": result.pooled_kappa,
            "weighted_kappa_linear": result.weighted_kappa_linear,
            "weighted_kappa_quadratic": result.weighted_kappa_quadratic,
            "relevant_overlap": result.relevant_overlap,
            "small_n": result.small_n,
        }

    pairs_out = []
    for result in results:
        entry = {"a": result.a, "b": result.b, **figures(result)}
        entry["ci95"] = {key: list(value) for key, value in result.ci.items()}
        entry["labels"] = result.labels
        entry["confusion"] = result.confusion
        if result.small_n:
            entry["statement"] = (
                f"Only {result.n} pair{'s' if result.n != 1 else ''} judged by both: too few "
                f"for stable figures (below {agreement.SMALL_N}, a kappa's 95% interval is "
                "typically +-0.2 or wider)."
            )
        entry["per_topic"] = {topic: figures(r) for topic, r in result.per_topic.items()}
        pairs_out.append(entry)
    return {
        "assessors": sorted(verdicts),
        "scale": scale,
        "threshold": threshold,
        "small_n_below": agreement.SMALL_N,
        "bootstrap_replicates": AGREEMENT_BOOTSTRAP,
        "pairs": pairs_out,
    }


NEGATIVE_RULE = (
    "A label below 0 comes only from imported qrels and is kept as written: it is exported as "
    "it came, by default. It is not a grade: trec_eval reads any label below 0 as 'in the pool, "
    "not judged'. Where someone gave the same pair a label of 0 or more, those labels decide "
    "the pair's line; a pair with negative labels only keeps them (the sources' shared label, "
    "-1 where they differ). Pooljudge writes -1 for a pair it pooled and nobody labelled only "
    "when unjudged pairs are asked for (unjudged: -1)."
)
POLICY_TEXT = {
    "primary": "the topic's primary assessor's label; where they did not judge the pair, the "
    "majority rule",
    "majority": "the most frequent label; ties go to the highest tied label",
    "max": "the highest label given",
    "min": "the lowest label given",
    "mean": "the arithmetic mean of the labels, rounded half up",
    "first": "the label judged first (earliest first judgment; ties by assessor pseudonym)",
    "refuse": "the label all assessors agree on (the export refuses to run if any pair has "
    "disagreeing labels)",
    "adjudicated": "the adjudicated label (an organiser or adjudicator settled the pair, with a "
    "reason) where one exists; elsewhere the campaign's default policy",
}


def _manifest(
    s: Scope,
    options: ExportOptions,
    *,
    name: str,
    exported_at: datetime,
    files: list[BundleFile],
    verdicts_by_topic: dict[str, dict[int, int]],
    judged: dict[str, int],
    judged_in_pool: dict[str, int],
    marked_unjudged: dict[str, int],
    by_assessor: dict[str, list],
    agreement_figures: dict[str, Any] | None,
    from_models: list[int] | None = None,
) -> dict[str, Any]:
    campaign = s.campaign
    rubric: RubricVersion | None = campaign.current_rubric()
    pooled = _pooled_per_topic(s)
    topics = []
    totals = {
        "pooled": 0,
        "judged": 0,
        "judged_in_pool": 0,
        "unjudged": 0,
        "marked_unjudged": 0,
        "judgments": 0,
    }
    verdict_totals: dict[int, int] = {}
    for topic_id, title, original_id in campaign.topics.order_by(
        "position", "topic_id"
    ).values_list("topic_id", "title", "original_id"):
        n_pooled = pooled.get(topic_id, 0)
        n_in_pool = judged_in_pool.get(topic_id, 0)
        labels = verdicts_by_topic.get(topic_id, {})
        for label, count in labels.items():
            verdict_totals[label] = verdict_totals.get(label, 0) + count
        entry = {
            "topic": topic_id,
            "title": title,
            "pooled": n_pooled,
            "judged": judged.get(topic_id, 0),
            "judged_in_pool": n_in_pool,
            "unjudged": n_pooled - n_in_pool,
            "fraction_judged": (n_in_pool / n_pooled) if n_pooled else None,
            "marked_unjudged": marked_unjudged.get(topic_id, 0),
            "judgments": sum(labels.values()),
            "verdicts": {str(label): labels[label] for label in sorted(labels)},
        }
        if original_id:
            entry["original_id"] = original_id  # the topic file's id; topic is its position
        topics.append(entry)
        for key in totals:
            totals[key] += entry[key]
    totals["fraction_judged"] = (
        totals["judged_in_pool"] / totals["pooled"] if totals["pooled"] else None
    )
    totals["verdicts"] = {str(label): verdict_totals[label] for label in sorted(verdict_totals)}

    assessor_rows = []
    kinds = dict(Assessor.objects.filter(campaign=campaign).values_list("pk", "kind"))
    details = dict(Assessor.objects.filter(campaign=campaign).values_list("pk", "details"))
    for display in sorted(by_assessor):
        assessor_id, rows, verdict_count = by_assessor[display]
        row = {
            "assessor": display,
            "kind": kinds.get(int(assessor_id)),
            "judgments": rows,
            "verdicts": verdict_count,
        }
        if row["kind"] in (Assessor.Kind.IMPORTED, Assessor.Kind.MODEL):
            row["imports"] = (details.get(int(assessor_id)) or {}).get("imports", [])
        assessor_rows.append(row)
    # Which labels came from whom: the judgments of each kind of assessor in the bundle (the
    # sidecar's source column), and the kinds the export left out.
    sources: dict[str, dict[str, int]] = {}
    for row in assessor_rows:
        source = sources.setdefault(row["kind"], {"assessors": 0, "judgments": 0, "verdicts": 0})
        source["assessors"] += 1
        source["judgments"] += row["judgments"]
        source["verdicts"] += row["verdicts"]
    left_out = sorted(
        set(
            Assessor.objects.filter(campaign=campaign, judgments__isnull=False)
            .exclude(kind__in=s.kinds)
            .values_list("kind", flat=True)
            .order_by()
        )
    )

    return {
        "format": FORMAT,
        "name": name,
        "software": {"name": "pooljudge", "version": pooljudge.__version__},
        "exported_at": _iso(exported_at),
        "campaign": {
            "slug": campaign.slug,
            "title": campaign.title,
            "description": campaign.description,
            "guidelines": campaign.guidelines,
            "created_at": _iso(campaign.created_at),
            # The interface is part of the measurement (seed 002): how the screen was set.
            "judging_screen": {
                "topic_breaks": campaign.topic_breaks,
                "term_highlighting": campaign.highlight_terms,
                "reveal_models_after_deciding": campaign.reveal_models,
                # Judgments revised after the screen revealed a model's label on the pair
                # (assess/reveal.py): qrels and the sidecar hold their current label.
                "judgments_revised_after_reveal": JudgmentRevision.objects.filter(
                    judgment__campaign=campaign, post_reveal=True
                )
                .values("judgment_id")
                .distinct()
                .count(),
                "post_reveal_rule": POST_REVEAL_RULE,
                "as_of": "export time",
            },
        },
        "scale": {
            "rubric_version": rubric.number if rubric else None,
            "relevance_threshold": campaign.relevance_threshold,
            "labels": [
                {
                    "value": label.value,
                    "name": label.name,
                    "description": label.description,
                    "example": label.example,
                }
                for label in (rubric.labels.all() if rubric else [])
            ],
            "negative_labels": NEGATIVE_RULE,
        },
        "rubric_history": _rubric_history(campaign),
        "export": {
            **options.as_dict(),
            "policy_rule": POLICY_TEXT[options.policy]
            if not options.per_assessor
            else "none: one qrels file per assessor with their own verdicts",
            "order": "topic id, then document id, in code-point order (LC_ALL=C sort)",
            "pooled_pairs_from": [pool.version for pool in s.pools],
        },
        "pools": _pools(s),
        "assessors": assessor_rows,
        "sources": {
            "counted": list(s.kinds),
            "judgments": {kind: sources[kind] for kind in sorted(sources)},
            "left_out": left_out,
            # Lines of qrels.txt whose pair models alone labelled, and those where a model's
            # label was one of several the policy combined (only with models included).
            "qrels_lines_from_models_only": from_models[0] if from_models else 0,
            "qrels_lines_with_models": from_models[1] if from_models else 0,
        },
        "topics": topics,
        "totals": totals,
        "agreement": agreement_figures,
        "sidecar": {
            "files": ["judgments.tsv", "judgments.jsonl"],
            "columns": list(SIDECAR_COLUMNS),
            "text_columns": list(TEXT_COLUMNS),
            "spreadsheet_safety": SAFETY_RULE,
            "escaping": ESCAPE_RULE,
            "timestamps": "UTC, ISO 8601 with Z; fractions of a second without trailing zeros",
        },
        "files": [_file_entry(f) for f in files],
    }


# Characters with a meaning in (GitHub-flavoured) Markdown inline text or tables: a value from
# the campaign (a title, a run tag, an assessor's name, a label's example) is shown as written.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
# At a line's start: a heading, quote, list item or setext rule (an ordered list's "1." is
# escaped at its dot: a backslash before a digit is no escape).
_LINE_START = re.compile(r"^([#>+\-=])|^(\d+)([.)])")


def _md(text: Any) -> str:
    """A value as Markdown inline text (a table cell, a heading, a sentence): on one line, with
    every character Markdown or HTML would read escaped."""
    if text is None:
        return "—"
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).split())) or "—"


def _md_block(text: str) -> str:
    """A multi-line value (a description) as Markdown paragraphs: lines kept, each escaped as
    inline text, and nothing at a line's start read as a heading, quote, list or rule."""
    lines = []
    for line in text.strip().splitlines():
        escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(line.split()))
        lines.append(_LINE_START.sub(_escape_line_start, escaped))
    return "\n".join(lines)


def _escape_line_start(match: re.Match) -> str:
    if match.group(1):
        return "\\" + match.group(1)
    return match.group(2) + "\\" + match.group(3)


def _code(value: Any) -> str:
    """An id or tag in code font, exactly as written; as escaped text when it holds a backtick
    or a pipe (which no code span shows reliably inside a table)."""
    text = str(value)
    if "`" in text or "|" in text or not text.strip():
        return _md(text)
    return f"`{text}`"


def _number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


# How a revision made after a model's label was revealed (assess/reveal.py) counts.
POST_REVEAL_RULE = (
    "qrels.txt and the sidecar hold each judgment's current label, a change made after the "
    "reveal included (the assessor's considered verdict, as any revision); the agreement "
    "figures use the blind verdict, the label before the judgment's first post-reveal revision"
)


# What each value of the sidecar's source column (an assessor's kind) means, for the README.
SOURCE_TEXT = {
    Assessor.Kind.PERSON.value: "people judging in Pooljudge",
    Assessor.Kind.IMPORTED.value: "imported qrels (earlier judgments)",
    Assessor.Kind.MODEL.value: "a model's labels, e.g. an LLM judge's",
    Assessor.Kind.ADJUDICATED.value: "adjudicated labels",
    Assessor.Kind.FILLED.value: "a model's labels filled in by a hybrid budget, calibrated on "
    "the people's verdicts of the topic, on pairs no person judged",
}


def render_readme(manifest: dict[str, Any]) -> str:
    """The bundle's README.md (templates/qrels/bundle_readme.md), written from its
    campaign.json content alone."""
    return render_to_string("qrels/bundle_readme.md", _readme_context(manifest))


def _commas(value: int) -> str:
    return f"{value:,}"


def _readme_context(m: dict[str, Any]) -> dict[str, Any]:
    """What the README template prints, every value from the campaign escaped as Markdown
    (:func:`_md`, :func:`_code`) and every number formatted, so the template only lays out."""
    c, e, t, scale = m["campaign"], m["export"], m["totals"], m["scale"]
    screen = c.get("judging_screen")
    agree = m["agreement"]
    threshold = scale["relevance_threshold"]
    negative_lines = sum(
        count
        for f in m["files"]
        if f.get("labels")
        for label, count in f["labels"].items()
        if int(label) < 0
    )
    return {
        "m": m,
        "e": e,
        "title": _md(c["title"]),
        "description": _md_block(c["description"]) if c["description"].strip() else "",
        "files": [
            {
                "path": _code(f["path"]),
                "description": _md(f["description"]),
                "lines": _commas(f["lines"]),
                "sha256": f["sha256"],
            }
            for f in m["files"]
        ],
        "negative_lines": _commas(negative_lines) if negative_lines else "",
        "positional": any("original_id" in topic for topic in m["topics"]),
        "rubric_version": scale["rubric_version"] or "—",
        "labels": [
            {
                "value": label["value"],
                "name": _md(label["name"]),
                "description": _md(label["description"]),
                "example": _md(label["example"]),
            }
            for label in scale["labels"]
        ],
        "rubric_history": [
            {
                "version": version["version"],
                "created_at": version["created_at"],
                "note": f" ({_md(version['note'])})" if version["note"] else "",
                "changes": "; ".join(_md(change) for change in version["changes"]),
            }
            for version in m["rubric_history"]
        ]
        if len(m["rubric_history"]) > 1
        else [],
        "screen": {
            "topic_breaks": "on" if screen["topic_breaks"] else "off",
            "term_highlighting": "on" if screen["term_highlighting"] else "off",
            "highlighting": screen["term_highlighting"],
            "reveal": screen.get("reveal_models_after_deciding", False),
            "post_reveal": _commas(screen.get("judgments_revised_after_reveal", 0)),
            "post_reveal_count": screen.get("judgments_revised_after_reveal", 0),
            "post_reveal_rule": POST_REVEAL_RULE,
        }
        if screen
        else None,
        "pools": [
            {
                "version": pool["version"],
                "description": _md(pool["description"]),
                "run_count": len(pool["runs"]),
                "runs": ", ".join(_code(tag) for tag in pool["runs"][:30]),
                "more": " …" if len(pool["runs"]) > 30 else "",
                "size": _commas(pool["size"]),
                "topics": pool["topics"],
                "seed": _md(pool["seed"]),
                "built_at": pool["built_at"],
                "software": _md(pool["software_version"]),
            }
            for pool in m["pools"]
        ],
        "t": {
            "pooled": _commas(t["pooled"]) if t["pooled"] else "",
            "judged_in_pool": _commas(t["judged_in_pool"]),
            "fraction": f"{100 * t['fraction_judged']:.1f}" if t["pooled"] else "",
            "unjudged": _commas(t["unjudged"]),
            "judged": _commas(t["judged"]),
            "judgments": _commas(t["judgments"]),
            "verdicts": ", ".join(f"label {k}: {v:,}" for k, v in t["verdicts"].items()) or "none",
        },
        "topics": [
            {
                "topic": _code(topic["topic"]),
                "original": f" (file: {_code(topic['original_id'])})"
                if "original_id" in topic
                else "",
                "pooled": _commas(topic["pooled"]),
                "judged": _commas(topic["judged"]),
                "unjudged": _commas(topic["unjudged"]),
                "fraction": "—"
                if topic["fraction_judged"] is None
                else f"{100 * topic['fraction_judged']:.1f}%",
                "verdicts": ", ".join(f"{k}: {v:,}" for k, v in topic["verdicts"].items()) or "—",
            }
            for topic in m["topics"][:README_TOPIC_ROWS]
        ],
        "more_topics": _commas(len(m["topics"]) - README_TOPIC_ROWS)
        if len(m["topics"]) > README_TOPIC_ROWS
        else "",
        "sources": [
            {
                "kind": kind,
                "what": SOURCE_TEXT.get(kind, kind),
                "assessors": _commas(counts["assessors"]),
                "judgments": _commas(counts["judgments"]),
                "verdicts": _commas(counts["verdicts"]),
            }
            for kind, counts in m["sources"]["judgments"].items()
        ],
        "model_lines": {
            "only": _commas(m["sources"]["qrels_lines_from_models_only"]),
            "with": _commas(m["sources"]["qrels_lines_with_models"]),
        },
        "sources_left_out": ", ".join(
            f"`{kind}` ({SOURCE_TEXT.get(kind, kind)})" for kind in m["sources"]["left_out"]
        ),
        "agreement": {
            "pairs": [
                {
                    "a": _md(pair["a"]),
                    "b": _md(pair["b"]),
                    "n": _commas(pair["n"]),
                    **{
                        key: _number(pair[key])
                        for key in (
                            "observed",
                            "cohen_kappa",
                            "pooled_kappa",
                            "weighted_kappa_linear",
                            "weighted_kappa_quadratic",
                        )
                    },
                }
                for pair in agree["pairs"]
            ],
            "statements": [
                f"{_md(pair['a'])} / {_md(pair['b'])}: {pair['statement']}"
                for pair in agree["pairs"]
                if pair.get("statement")
            ],
        }
        if agree
        else None,
        "sample_eval": {"maps": " ".join(f"{label}=0" for label in range(1, threshold))}
        if any(f["path"] == "qrels.sample_eval.txt" for f in m["files"])
        else None,
        "columns": "`, `".join(m["sidecar"]["columns"]),
        "options": json.dumps(
            {k: e[k] for k in ExportOptions.__dataclass_fields__ if k in e}, indent=2
        ),
    }


# --- Exports stored in the database --------------------------------------------------------------


class ChunkWriter:
    """A write-only stream storing bytes as numbered :class:`qrels.models.ExportChunk` rows of
    CHUNK_BYTES, so a web process on any machine can serve what a worker built."""

    def __init__(self, export):
        from qrels.models import ExportChunk

        self._model = ExportChunk
        self.export = export
        self.seq = 0
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        while len(self._buffer) >= CHUNK_BYTES:
            self._store(bytes(self._buffer[:CHUNK_BYTES]))
            del self._buffer[:CHUNK_BYTES]
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._buffer:
            self._store(bytes(self._buffer))
            self._buffer = bytearray()

    def _store(self, data: bytes) -> None:
        self._model.objects.create(export=self.export, seq=self.seq, data=data)
        self.seq += 1


def build_stored_export(*, export, progress: ProgressFn = no_progress) -> dict[str, Any]:
    """Build ``export``'s zip into its chunks (replacing any from an earlier attempt) and record
    its size, SHA-256, README and counts. Raises what :func:`export_bundle` raises."""
    from qrels.models import ExportChunk

    ExportChunk.objects.filter(export=export).delete()
    options = export.options
    pool = None
    if options.get("pool") is not None:
        pool = export.campaign.pools.filter(version=options["pool"]).first()
        if pool is None:
            raise ExportError(f"Pool v{options['pool']} no longer exists.")
    writer = ChunkWriter(export)
    result = export_bundle(
        campaign=export.campaign,
        destination=writer,
        policy=options.get("policy"),
        per_assessor=options.get("per_assessor", False),
        unjudged=options.get("unjudged", "omit"),
        binary=options.get("binary", False),
        include_imported=options.get("include_imported", True),
        include_models=options.get("include_models", False),
        include_filled=options.get("include_filled", False),
        usernames=options.get("usernames", False),
        pool=pool,
        zip=True,
        progress=progress,
        name=Path(export.file_name).stem,
    )
    writer.close()
    export.size = result.zip_bytes or 0
    export.sha256 = result.zip_sha256 or ""
    export.readme = result.readme
    export.summary = {
        **result.counts,
        "policy": result.manifest["export"]["policy"],
        "exported_at": result.manifest["exported_at"],
        "fraction_judged": result.manifest["totals"]["fraction_judged"],
    }
    export.finished_at = timezone.now()
    export.save(update_fields=["size", "sha256", "readme", "summary", "finished_at"])
    return {
        "export": export.pk,
        "size": export.size,
        "message": f"Bundle {export.file_name} ready: {result.counts['judgments']:,} judgments, "
        f"{export.size:,} bytes.",
    }


__all__ = [
    "SIDECAR_COLUMNS",
    "ExportError",
    "ExportResult",
    "build_stored_export",
    "bundle_name",
    "decode_cell",
    "export_bundle",
    "neutralise",
    "render_readme",
    "sidecar_rows",
    "use_snapshot",
]
