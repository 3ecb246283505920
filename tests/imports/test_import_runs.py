"""Runs through ``import_runs``: several files at once, stored in trec_eval order whatever the
file's separators and rank column, and all files or none."""

from __future__ import annotations

import io

import pytest

from campaigns.textfiles import ParseError
from pooling import imports
from pooling.formats import pack_run, read_run_file
from pooling.imports import import_runs, runs_importer
from pooling.models import Run, RunTopic
from tests.factories import make_topics
from tests.imports import problem_texts, run_lines, stored_rows, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def topics(campaign):
    return make_topics(campaign, ["051", "052", "301"])


def stored(tag: str) -> dict[str, tuple[list[str], list[float], list[int]]]:
    """topic id -> (docids, scores, ranks) of the current run ``tag``, as stored."""
    run = Run.objects.current().get(tag=tag)
    return {
        row.topic.topic_id: (row.doc_list(), row.score_list(), row.rank_list())
        for row in RunTopic.objects.filter(run=run).select_related("topic")
    }


def refused(campaign, sources, **options) -> list[str]:
    """Import runs that must be refused; assert nothing was stored; return the problems."""
    before = stored_rows()
    with pytest.raises(ParseError) as error:
        import_runs(campaign=campaign, sources=sources, **options)
    assert stored_rows() == before
    return problem_texts(error)


class TestImport:
    def test_several_files_at_once_tabs_and_spaces(self, campaign, topics, tmp_path):
        bm25 = run_lines("bm25", {"051": [("0042", 9.5), ("d2", 7.25)], "052": [("d3", 1.0)]})
        dense = run_lines("dense", {"301": [("d9", 0.9), ("0042", 0.8)]}, separator="\t")
        summary = import_runs(
            campaign=campaign,
            sources=[
                ("bm25.txt", write(tmp_path, "bm25.txt", bm25)),
                ("dense.txt", write(tmp_path, "dense.txt", dense)),
            ],
        )
        assert summary.counts == {"runs": 2, "lines": 5, "run topics": 3}
        assert summary.message() == "Imported runs: 2 runs, 5 lines, 3 run topics."
        assert stored("bm25") == {
            "051": (["0042", "d2"], [9.5, 7.25], [1, 2]),
            "052": (["d3"], [1.0], [1]),
        }
        assert stored("dense") == {"301": (["d9", "0042"], [0.9, 0.8], [1, 2])}
        bm25_run = Run.objects.get(tag="bm25")
        assert (bm25_run.source_name, bm25_run.line_count, bm25_run.topic_count) == (
            "bm25.txt",
            3,
            2,
        )

    def test_runs_are_stored_in_trec_eval_order_whatever_the_rank_column_says(
        self, campaign, topics, tmp_path
    ):
        # 0-based ranks, written worst first (reversed), with tied scores in ascending docid
        # order and a run of spaces between columns.
        text = (
            "051  Q0  d1  0  1.5  reversed\n"
            "051  Q0  d2  1  2.5  reversed\n"
            "051  Q0  a7  2  2.5  reversed\n"
            "051  Q0  z0  3  2.5  reversed\n"
            "051  Q0  d5  4  9.0  reversed\n"
        )
        import_runs(campaign=campaign, sources=[("r", write(tmp_path, "r.txt", text))])
        docids, scores, ranks = stored("reversed")["051"]
        # Score descending, ties by document id descending; the file's ranks kept alongside.
        assert docids == ["d5", "z0", "d2", "a7", "d1"]
        assert scores == [9.0, 2.5, 2.5, 2.5, 1.5]
        assert ranks == [4, 3, 1, 2, 0]

    def test_ties_are_broken_by_document_id_descending(self, campaign, topics, tmp_path):
        ranking = {"052": [(f"doc{n:03d}", 1.0) for n in range(50)]}
        path = write(tmp_path, "ties.txt", run_lines("ties", ranking, separator="\t"))
        import_runs(campaign=campaign, sources=[("ties.txt", path)])
        docids, scores, ranks = stored("ties")["052"]
        assert docids == [f"doc{n:03d}" for n in reversed(range(50))]
        assert scores == [1.0] * 50
        assert ranks == list(reversed(range(1, 51)))

    def test_gzip_and_file_objects(self, campaign, topics, tmp_path):
        text = run_lines("gz", {"051": [("d1", 2.0), ("d2", 1.0)]})
        sources = [
            ("gz.txt.gz", write(tmp_path, "gz.txt.gz", text, gzipped=True)),
            ("upload.txt", io.BytesIO(run_lines("up", {"301": [("d1", 5e-3)]}).encode())),
        ]
        import_runs(campaign=campaign, sources=sources)
        assert stored("gz") == {"051": (["d1", "d2"], [2.0, 1.0], [1, 2])}
        assert stored("up") == {"301": (["d1"], [0.005], [1])}

    def test_a_file_with_several_tags_becomes_several_runs_when_asked(
        self, campaign, topics, tmp_path
    ):
        text = "".join(
            run_lines(tag, {"051": [("d1", 1.0)], "301": [("d2", 2.0)]})
            for tag in ("a", "b", "c", "d")
        )
        path = write(tmp_path, "all.txt", text)
        problems = refused(campaign, [("all.txt", path)])
        assert problems == [
            "all.txt line 3: has a second run tag, 'b' (line 1 has 'a'; the file holds runs a, b, "
            "c, d): import with --split-tags (on the upload page: “Split a file with several tags "
            "into several runs”) to get one run per tag"
        ]
        summary = import_runs(campaign=campaign, sources=[("all.txt", path)], split_tags=True)
        assert summary.counts == {"runs": 4, "lines": 8, "run topics": 8}
        assert sorted(Run.objects.values_list("tag", flat=True)) == ["a", "b", "c", "d"]
        for tag in "abcd":
            assert stored(tag) == {"051": (["d1"], [1.0], [1]), "301": (["d2"], [2.0], [1])}

    def test_the_browser_importer_passes_the_options(self, campaign, topics, organiser):
        sources = [("r.txt", io.BytesIO(run_lines("web", {"051": [("d1", 1.0)]}).encode()))]
        summary = runs_importer(
            campaign=campaign, sources=sources, options={}, progress=lambda *a: None, user=organiser
        )
        assert summary.counts["runs"] == 1
        assert Run.objects.get(tag="web").imported_by == organiser


