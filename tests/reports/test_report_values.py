"""The reports as values (qrels.reports): a report a job stored on its row reads back equal to
the one computed while a page loads, so both show and download the same figures."""

from __future__ import annotations

import json

import pytest

from qrels.reports import run_report_from_dict
from qrels.runscores import compute_report, run_report
from tests.reports.test_evaluation_pages import scored  # noqa: F401

pytestmark = pytest.mark.django_db

OPTIONS = {
    "evaluation": {"source": {"policy": "max"}},
    "stability": {
        "first": {"kind": "assessor", "assessor": "ann"},
        "second": {"kind": "assessor", "assessor": "ben"},
        "measure": "P@10",
        "common_topics": False,
    },
    "pool_bias": {"pool": 1, "measure": "AP"},
}


@pytest.mark.parametrize("kind", sorted(OPTIONS))
def test_a_stored_report_reads_back_equal(campaign, scored, kind):  # noqa: F811
    options = {**OPTIONS[kind], "pool": scored.version} if kind == "pool_bias" else OPTIONS[kind]
    computed = compute_report(campaign=campaign, report=kind, options=options)
    stored = json.loads(json.dumps(run_report(campaign=campaign, report=kind, options=options)))
    read = run_report_from_dict(stored)
    assert type(read) is type(computed)
    assert read.kind == stored["report"] == kind
    # Equal but for when it was computed and how long it took.
    assert read.to_csv() == computed.to_csv()
    fresh = json.loads(computed.to_json())
    again = json.loads(read.to_json())
    for data in (fresh, again):
        data.pop("computed_at"), data.pop("seconds")
    assert again == fresh
    assert read.runs == computed.runs


def test_a_run_left_out_of_leave_one_out_has_no_such_keys(campaign, scored):  # noqa: F811
    report = compute_report(
        campaign=campaign, report="pool_bias", options={"pool": scored.version, "measure": "AP"}
    )
    rows = {row["run"]: row for row in json.loads(report.to_json())["runs"]}
    assert "drop" not in rows["gamma-late"]
    assert rows["SECRET-RUN-alpha"]["rank_loo"] == 1
