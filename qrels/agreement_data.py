"""The agreement report: the judgments paired and counted by the database
(qrels.queries.agreement_counts: one self-join and GROUP BY, so only confusion matrices travel,
whatever the number of judgments), qrels.agreement's statistics over those counts, and the
result as a :class:`qrels.reports.AgreementReport`, which writes its own CSV and JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

from campaigns.models import Campaign
from qrels.queries import agreement_counts, assessor_verdicts, judging_assessors, scale_labels
from qrels.reports import AgreementReport, computed_now, side_of

# Bootstrap replicates behind the 95% intervals of the per-pair page and the downloads.
BOOTSTRAP = 1000


def agreement_data(
    *,
    campaign: Campaign,
    assessors: Sequence[str] | None = None,
    binary: bool = False,
    bootstrap: int = 0,
) -> AgreementReport:
    """Pairwise agreement between ``assessors`` (names; default every assessor with a verdict,
    people first, then imported sources, then models) and, when three or more people overlap,
    their group statistics. Each pair is a person-person, person-model or model-model
    comparison (imported qrels are people's verdicts); the report's headline is people's only.
    Pairs without a common judged pair are absent. Raises ValueError naming an assessor without
    verdicts."""
    # numpy and krippendorff: loaded by the first report, not by every web process
    from qrels import agreement

    known = {a.name: a for a in judging_assessors(campaign)}
    chosen = list(known) if assessors is None else list(dict.fromkeys(assessors))
    missing = [name for name in chosen if name not in known]
    if missing:
        raise ValueError(
            f"No judgments by {', '.join(map(repr, missing))} in this campaign; assessors with "
            f"judgments: {', '.join(known) or 'none'}."
        )
    counts = agreement_counts(
        campaign=campaign, assessors={known[name].pk: name for name in chosen}
    )
    seen = {
        label
        for topics in counts.values()
        for labels in topics.values()
        for pair in labels
        for label in pair
    }
    scale = scale_labels(campaign, seen)
    threshold = campaign.relevance_threshold
    pairs = agreement.pairwise_from_counts(
        counts,
        labels=scale,
        threshold=threshold,
        binary=binary,
        bootstrap=bootstrap,
        assessors=chosen,
    )
    # The group statistics are people's (imported qrels included): a model's labels beside
    # theirs would move Fleiss' kappa and alpha, which describe how consistent people are.
    people = [name for name in chosen if side_of(known[name].kind) == "person"]
    overlapping = {name for pair in counts for name in pair}
    group = None
    if len(people) >= 3 and len(overlapping.intersection(people)) >= 3:
        verdicts = assessor_verdicts(campaign=campaign, names=people)
        group = agreement.group_agreement(
            verdicts, labels=scale, threshold=threshold, binary=binary
        )
    return AgreementReport(
        assessors=tuple(chosen),
        labels=(0, 1) if binary else tuple(scale),
        scale=tuple(scale),
        threshold=threshold,
        binary=binary,
        pairs=tuple(pairs),
        group=group,
        kinds={name: known[name].kind for name in chosen},
        small_n=agreement.SMALL_N,
        computed_at=computed_now(),
    )