class TestReplace:
    def test_an_imported_tag_is_refused_unless_replaced(self, campaign, topics, tmp_path):
        first = write(tmp_path, "v1.txt", run_lines("bm25", {"051": [("d1", 1.0)]}))
        import_runs(campaign=campaign, sources=[("v1.txt", first)])
        second = write(tmp_path, "v2.txt", run_lines("bm25", {"051": [("d9", 3.0)]}))
        assert refused(campaign, [("v2.txt", second)]) == [
            "v2.txt line 1: a run tagged 'bm25' is already imported; import with --replace (on "
            "the upload page: “Replace runs with the same tag”) to supersede it"
        ]
        assert stored("bm25") == {"051": (["d1"], [1.0], [1])}

    def test_replace_swaps_atomically_and_keeps_the_old_run(self, campaign, topics, tmp_path):
        old_path = write(tmp_path, "v1.txt", run_lines("bm25", {"051": [("d1", 1.0)]}))
        import_runs(campaign=campaign, sources=[("v1.txt", old_path)])
        old = Run.objects.get(tag="bm25")
        new_path = write(tmp_path, "v2.txt", run_lines("bm25", {"051": [("d9", 3.0)]}))
        summary = import_runs(campaign=campaign, sources=[("v2.txt", new_path)], replace=True)
        assert summary.counts == {"runs": 1, "lines": 1, "run topics": 1, "replaced": 1}
        old.refresh_from_db()
        assert old.superseded_at is not None
        assert old.topics.get().doc_list() == ["d1"]  # kept for the pools built from it
        assert stored("bm25") == {"051": (["d9"], [3.0], [1])}
        assert Run.objects.filter(tag="bm25").count() == 2

    def test_a_refused_replace_leaves_the_current_run_current(self, campaign, topics, tmp_path):
        import_runs(
            campaign=campaign,
            sources=[
                ("v1.txt", write(tmp_path, "v1.txt", run_lines("bm25", {"051": [("d1", 1)]})))
            ],
        )
        good = write(tmp_path, "v2.txt", run_lines("bm25", {"051": [("d9", 3.0)]}))
        bad = write(tmp_path, "bad.txt", "051 Q0 d1 1 nan other\n")
        problems = refused(campaign, [("v2.txt", good), ("bad.txt", bad)], replace=True)
        assert problems == ["bad.txt line 1: score 'nan' is not a number (NaN)"]
        assert Run.objects.current().get(tag="bm25").topics.get().doc_list() == ["d1"]


