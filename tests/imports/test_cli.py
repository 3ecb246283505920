"""The four import commands: each kind imports through ``call_command``, a refused file raises
CommandError listing every problem, and a real ``manage.py`` process exits non-zero with the
problems on stderr."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from campaigns.models import Document, Judgment, Topic
from pooling.models import Run
from tests.conftest import worker_env
from tests.factories import make_pool, make_run, make_topics
from tests.imports import run_lines, stored_rows, write

pytestmark = pytest.mark.django_db

SGML = """\
<top>
<num> Number: 051
<title> Airbus Subsidies
<desc> Description:
Government assistance to Airbus.
<narr> Narrative:
Must cite assistance.
</top>
"""

CRAN_QRY = ".I 001\n.W\nfirst query .\n.I 004\n.W\nsecond query .\n"


def command(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def refused(*args: str) -> str:
    before = stored_rows()
    with pytest.raises(CommandError) as error:
        command(*args)
    assert stored_rows() == before
    return str(error.value)


class TestImportTopics:
    @pytest.mark.parametrize(
        ("name", "text", "ids"),
        [
            ("topics.sgml", SGML, ["051"]),
            ("topics.tsv", "051\tAirbus\n052\tBoeing\n", ["051", "052"]),
            ("topics.jsonl", '{"id": "051", "title": "Airbus"}\n', ["051"]),
            ("cran.qry", CRAN_QRY, ["001", "004"]),
        ],
        ids=["trec", "tsv", "jsonl", "smart"],
    )
    def test_each_format(self, campaign, tmp_path, name, text, ids):
        out, _ = command("import_topics", campaign.slug, str(write(tmp_path, name, text)))
        assert out == f"Imported topics: {len(ids)} new topics, 0 updated, 0 unchanged.\n"
        assert list(Topic.objects.values_list("topic_id", flat=True)) == ids

    def test_smart_with_positional_ids_keeps_the_files_own_ids_beside_them(
        self, campaign, tmp_path, client, organiser
    ):
        path = write(tmp_path, "cran.qry", CRAN_QRY)
        command("import_topics", campaign.slug, str(path), "--positional-ids")
        assert list(Topic.objects.values_list("topic_id", "original_id", "title")) == [
            ("1", "001", "first query ."),
            ("2", "004", "second query ."),
        ]
        client.force_login(organiser)
        page = client.get(f"/c/{campaign.slug}/").content.decode()
        assert "(file: 004)" in page

    def test_an_empty_trailing_smart_record_is_counted_in_the_summary(self, campaign, tmp_path):
        path = write(tmp_path, "cran.qry", CRAN_QRY + ".I\r\n")
        out, _ = command("import_topics", campaign.slug, str(path))
        assert out == (
            "Imported topics: 2 new topics, 0 updated, 0 unchanged. Skipped 1 empty record "
            "(a .I with nothing after it): line 7.\n"
        )

    def test_an_empty_file_is_called_empty(self, campaign, tmp_path):
        for kind in ("import_topics", "import_documents"):
            message = refused(kind, campaign.slug, str(write(tmp_path, "empty.txt", "")))
            assert message.endswith("empty.txt: is empty")

    def test_a_bad_file_lists_its_problems(self, campaign, tmp_path):
        path = write(tmp_path, "t.tsv", "1\tOne\n2 x\tTwo\n3\n")
        message = refused("import_topics", campaign.slug, str(path), "--format", "tsv")
        assert message == (
            "Nothing was imported: 2 problems.\n"
            f"{path} line 2: topic id '2 x' contains whitespace\n"
            f"{path} line 3: has 1 tab-separated column; expected 2 (id, title), "
            "3 (id, title, description) or 4 (id, title, description, narrative)"
        )

    def test_an_unknown_campaign(self, tmp_path, db):
        path = write(tmp_path, "t.tsv", "1\tOne\n")
        assert refused("import_topics", "nope", str(path)) == "No campaign with slug 'nope'."


class TestImportDocuments:
    @pytest.mark.parametrize(
        ("name", "text", "fmt"),
        [
            ("d.trec", "<DOC>\n<DOCNO>0042</DOCNO>\n<TEXT>\nBody.\n</TEXT>\n</DOC>\n", "trec"),
            ("d.jsonl", '{"id": "0042", "text": "Body."}\n', "jsonl"),
            ("d.tsv", "0042\tBody.\n", "tsv"),
            ("d.all", ".I 0042\n.W\nBody.\n", "smart"),
        ],
        ids=["trec", "jsonl", "tsv", "smart"],
    )
    def test_each_format(self, campaign, tmp_path, name, text, fmt):
        out, _ = command(
            "import_documents", campaign.slug, str(write(tmp_path, name, text)), "--format", fmt
        )
        assert out == "Imported documents: 1 new documents, 0 updated, 0 unchanged.\n"
        assert list(Document.objects.values_list("doc_id", "body")) == [("0042", "Body.")]

    def test_smart_documents_count_an_empty_trailing_record_and_a_repeat_as_unchanged(
        self, campaign, tmp_path
    ):
        path = write(tmp_path, "cran.all", ".I 1\n.T\nTitle\n.W\nBody.\n.I\n")
        out, _ = command("import_documents", campaign.slug, str(path))
        assert out == (
            "Imported documents: 1 new documents, 0 updated, 0 unchanged. Skipped 1 empty record "
            "(a .I with nothing after it): line 6.\n"
        )
        out, _ = command("import_documents", campaign.slug, str(path))
        assert out.startswith("Imported documents: 0 new documents, 0 updated, 1 unchanged.")

    def test_gzip(self, campaign, tmp_path):
        path = write(tmp_path, "d.jsonl.gz", '{"id": "d1", "text": "<b>x</b>"}\n', gzipped=True)
        command("import_documents", campaign.slug, str(path))
        assert Document.objects.get().body_html == "<b>x</b>"

    def test_only_pooled(self, campaign, tmp_path):
        make_topics(campaign, ["1"])
        make_run(campaign, "r", {"1": [("d1", 2.0), ("d2", 1.0)]})
        path = write(tmp_path, "d.tsv", "d1\tone\nd2\ttwo\nd3\tthree\n")
        assert refused("import_documents", campaign.slug, str(path), "--only-pooled") == (
            "The campaign has no pools yet, so --only-pooled would keep nothing."
        )
        make_pool(campaign, depth=1)
        out, _ = command("import_documents", campaign.slug, str(path), "--only-pooled")
        assert out == (
            "Imported documents: 1 new documents, 0 updated, 0 unchanged, 2 skipped (not pooled).\n"
        )
        assert list(Document.objects.values_list("doc_id", flat=True)) == ["d1"]

    def test_a_bad_file_lists_its_problems(self, campaign, tmp_path):
        path = write(tmp_path, "d.tsv", b"d1\tone\nd2\ttw\xf6\n")
        assert refused("import_documents", campaign.slug, str(path)) == (
            "Nothing was imported: 1 problem.\n"
            f"{path} line 2: is not valid UTF-8 (byte 0xF6 at column 6); "
            "pass --encoding if the file is not UTF-8"
        )


class TestImportRuns:
    def test_several_files_and_replace(self, campaign, tmp_path):
        make_topics(campaign, ["051", "052"])
        a = write(tmp_path, "a.txt", run_lines("a", {"051": [("d1", 1.0)], "052": [("d2", 1.0)]}))
        b = write(tmp_path, "b.txt", run_lines("b", {"051": [("d1", 1.0)]}, separator="\t"))
        out, _ = command("import_runs", campaign.slug, str(a), str(b))
        assert out == "Imported runs: 2 runs, 3 lines, 3 run topics.\n"
        message = refused("import_runs", campaign.slug, str(b))
        assert message == (
            "Nothing was imported: 1 problem.\n"
            f"{b} line 1: a run tagged 'b' is already imported; import with --replace (on the "
            "upload page: “Replace runs with the same tag”) to supersede it"
        )
        out, _ = command("import_runs", campaign.slug, str(b), "--replace")
        assert out == "Imported runs: 1 runs, 1 lines, 1 run topics, 1 replaced.\n"
        assert Run.objects.current().count() == 2
        assert Run.objects.count() == 3

    def test_split_tags(self, campaign, tmp_path):
        make_topics(campaign, ["1"])
        path = write(
            tmp_path,
            "two.txt",
            run_lines("x", {"1": [("d", 1)]}) + run_lines("y", {"1": [("d", 1)]}),
        )
        command("import_runs", campaign.slug, str(path), "--split-tags")
        assert sorted(Run.objects.values_list("tag", flat=True)) == ["x", "y"]

    def test_a_bad_second_file_imports_no_file(self, campaign, tmp_path):
        make_topics(campaign, ["1"])
        good = write(tmp_path, "good.txt", run_lines("good", {"1": [("d1", 1.0)]}))
        bad = write(tmp_path, "bad.txt", "1 Q0 d1 1 inf bad\n2 Q0 d1 1 1.0 bad\n")
        assert refused("import_runs", campaign.slug, str(good), str(bad)) == (
            f"Nothing was imported: 1 problem.\n{bad} line 1: score 'inf' is not a finite number"
        )
        assert not Run.objects.exists()


class TestImportQrels:
    def test_import_with_a_policy_prints_its_warnings(self, campaign, tmp_path):
        make_topics(campaign, ["051"])
        path = write(tmp_path, "q.txt", "051 0.5 0042 1\n051 0 0042 2\n051 0 d2 -1\n")
        message = refused("import_qrels", campaign.slug, str(path), "--assessor", "NIST")
        assert message == (
            "Nothing was imported: 1 problem.\n"
            f"{path} line 2: topic '051' document '0042': label 2 conflicts with label 1 at "
            "line 1"
        )
        out, err = command(
            "import_qrels", campaign.slug, str(path), "--assessor", "NIST", "--on-conflict", "max"
        )
        assert out == "Imported qrels: 2 new judgments, 0 revised, 0 unchanged.\n"
        assert err == (
            "warning: line 2: topic '051' document '0042' label 2 conflicts with label 1 at "
            "line 1; kept 2 (policy max)\n"
        )
        assert sorted(Judgment.objects.values_list("doc_id", "label")) == [("0042", 2), ("d2", -1)]

    def test_the_source_name_is_required(self, campaign, tmp_path):
        path = write(tmp_path, "q.txt", "051 0 d1 1\n")
        with pytest.raises(CommandError, match="the following arguments are required: --assessor"):
            command("import_qrels", campaign.slug, str(path))


# --- A real process -------------------------------------------------------------------------------


@pytest.fixture
def process_env(tmp_path) -> dict[str, str]:
    """Environment for a ``manage.py`` process that sees this test's committed data: the test
    database on PostgreSQL, a copy of the in-memory one on SQLite."""
    if connection.vendor != "sqlite":
        return worker_env()
    connection.ensure_connection()
    copy = tmp_path / "copy.sqlite3"
    with sqlite3.connect(copy) as target:
        connection.connection.backup(target)
    target.close()
    return {**os.environ, "DATABASE_URL": f"sqlite:///{copy}", "DEBUG": "1"}


BAD_FILES = {
    "import_topics": ("t.tsv", "1\tOne\n1\tAgain\n", []),
    "import_documents": ("d.jsonl", '{"id": "d1", "text": "x"}\n{"id": "d 2", "text": "y"}\n', []),
    "import_runs": ("r.txt", "1 Q0 d1 1 NaN r\n1 Q0 d2 2 0.5 r\n1 Q0 d2 3 0.4 r\n", []),
    "import_qrels": ("q.txt", "1 0 d1 yes\n1 0 d2 1\n2 0 d3 1\n", ["--assessor", "NIST"]),
}
EXPECTED = {
    "import_topics": ["line 2: topic id '1' repeats the topic of line 1"],
    "import_documents": ["line 2: document id 'd 2' contains whitespace"],
    "import_runs": [
        "line 1: score 'NaN' is not a number (NaN)",
        "line 3: document 'd2' appears twice in topic '1' of run 'r' (first at line 2)",
    ],
    "import_qrels": ["line 1: label 'yes' is not an integer"],
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_refused_file_exits_non_zero_with_the_problems_on_stderr(
    campaign, tmp_path, process_env, name
):
    make_topics(campaign, ["1"])
    file_name, text, options = BAD_FILES[name]
    path = write(tmp_path, file_name, text)
    before = stored_rows()
    result = subprocess.run(
        [sys.executable, "manage.py", name, campaign.slug, str(path), *options],
        cwd=settings.BASE_DIR,
        env=process_env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    count = len(EXPECTED[name])
    expected = [
        f"CommandError: Nothing was imported: {count} problem{'s' if count > 1 else ''}.",
        *(f"{path} {problem}" for problem in EXPECTED[name]),
    ]
    assert result.stderr.splitlines() == expected
    assert result.stdout == ""
    assert stored_rows() == before
