"""Qrels through ``import_qrels``: the judgments of a named, imported source, with the
iteration column opaque, negative labels kept, and duplicates resolved only by a chosen policy."""

from __future__ import annotations

import io

import pytest

from campaigns.members import add_member
from campaigns.models import Assessor, Judgment, JudgmentRevision
from campaigns.textfiles import ParseError
from qrels.imports import import_qrels, qrels_importer
from tests.factories import make_topics
from tests.imports import problem_texts, stored_rows, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def topics(campaign):
    return make_topics(campaign, ["051", "052", "1"])


def judgments(assessor: str = "NIST") -> list[tuple[str, str, int]]:
    return list(
        Judgment.objects.filter(assessor__name=assessor)
        .order_by("topic__topic_id", "doc_id")
        .values_list("topic__topic_id", "doc_id", "label")
    )


def qrels(campaign, tmp_path, text: str | bytes, **options):
    options.setdefault("assessor", "NIST")
    path = write(tmp_path, "qrels.txt", text)
    return import_qrels(campaign=campaign, source=path, name="qrels.txt", **options)


def refused(campaign, tmp_path, text: str | bytes, **options) -> list[str]:
    before = stored_rows()
    with pytest.raises(ParseError) as error:
        qrels(campaign, tmp_path, text, **options)
    assert stored_rows() == before
    return problem_texts(error)


class TestImport:
    def test_judgments_belong_to_an_imported_source(self, campaign, topics, tmp_path):
        summary = qrels(campaign, tmp_path, "051 0 0042 2\n051 0 d2 0\n052 0 d1 1\n")
        assert summary.counts == {"new judgments": 3, "revised": 0, "unchanged": 0}
        assert summary.message() == "Imported qrels: 3 new judgments, 0 revised, 0 unchanged."
        assert judgments() == [("051", "0042", 2), ("051", "d2", 0), ("052", "d1", 1)]
        source = Assessor.objects.get(name="NIST")
        assert source.kind == Assessor.Kind.IMPORTED
        assert source.user is None
        assert set(Judgment.objects.values_list("source", flat=True)) == {"imported"}
        assert JudgmentRevision.objects.count() == 3
        (record,) = source.details["imports"]
        assert record["file"] == "qrels.txt"
        assert record["policy"] == "refuse"
        assert record["judgments"] == 3
        assert len(record["sha256"]) == 64

    def test_the_iteration_column_is_opaque_and_kept(self, campaign, topics, tmp_path):
        text = "051 0.5 d1 1\n051  Q0  d2  2\n052\t1\td3\t0\n"
        qrels(campaign, tmp_path, text)
        assert judgments() == [("051", "d1", 1), ("051", "d2", 2), ("052", "d3", 0)]
        kept = Judgment.objects.order_by("doc_id").values_list("doc_id", "iteration")
        assert list(kept) == [("d1", "0.5"), ("d2", "Q0"), ("d3", "1")]
        first = JudgmentRevision.objects.order_by("judgment__doc_id").first()
        assert first.iteration == "0.5"

    def test_the_same_label_from_another_round_is_a_revision(self, campaign, topics, tmp_path):
        qrels(campaign, tmp_path, "051 0.5 d1 1\n051 0.5 d2 2\n")
        again = qrels(campaign, tmp_path, "051 1 d1 1\n051 0.5 d2 2\n")
        assert again.counts == {"new judgments": 0, "revised": 1, "unchanged": 1}
        d1 = Judgment.objects.get(doc_id="d1")
        assert (d1.label, d1.iteration, d1.version) == (1, "1", 2)
        history = d1.revisions.order_by("version").values_list("iteration", flat=True)
        assert list(history) == ["0.5", "1"]

    def test_negative_labels_are_kept_as_judgments(self, campaign, topics, tmp_path):
        qrels(campaign, tmp_path, "051 0 d1 -1\n051 0 d2 -2\n052 0 d3 1\n")
        assert judgments() == [("051", "d1", -1), ("051", "d2", -2), ("052", "d3", 1)]

    def test_ids_keep_their_leading_zeros(self, campaign, topics, tmp_path):
        qrels(campaign, tmp_path, "051 0 0042 1\n1 0 42 1\n")
        assert judgments() == [("051", "0042", 1), ("1", "42", 1)]

    def test_identical_duplicates_collapse_with_a_warning(self, campaign, topics, tmp_path):
        summary = qrels(campaign, tmp_path, "051 0 d1 1\n051 0 d2 0\n051 0 d1 1\n")
        assert judgments() == [("051", "d1", 1), ("051", "d2", 0)]
        assert summary.warnings == ["line 3 repeats line 1 (same label): collapsed"]

    def test_a_second_import_revises_changed_labels_and_keeps_the_history(
        self, campaign, topics, tmp_path
    ):
        qrels(campaign, tmp_path, "051 0 d1 1\n051 0 d2 0\n")
        summary = qrels(campaign, tmp_path, "051 0 d1 2\n051 0 d2 0\n052 0 d3 -1\n")
        assert summary.counts == {"new judgments": 1, "revised": 1, "unchanged": 1}
        d1 = Judgment.objects.get(doc_id="d1")
        assert (d1.label, d1.version) == (2, 2)
        assert list(d1.revisions.order_by("version").values_list("version", "label")) == [
            (1, 1),
            (2, 2),
        ]
        assert len(Assessor.objects.get(name="NIST").details["imports"]) == 2

    def test_the_browser_importer_needs_a_source_name(self, campaign, topics):
        with pytest.raises(ParseError) as error:
            qrels_importer(
                campaign=campaign,
                sources=[("q.txt", io.BytesIO(b"051 0 d1 1\n"))],
                options={"assessor": "  "},
                progress=lambda *a: None,
                user=None,
            )
        assert problem_texts(error) == [
            "q.txt: Name the source of these judgments (e.g. NIST-round1)."
        ]