class TestRefused:
    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (
                "051 Q0 d1 1 2.0 r\n051 Q0 d2 2 1.0\n051 Q0 d3 3 0.5 r extra\n",
                [
                    "r.txt line 2: has 5 columns; a run line has 6: topic Q0 docid rank score tag",
                    "r.txt line 3: has 7 columns; a run line has 6: topic Q0 docid rank score tag",
                ],
            ),
            (
                "051 Q0 d1 1 NaN r\n051 Q0 d2 2 inf r\n"
                "051 Q0 d3 3 1e309 r\n051 Q0 d4 4 -Infinity r\n",
                [
                    "r.txt line 1: score 'NaN' is not a number (NaN)",
                    "r.txt line 2: score 'inf' is not a finite number",
                    "r.txt line 3: score '1e309' is not a finite number",
                    "r.txt line 4: score '-Infinity' is not a finite number",
                ],
            ),
            (
                "051 Q0 d1 1 2.0 r\n051 Q0 d2 2 1.0 r\n051 Q0 d1 3 0.5 r\n",
                [
                    "r.txt line 3: document 'd1' appears twice in topic '051' of run 'r' "
                    "(first at line 1)"
                ],
            ),
            (
                b"051 Q0 d1 1 2.0 r\n051 Q0 caf\xe9 2 1.0 r\n",
                [
                    "r.txt line 2: is not valid UTF-8 (byte 0xE9 at column 11); "
                    "pass --encoding if the file is not UTF-8"
                ],
            ),
            (b"051 Q0 d1 1 2.0 r\n051 Q0 d\x002 2 1.0 r\n", ["r.txt line 2: contains a NUL byte"]),
            (
                "051 Q0 d1 1 2.0 r\n051 Q0 d\u200b2 2 1.0 r\n",
                ["r.txt line 2: document id 'd\\u200b2' contains the control character U+200B"],
            ),
            (
                "051 Q0 d1 one 2.0 r\n",
                ["r.txt line 1: rank 'one' is not an integer"],
            ),
        ],
        ids=[
            "columns",
            "not-finite",
            "duplicate-document",
            "invalid-utf8",
            "nul",
            "invisible-id",
            "rank",
        ],
    )
    def test_a_bad_line_imports_nothing(self, campaign, topics, tmp_path, content, expected):
        assert refused(campaign, [("r.txt", write(tmp_path, "r.txt", content))]) == expected

    def test_unknown_topics_are_listed_with_the_line_each_starts_on(
        self, campaign, topics, tmp_path
    ):
        text = run_lines("r", {"051": [("d1", 1.0)], "51": [("d1", 1.0)], "999": [("d1", 1.0)]})
        assert refused(campaign, [("r.txt", write(tmp_path, "r.txt", text))]) == [
            "r.txt line 2: topic '51' (of run 'r') is not in the campaign; import the topics first",
            "r.txt line 3: topic '999' (of run 'r') is not in the campaign; import the topics "
            "first",
        ]

    def test_a_bad_second_file_keeps_the_good_first_one_out_too(self, campaign, topics, tmp_path):
        good = write(tmp_path, "good.txt", run_lines("good", {"051": [("d1", 1.0)]}))
        bad = write(tmp_path, "bad.txt", "051 Q0 d1 1 2.0 bad\n052 Q0 d2 x 1.0 bad\n")
        later = write(tmp_path, "later.txt", run_lines("later", {"052": [("d1", 1.0)]}))
        also_bad = write(tmp_path, "also.txt", run_lines("good", {"301": [("d1", 1.0)]}))
        problems = refused(
            campaign,
            [("good.txt", good), ("bad.txt", bad), ("later.txt", later), ("also.txt", also_bad)],
        )
        # Every file is checked, so every problem is reported at once.
        assert problems == [
            "bad.txt line 2: rank 'x' is not an integer",
            "also.txt line 1: run tag 'good' is also the tag of good.txt (line 1); a tag names "
            "one run",
        ]
        assert not Run.objects.exists()
        assert not RunTopic.objects.exists()

    def test_one_tag_in_two_files_is_refused(self, campaign, topics, tmp_path):
        a = write(tmp_path, "a.txt", run_lines("same", {"051": [("d1", 1.0)]}))
        b = write(tmp_path, "b.txt", run_lines("same", {"052": [("d1", 1.0)]}))
        assert refused(campaign, [("a.txt", a), ("b.txt", b)]) == [
            "b.txt line 1: run tag 'same' is also the tag of a.txt (line 1); a tag names one run"
        ]

    def test_an_empty_file_is_refused(self, campaign, topics, tmp_path):
        assert refused(campaign, [("e.txt", write(tmp_path, "e.txt", "\n# comment\n"))]) == [
            "e.txt: has no run lines (topic Q0 docid rank score tag)"
        ]


