"""Resolving several assessors' verdicts into one label per pair (qrels.policies)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assess.models import Assignment
from campaigns.models import Assessor, Judgment, Topic
from pooling.models import Pool, PoolEntry
from qrels.policies import (
    POLICIES,
    Conflict,
    PolicyConflict,
    Resolver,
    campaign_qrels,
    default_policy,
    per_assessor_qrels,
)

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def judge(campaign, assessor, topic, doc, label, *, minute=0, **extra) -> Judgment:
    at = T0 + timedelta(minutes=minute)
    return Judgment.objects.create(
        campaign=campaign,
        topic=topic,
        doc_id=doc,
        assessor=assessor,
        label=label,
        judged_at=at,
        first_judged_at=at,
        source=Judgment.Source.IMPORTED
        if assessor.kind == Assessor.Kind.IMPORTED
        else Judgment.Source.JUDGED,
        **extra,
    )


@pytest.fixture
def three(campaign):
    """Three people (ann, ben, cat) and an imported source on topics 051 and 052.

    topic 051 (ann is its primary assessor)      topic 052 (no primary)
      d1: ann 2, ben 2, cat 0                      d8: ben 2, cat 0
      d2: ann 1, ben 0          (two-way tie)      d9: nist -1 only
      d3: ann 0, ben 1, cat 2   (three-way tie)
      d4: cat 1                 (primary absent)
      d5: ann 2, ben 1, cat 1
      d6: ann 0, ben 0          (agree)
    """
    t1 = Topic.objects.create(campaign=campaign, topic_id="051", position=1)
    t2 = Topic.objects.create(campaign=campaign, topic_id="052", position=2)
    people = {
        name: Assessor.objects.create(campaign=campaign, name=name, pseudonym=pseudonym)
        for name, pseudonym in (("ann", "a003"), ("ben", "a002"), ("cat", "a001"))
    }
    nist = Assessor.objects.create(campaign=campaign, name="nist", kind=Assessor.Kind.IMPORTED)
    ann, ben, cat = people["ann"], people["ben"], people["cat"]
    # Minutes order the first judgments: cat judged d1 first, ben and cat tie on d3.
    for assessor, doc, label, minute in [
        (ann, "d1", 2, 5),
        (ben, "d1", 2, 6),
        (cat, "d1", 0, 1),
        (ann, "d2", 1, 9),
        (ben, "d2", 0, 2),
        (ann, "d3", 0, 7),
        (ben, "d3", 1, 3),
        (cat, "d3", 2, 3),
        (cat, "d4", 1, 4),
        (ann, "d5", 2, 1),
        (ben, "d5", 1, 2),
        (cat, "d5", 1, 3),
        (ann, "d6", 0, 1),
        (ben, "d6", 0, 2),
    ]:
        judge(campaign, assessor, t1, doc, label, minute=minute)
    judge(campaign, ben, t2, "d8", 2)
    judge(campaign, cat, t2, "d8", 0)
    judge(campaign, nist, t2, "d9", -1)
    pool = Pool.objects.create(
        campaign=campaign,
        version=1,
        strategy=Pool.Strategy.DEPTH,
        params={"depth": 10},
        software_version="test",
        status=Pool.Status.BUILT,
    )
    assignment = Assignment.objects.create(
        campaign=campaign, pool=pool, assessor=ann, mode=Assignment.Mode.PRIMARY, seed=1
    )
    assignment.topics.add(t1)
    return {"topics": (t1, t2), "pool": pool, **people, "nist": nist}


def qrels_of(campaign, **options):
    return campaign_qrels(campaign=campaign, **options)


EXPECTED = {
    #            d1 d2 d3 d4 d5 d6 | 052 d8
    "primary": ([2, 1, 0, 1, 2, 0], 2),
    "majority": ([2, 1, 2, 1, 1, 0], 2),
    "max": ([2, 1, 2, 1, 2, 0], 2),
    "min": ([0, 0, 0, 1, 1, 0], 0),
    "mean": ([1, 1, 1, 1, 1, 0], 1),
    "first": ([0, 0, 2, 1, 2, 0], 0),
}


class TestEachPolicy:
    @pytest.mark.parametrize("policy", list(EXPECTED))
    def test_it_resolves_the_three_assessor_case(self, campaign, three, policy):
        topic_051, topic_052 = EXPECTED[policy]
        qrels = qrels_of(campaign, policy=policy)
        assert qrels == {
            "051": {f"d{i}": label for i, label in enumerate(topic_051, 1)},
            # nist's imported -1 is written as it came, whatever the policy.
            "052": {"d8": topic_052, "d9": -1},
        }

    def test_majority_breaks_a_tie_with_the_higher_label(self, campaign, three):
        qrels = qrels_of(campaign, policy="majority")
        assert qrels["051"]["d2"] == 1  # 1 vs 0
        assert qrels["051"]["d3"] == 2  # 0 vs 1 vs 2

    def test_mean_rounds_half_up_not_to_even(self, campaign, three):
        # d2: (1 + 0) / 2 = 0.5 -> 1 (banker's rounding would give 0); d8: (2 + 0) / 2 = 1.
        qrels = qrels_of(campaign, policy="mean")
        assert qrels["051"]["d2"] == 1
        assert round(0.5) == 0  # what Python's round would have done
        resolve = Resolver("mean")
        assert resolve("t", [("1", 2, "", "a"), ("2", 3, "", "b")]) == 3  # 2.5 -> 3
        assert resolve("t", [("1", 1, "", "a"), ("2", 2, "", "b")]) == 2  # 1.5 -> 2
        assert resolve("t", [("1", 0, "", "a"), ("2", 1, "", "b"), ("3", 1, "", "c")]) == 1

    def test_first_takes_the_earliest_verdict_and_breaks_ties_by_pseudonym(self, campaign, three):
        qrels = qrels_of(campaign, policy="first")
        assert qrels["051"]["d1"] == 0  # cat judged it first
        # d3 and d8: ben and cat judged at the same minute; cat's pseudonym a001 < ben's a002.
        assert qrels["051"]["d3"] == 2
        assert qrels["052"]["d8"] == 0

    def test_primary_falls_back_to_majority_where_the_primary_did_not_judge(self, campaign, three):
        qrels = qrels_of(campaign, policy="primary")
        assert qrels["051"]["d3"] == 0  # ann's label, although the majority says 2
        assert qrels["051"]["d4"] == 1  # ann did not judge d4
        assert qrels["052"]["d8"] == 2  # no primary for 052: majority, tie -> higher

    def test_primary_prefers_the_active_assignment(self, campaign, three):
        t1 = three["topics"][0]
        Assignment.objects.filter(assessor=three["ann"]).update(active=False)
        newer = Assignment.objects.create(
            campaign=campaign,
            pool=three["pool"],
            assessor=three["cat"],
            mode=Assignment.Mode.PRIMARY,
            seed=2,
        )
        newer.topics.add(t1)
        qrels = qrels_of(campaign, policy="primary")
        assert qrels["051"]["d3"] == 2  # cat now owns the topic
        assert qrels["051"]["d2"] == 1  # cat did not judge d2: ann, the earlier primary

    def test_refuse_lists_every_conflicting_pair_with_each_assessors_label(self, campaign, three):
        with pytest.raises(PolicyConflict) as raised:
            qrels_of(campaign, policy="refuse")
        conflicts = raised.value.conflicts
        assert conflicts == [
            Conflict("051", "d1", {"ann": 2, "ben": 2, "cat": 0}),
            Conflict("051", "d2", {"ann": 1, "ben": 0}),
            Conflict("051", "d3", {"ann": 0, "ben": 1, "cat": 2}),
            Conflict("051", "d5", {"ann": 2, "ben": 1, "cat": 1}),
            Conflict("052", "d8", {"ben": 2, "cat": 0}),
        ]
        assert str(conflicts[0]) == "topic 051 document d1: ann=2, ben=2, cat=0"
        assert "5 pairs" in str(raised.value)

    def test_refuse_gives_the_agreed_label_when_nobody_disagrees(self, campaign, three):
        with pytest.raises(PolicyConflict) as raised:  # ann and ben disagree on d2, d3, d5
            qrels_of(campaign, policy="refuse", assessors=["ann", "ben"])
        assert [c.doc_id for c in raised.value.conflicts] == ["d2", "d3", "d5"]
        qrels = qrels_of(campaign, policy="refuse", assessors=["cat"])
        assert qrels == {"051": {"d1": 0, "d3": 2, "d4": 1, "d5": 1}, "052": {"d8": 0}}

    def test_every_policy_is_listed_and_an_unknown_one_is_refused(self, campaign, three):
        assert set(POLICIES) == set(EXPECTED) | {"refuse", "adjudicated"}
        with pytest.raises(ValueError, match="Unknown policy"):
            qrels_of(campaign, policy="median")


class TestDefaults:
    def test_the_default_is_primary_where_a_primary_assessor_exists(self, campaign, three):
        assert default_policy(campaign) == "primary"
        assert qrels_of(campaign) == qrels_of(campaign, policy="primary")

    def test_the_default_is_majority_without_primary_assignments(self, campaign, three):
        Assignment.objects.all().delete()
        assert default_policy(campaign) == "majority"


class TestNegativeLabelsAndUnjudgedPairs:
    @pytest.mark.parametrize("binary", [False, True])
    def test_an_imported_negative_label_is_kept_as_written_by_default(
        self, campaign, three, binary
    ):
        assert qrels_of(campaign, policy="max", binary=binary)["052"]["d9"] == -1
        judge(campaign, three["nist"], three["topics"][1], "d11", -2)
        assert qrels_of(campaign, policy="max")["052"]["d11"] == -2

    def test_sources_that_give_different_negative_labels_get_minus_one(self, campaign, three):
        other = Assessor.objects.create(
            campaign=campaign, name="older", kind=Assessor.Kind.IMPORTED
        )
        judge(campaign, other, three["topics"][1], "d9", -2)
        assert qrels_of(campaign, policy="max")["052"]["d9"] == -1

    def test_a_negative_label_never_outvotes_a_verdict(self, campaign, three):
        judge(campaign, three["nist"], three["topics"][1], "d8", -1)
        assert qrels_of(campaign, policy="min")["052"]["d8"] == 0

    def test_unjudged_minus_one_writes_pooled_pairs_without_a_verdict(self, campaign, three):
        t1, t2 = three["topics"]
        pool = three["pool"]
        PoolEntry.objects.create(pool=pool, topic=t1, doc_id="d1")
        PoolEntry.objects.create(pool=pool, topic=t1, doc_id="d00042")
        PoolEntry.objects.create(pool=pool, topic=t2, doc_id="d10", sampled=False)
        qrels = qrels_of(campaign, policy="max", unjudged="-1")
        assert qrels["051"]["d00042"] == -1
        assert qrels["052"]["d10"] == -1  # unsampled entry of a sampled pool
        assert qrels["052"]["d9"] == -1  # the source's own "pooled, not judged"
        assert qrels["051"]["d1"] == 2  # judged pairs keep their verdict

    def test_a_pool_restricts_the_pairs(self, campaign, three):
        t1 = three["topics"][0]
        PoolEntry.objects.create(pool=three["pool"], topic=t1, doc_id="d1")
        PoolEntry.objects.create(pool=three["pool"], topic=t1, doc_id="d7")
        assert qrels_of(campaign, policy="max", pool=three["pool"]) == {"051": {"d1": 2}}
        assert qrels_of(campaign, policy="max", pool=three["pool"], unjudged="-1") == {
            "051": {"d1": 2, "d7": -1}
        }

    def test_an_unbuilt_pool_is_refused(self, campaign, three):
        Pool.objects.filter(pk=three["pool"].pk).update(built_at=None)  # not built
        three["pool"].refresh_from_db()
        with pytest.raises(ValueError, match="building"):
            qrels_of(campaign, pool=three["pool"])


class TestOptions:
    def test_binary_maps_by_the_campaign_threshold_after_the_policy(self, campaign, three):
        campaign.relevance_threshold = 2
        campaign.save()
        qrels = qrels_of(campaign, policy="mean", binary=True, unjudged="-1")
        # mean gives d1..d5 the label 1 (below 2) and d8 1: all 0; d9 stays -1.
        assert set(qrels["051"].values()) == {0}
        assert qrels["052"] == {"d8": 0, "d9": -1}
        assert qrels_of(campaign, policy="max", binary=True)["051"]["d1"] == 1

    def test_imported_judgments_can_be_left_out(self, campaign, three):
        judge(campaign, three["nist"], three["topics"][1], "d11", 2)
        assert qrels_of(campaign, policy="max")["052"]["d11"] == 2
        assert "d11" not in qrels_of(campaign, policy="max", include_imported=False)["052"]

    def test_assessors_restrict_the_verdicts(self, campaign, three):
        qrels = qrels_of(campaign, policy="max", assessors=["ann"])
        assert qrels == {"051": {"d1": 2, "d2": 1, "d3": 0, "d5": 2, "d6": 0}}
        with pytest.raises(ValueError, match="No assessor named 'zed'"):
            qrels_of(campaign, assessors=["zed"])

    def test_only_current_verdicts_count(self, campaign, three):
        judgment = Judgment.objects.get(assessor=three["cat"], doc_id="d4")
        judgment.label, judgment.version = 0, 2
        judgment.save()
        assert qrels_of(campaign, policy="max")["051"]["d4"] == 0

    def test_ids_keep_their_leading_zeros_and_come_in_code_point_order(self, campaign, three):
        t1 = three["topics"][0]
        for doc in ("d00042", "D9", "d10", "d9"):
            judge(campaign, three["ben"], t1, doc, 1)
        topic = qrels_of(campaign, policy="max")["051"]
        assert list(topic) == sorted(topic)
        assert "d00042" in topic
        assert list(topic)[:2] == ["D9", "d00042"]


class TestPerAssessor:
    def test_each_assessor_gets_their_own_verdicts(self, campaign, three):
        qrels = per_assessor_qrels(campaign=campaign)
        assert set(qrels) == {"ann", "ben", "cat", "nist"}
        assert qrels["nist"] == {"052": {"d9": -1}}  # a source's -1, as it came
        assert qrels["cat"] == {"051": {"d1": 0, "d3": 2, "d4": 1, "d5": 1}, "052": {"d8": 0}}

    def test_unjudged_minus_one_keeps_a_sources_own_negative_labels(self, campaign, three):
        qrels = per_assessor_qrels(campaign=campaign, unjudged="-1", binary=True)
        assert qrels["nist"] == {"052": {"d9": -1}}
        assert qrels["ann"]["051"] == {"d1": 1, "d2": 1, "d3": 0, "d5": 1, "d6": 0}
