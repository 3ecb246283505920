"""Which qrels a report is computed against (:class:`QrelsSource`), and reading them
(:func:`load_qrels`): the campaign's qrels under an export policy (:mod:`qrels.policies`), one
assessor's own verdicts, or an uploaded qrels file (:func:`parse_upload`). Campaign qrels are
read with pooled-but-unjudged pairs as -1 (trec_eval's "in the pool, not judged"): infAP needs
that distinction and every other measure treats -1 exactly as an absent pair.

The reports of :mod:`qrels.runscores` take a source; the report forms
(:mod:`qrels.report_forms`) and the ``evaluate`` command make one.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from campaigns.models import Assessor, Campaign
from pooling.models import Pool
from qrels.policies import POLICIES, campaign_qrels, default_policy, per_assessor_qrels

Qrels = dict[str, dict[str, int]]
SOURCE_KINDS = ("campaign", "assessor", "upload")


@dataclass(frozen=True)
class QrelsSource:
    """Which qrels a report is computed against.

    ``campaign``: the campaign's judgments under ``policy`` (None: the campaign's default),
    imported sources in or out, optionally only the pairs of pool ``pool`` (a version).
    ``assessor``: one assessor's own verdicts (by name; imported sources too).
    ``upload``: a qrels file (``upload_name``, ``upload_sha256``), read by :func:`parse_upload`.
    """

    kind: str = "campaign"
    policy: str | None = None
    include_imported: bool = True
    pool: int | None = None
    assessor: str | None = None
    upload_name: str = ""
    upload_sha256: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"Unknown qrels source {self.kind!r}.")
        if self.policy is not None and self.policy not in POLICIES:
            raise ValueError(f"Unknown policy {self.policy!r}; use one of {', '.join(POLICIES)}.")
        if self.kind == "assessor" and not self.assessor:
            raise ValueError("An assessor's qrels need the assessor's name.")

    def describe(self, campaign: Campaign | None = None) -> str:
        """One line saying what these qrels are, for pages, downloads and the command line."""
        if self.kind == "upload":
            sha = f", sha256 {self.upload_sha256[:12]}…" if self.upload_sha256 else ""
            return f"uploaded file {self.upload_name}{sha}"
        pool = f", pairs of pool v{self.pool} only" if self.pool is not None else ""
        if self.kind == "assessor":
            return f"judgments of {self.assessor} only{pool}"
        policy = self.policy
        if policy is None and campaign is not None:
            policy = default_policy(campaign)
        imported = "imported qrels included" if self.include_imported else "imported qrels left out"
        return f"campaign qrels, policy {policy or 'default'}, {imported}{pool}"

    def as_params(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> QrelsSource:
        known = {name: params[name] for name in cls.__dataclass_fields__ if name in params}
        return cls(**known)


def pool_version(campaign: Campaign, version: int | None) -> Pool | None:
    """The campaign's pool ``version`` (None for None); ValueError when it has none such."""
    if version is None:
        return None
    pool = campaign.pools.filter(version=version).first()
    if pool is None:
        raise ValueError(f"Campaign {campaign.slug!r} has no pool v{version}.")
    return pool


def load_qrels(*, campaign: Campaign, source: QrelsSource, uploaded: Qrels | None = None) -> Qrels:
    """The qrels ``source`` names, topic id -> document id -> label. ``uploaded`` is the parsed
    file of an ``upload`` source. Raises ValueError (unknown assessor, pool, policy) and
    qrels.policies.PolicyConflict (policy refuse)."""
    if source.kind == "upload":
        if uploaded is None:
            raise ValueError("No qrels file was given.")
        return {topic: dict(labels) for topic, labels in uploaded.items()}
    pool = pool_version(campaign, source.pool)
    if source.kind == "assessor":
        name = source.assessor or ""
        if not Assessor.objects.filter(campaign=campaign, name=name).exists():
            raise ValueError(f"No assessor named {name!r} in this campaign.")
        own = per_assessor_qrels(campaign=campaign, assessors=[name], unjudged="-1", pool=pool)
        return own.get(name, {})
    return campaign_qrels(
        campaign=campaign,
        policy=source.policy,
        include_imported=source.include_imported,
        unjudged="-1",
        pool=pool,
    )


def parse_upload(data, *, name: str, on_conflict: str = "refuse") -> Qrels:
    """A qrels file (bytes, a path or a file object) as topic -> document -> label. Raises
    campaigns.textfiles.ParseError listing every bad line."""
    from qrels.formats import read_qrels_file

    if isinstance(data, bytes | bytearray):
        data = io.BytesIO(data)
    parsed = read_qrels_file(data, name=name, on_conflict=on_conflict)
    qrels: Qrels = {}
    for judgment in parsed.judgments:
        qrels.setdefault(judgment.topic_id, {})[judgment.doc_id] = judgment.label
    return qrels