class TestConflicts:
    TEXT = "051 0 d1 1\n051 0 d2 0\n051 0 d1 2\n052 0 d3 0\n051 0 d2 1\n051 0 d1 0\n"

    def test_conflicting_duplicates_are_refused_by_default_every_one_listed(
        self, campaign, topics, tmp_path
    ):
        assert refused(campaign, tmp_path, self.TEXT) == [
            "qrels.txt line 3: topic '051' document 'd1': label 2 conflicts with label 1 at line 1",
            "qrels.txt line 5: topic '051' document 'd2': label 1 conflicts with label 0 at line 2",
            "qrels.txt line 6: topic '051' document 'd1': label 0 conflicts with label 1 at line 1",
        ]

    @pytest.mark.parametrize(
        ("policy", "d1", "d2"), [("max", 2, 1), ("min", 0, 0), ("first", 1, 0)]
    )
    def test_or_resolved_by_the_chosen_policy(self, campaign, topics, tmp_path, policy, d1, d2):
        summary = qrels(campaign, tmp_path, self.TEXT, on_conflict=policy)
        assert judgments() == [("051", "d1", d1), ("051", "d2", d2), ("052", "d3", 0)]
        assert len(summary.warnings) == 3
        assert summary.warnings[0].startswith(
            "line 3: topic '051' document 'd1' label 2 conflicts with label 1 at line 1; kept"
        )
        assert Assessor.objects.get(name="NIST").details["imports"][0]["policy"] == policy


class TestRefused:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "051 0 d1 1\n051 0 d2 one\n051 0 d3 1.5\n",
                [
                    "qrels.txt line 2: label 'one' is not an integer",
                    "qrels.txt line 3: label '1.5' is not an integer",
                ],
            ),
            (
                "051 0 d1 1\n051 d2 1\n",
                [
                    "qrels.txt line 2: has 3 columns; a qrels line has 4: topic iteration docid "
                    "label (is the iteration column missing?)"
                ],
            ),
            (
                b"051 0 d1 1\n051 0 caf\xe9 1\n",
                [
                    "qrels.txt line 2: is not valid UTF-8 (byte 0xE9 at column 10); "
                    "pass --encoding if the file is not UTF-8"
                ],
            ),
            (b"051 0 d1 1\n051 0 d\x002 1\n", ["qrels.txt line 2: contains a NUL byte"]),
            (
                "051 0 d\u00a0\u200b1 1\n051 0 d\u200b2 1\n",
                [
                    "qrels.txt line 1: document id 'd\\xa0\\u200b1' contains a no-break space "
                    "(U+00A0): trec_eval splits columns on ASCII whitespace only and would keep it "
                    "inside the id, but most other tools split there; replace it (ids cannot "
                    "contain whitespace)",
                    "qrels.txt line 2: document id 'd\\u200b2' contains the control character "
                    "U+200B",
                ],
            ),
        ],
        ids=["non-integer-label", "columns", "invalid-utf8", "nul", "whitespace-in-id"],
    )
    def test_a_bad_line_imports_nothing(self, campaign, topics, tmp_path, text, expected):
        assert refused(campaign, tmp_path, text) == expected

    def test_unknown_topics_are_listed_with_their_lines(self, campaign, topics, tmp_path):
        text = "051 0 d1 1\n51 0 d1 1\n999 0 d1 1\n999 0 d2 0\n"
        assert refused(campaign, tmp_path, text) == [
            "qrels.txt line 2: topic '51' is not in the campaign; import the topics first",
            "qrels.txt lines 3, 4: topic '999' is not in the campaign; import the topics first",
        ]

    def test_labels_outside_the_rubric_are_refused_unless_negative(
        self, campaign, topics, tmp_path
    ):
        text = "051 0 d1 3\n051 0 d2 -1\n051 0 d3 7\n052 0 d4 2\n051 0 d5 3\n"
        where = (
            "add the label on the rubric page /c/robust04/rubric/, or create a campaign with the "
            "scale it needs (manage.py create_campaign SLUG --labels 0-4)"
        )
        assert refused(campaign, tmp_path, text) == [
            "qrels.txt lines 1, 5: label 3 is not on the campaign's scale (0, 1, 2; negative "
            f"labels are always accepted): {where}",
            "qrels.txt line 3: label 7 is not on the campaign's scale (0, 1, 2; negative labels "
            f"are always accepted): {where}",
        ]

    def test_a_persons_name_cannot_be_a_source(self, campaign, topics, tmp_path):
        from django.contrib.auth import get_user_model

        person = get_user_model().objects.create_user(username="NIST", password="x" * 20)
        add_member(campaign=campaign, user=person, role="assessor")
        Assessor.objects.for_user(campaign, person)
        assert refused(campaign, tmp_path, "051 0 d1 1\n") == [
            "qrels.txt: 'NIST' is a person in this campaign; choose another source name."
        ]