@pytest.fixture
def two_processes(monkeypatch) -> list:
    """Parse in worker processes whatever the size of the files and the machine; the list
    records each pool started."""
    started = []
    start_pool = imports._start_pool

    def recorded():
        pool = start_pool()
        started.append(pool)
        return pool

    monkeypatch.setattr(imports, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(imports, "_cpus", lambda: 2)
    monkeypatch.setattr(imports, "_start_pool", recorded)
    return started


class TestTwoProcesses:
    def rankings(self, count: int) -> dict[str, dict[str, list[tuple[str, float]]]]:
        return {
            f"run{n}": {
                topic: [(f"d{(n * 7 + i) % 40:02d}", float((i * 13 + n) % 5)) for i in range(30)]
                for topic in ("051", "052", "301")
            }
            for n in range(count)
        }

    def test_worker_processes_store_what_this_process_stores(
        self, campaign, other_campaign, tmp_path, two_processes, monkeypatch
    ):
        make_topics(campaign, ["051", "052", "301"])
        make_topics(other_campaign, ["051", "052", "301"])
        paths = [
            (f"{tag}.txt", write(tmp_path, f"{tag}.txt", run_lines(tag, ranking, first=0)))
            for tag, ranking in self.rankings(5).items()
        ]
        paths.append(("up.txt", io.BytesIO(run_lines("up", {"301": [("d1", 1.0)]}).encode())))
        summary = import_runs(campaign=campaign, sources=paths)
        assert len(two_processes) == 1
        if two_processes[0] is None:
            pytest.skip("processes cannot be started here")
        assert summary.counts == {"runs": 6, "lines": 451, "run topics": 16}
        in_parallel = {tag: stored(tag) for tag in Run.objects.values_list("tag", flat=True)}
        Run.objects.all().delete()
        paths[-1][1].seek(0)
        monkeypatch.setattr(imports, "PARALLEL_MIN_BYTES", 1 << 60)
        import_runs(campaign=other_campaign, sources=paths)
        assert len(two_processes) == 1
        in_process = {tag: stored(tag) for tag in Run.objects.values_list("tag", flat=True)}
        assert in_parallel == in_process
        docids, scores, _ranks = in_parallel["run1"]["052"]
        assert list(zip(scores, docids, strict=True)) == sorted(
            zip(scores, docids, strict=True), reverse=True
        )

    def test_a_file_refused_in_a_worker_still_imports_nothing(
        self, campaign, topics, tmp_path, two_processes
    ):
        paths = [
            (f"{tag}.txt", write(tmp_path, f"{tag}.txt", run_lines(tag, ranking)))
            for tag, ranking in self.rankings(4).items()
        ]
        paths.insert(2, ("bad.txt", write(tmp_path, "bad.txt", b"051 Q0 d1 1 1.0 bad\n051 x\n")))
        paths.append(("unknown.txt", write(tmp_path, "u.txt", run_lines("u", {"999": [("d", 1)]}))))
        problems = refused(campaign, paths)
        if two_processes[0] is None:
            pytest.skip("processes cannot be started here")
        assert problems == [
            "bad.txt line 2: has 2 columns; a run line has 6: topic Q0 docid rank score tag",
            "unknown.txt line 1: topic '999' (of run 'u') is not in the campaign; import the "
            "topics first",
        ]


def test_packing_is_the_layout_of_stored_run_topics(tmp_path):
    path = write(tmp_path, "r.txt", "1 Q0 b 0 2.5 r\n1 Q0 a 1 2.5 r\n1 Q0 c 2 -1e-300 r\n")
    (parsed,) = read_run_file(path)
    ranked = parsed.topics["1"]
    expected = (
        "1",
        "\n".join(ranked.docids),
        RunTopic.pack_scores(ranked.scores),
        RunTopic.pack_ranks(ranked.ranks),
        3,
    )
    (packed,) = pack_run(parsed).topics
    assert tuple(packed) == expected
    assert packed.docids == "b\na\nc"


def test_ids_keep_their_leading_zeros_through_import(campaign, tmp_path):
    make_topics(campaign, ["051", "51"])
    text = run_lines("r", {"051": [("0042", 2.0), ("42", 1.0)], "51": [("042", 1.0)]})
    import_runs(campaign=campaign, sources=[("r.txt", write(tmp_path, "r.txt", text))])
    assert stored("r") == {
        "051": (["0042", "42"], [2.0, 1.0], [1, 2]),
        "51": (["042"], [1.0], [1]),
    }
