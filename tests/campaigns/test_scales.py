"""Scales beyond the presets: ``create_campaign --labels`` (TREC RAG's 0-4, Cranfield's codes
1-4), and qrels with labels off the scale refused at their lines with where to change it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from campaigns.models import Campaign
from campaigns.scales import parse_labels
from campaigns.textfiles import ParseError
from qrels.imports import import_qrels
from tests.factories import make_topics

pytestmark = pytest.mark.django_db


def create(*args: str) -> tuple[Campaign, str]:
    out = StringIO()
    call_command("create_campaign", "scaled", "--title", "Scaled", *args, stdout=out)
    return Campaign.objects.get(slug="scaled"), out.getvalue()


def labels_of(campaign: Campaign) -> list[tuple[int, str, str]]:
    return [
        (label.value, label.name, label.key) for label in campaign.current_rubric().labels.all()
    ]


def test_a_range_gives_trec_rags_five_levels_relevant_from_1():
    campaign, out = create("--labels", "0-4")
    assert labels_of(campaign) == [(v, f"Label {v}", str(v)) for v in range(5)]
    assert campaign.relevance_threshold == 1
    assert out == "Created campaign scaled (labels 0, 1, 2, 3, 4, relevant from 1).\n"
    assert campaign.current_rubric().note == "--labels 0-4"


def test_a_list_gives_cranfields_codes_with_a_threshold_of_choice():
    campaign, _ = create("--labels", "1,2,3,4", "--threshold", "1")
    assert [value for value, _, _ in labels_of(campaign)] == [1, 2, 3, 4]
    assert campaign.relevance_threshold == 1


def test_labels_can_be_named_and_go_past_nine_with_letter_keys():
    campaign, _ = create("--labels", "0=Not relevant,1=Relevant,2-11")
    labels = labels_of(campaign)
    assert labels[:2] == [(0, "Not relevant", "0"), (1, "Relevant", "1")]
    assert labels[-2:] == [(10, "Label 10", "a"), (11, "Label 11", "b")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--labels", "0-x"], "'0-x' is not a label value or range"),
        (["--labels", "4-1"], "'4-1' is not a label value or range"),
        (["--labels=-1,0,1"], "labels are 0 or more"),
        (["--labels", "3"], "at least two labels"),
        (["--labels", "0-20"], "at most 12 labels"),
        (["--labels", "0-2,2"], "label 2 is given twice"),
        (["--labels", "0-3", "--threshold", "7"], "--threshold 7 is not one of the labels"),
    ],
)
def test_a_scale_that_cannot_be_is_refused_with_a_sentence(args, message):
    with pytest.raises(CommandError, match=message):
        create(*args)
    assert not Campaign.objects.filter(slug="scaled").exists()


def test_a_preset_and_labels_are_not_both_taken():
    with pytest.raises(CommandError):
        create("--scale", "binary", "--labels", "0-4")


def test_parse_labels_keeps_values_in_order():
    assert [spec.value for spec in parse_labels("3,0-1")] == [0, 1, 3]


def test_an_off_scale_label_is_refused_at_its_lines_saying_where_to_change_the_scale(tmp_path):
    campaign, _ = create("--labels", "0-3")
    make_topics(campaign, ["1"])
    path = tmp_path / "rag.qrels"
    path.write_text("1 0 a 4\n1 0 b 2\n1 0 c 4\n1 0 d -1\n")
    with pytest.raises(ParseError) as error:
        import_qrels(campaign=campaign, source=path, name="rag.qrels", assessor="NIST")
    assert [str(problem) for problem in error.value.problems] == [
        "rag.qrels lines 1, 3: label 4 is not on the campaign's scale (0, 1, 2, 3; negative "
        "labels are always accepted): add the label on the rubric page /c/scaled/rubric/, or "
        "create a campaign with the scale it needs (manage.py create_campaign SLUG --labels 0-4)"
    ]
    call_command("create_campaign", "rag", "--title", "RAG", "--labels", "0-4", stdout=StringIO())
    rag = Campaign.objects.get(slug="rag")
    make_topics(rag, ["1"])
    summary = import_qrels(campaign=rag, source=path, name="rag.qrels", assessor="NIST")
    assert summary.counts["new judgments"] == 4
