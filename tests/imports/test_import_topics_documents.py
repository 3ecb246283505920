"""Topics and documents through ``import_topics`` and ``import_documents``: every format, ids
kept exactly, HTML kept raw and shown sanitised, and a bad file imports nothing at all."""

from __future__ import annotations

import io
import json

import pytest

from campaigns.imports import DOCUMENT_BATCH, import_documents, import_topics
from campaigns.models import Document, Topic
from campaigns.textfiles import ParseError
from pooling.imports import documents_importer
from tests.factories import make_pool, make_run, make_topics
from tests.imports import problem_texts, stored_rows, write

pytestmark = pytest.mark.django_db

ROBUST = """\
<top>
<num> Number: 051
<title> Airbus Subsidies

<desc> Description:
Document will discuss government assistance to Airbus Industrie.

<narr> Narrative:
To be relevant, a document must cite or discuss assistance to Airbus.
</top>

<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>
"""

CRAN_QRY = """\
.I 001
.W
what similarity laws must be obeyed when constructing aeroelastic models
of heated high speed aircraft .
.I 002
.W
what are the structural and aeroelastic problems associated with flight
of high speed aircraft .
.I 004
.W
what problems of heat conduction in composite slabs have been solved so
far .
"""

TREC_DOCS = """\
<DOC>
<DOCNO> 0042 </DOCNO>
<HEADLINE>Airbus gets &amp; keeps its subsidies</HEADLINE>
<TEXT>
<p>The <b>subsidies</b> continue.</p><script>alert("x")</script>
<a href="https://example.org/run/SECRET">source</a>
</TEXT>
</DOC>
<DOC>
<DOCNO>FT911-3</DOCNO>
<TEXT>
Plain text about cartels & crime.

Second paragraph.
</TEXT>
</DOC>
"""

CRAN_DOCS = """\
.I 1
.T
experimental investigation of the aerodynamics of a
wing in a slipstream .
.A
brenckman,m.
.B
j. ae. scs. 25, 1958, 324.
.W
experimental investigation of the aerodynamics of a
wing in a slipstream .
.I 2
.T
simple shear flow past a flat plate
.A
ting-yili
.B
department of aeronautical engineering.
.W
simple shear flow past a flat plate in an incompressible fluid .
"""


def topics_of(campaign) -> list[tuple[str, str, str, str, int]]:
    return list(
        campaign.topics.order_by("position").values_list(
            "topic_id", "title", "description", "narrative", "position"
        )
    )


def refused(kind, campaign, tmp_path, name: str, content: str | bytes, **options) -> list[str]:
    """Import a bad file; assert it stored nothing; return the problems as the user reads them."""
    before = stored_rows()
    path = write(tmp_path, name, content)
    importer = import_topics if kind == "topics" else import_documents
    with pytest.raises(ParseError) as error:
        importer(campaign=campaign, source=path, name=name, **options)
    assert stored_rows() == before
    return problem_texts(error)


class TestTopics:
    def test_trec_sgml_topics_keep_their_ids_and_fields(self, campaign, tmp_path):
        summary = import_topics(
            campaign=campaign, source=write(tmp_path, "topics.txt", ROBUST), name="topics.txt"
        )
        assert summary.counts == {"new topics": 2, "updated": 0, "unchanged": 0}
        assert summary.message() == "Imported topics: 2 new topics, 0 updated, 0 unchanged."
        assert topics_of(campaign) == [
            (
                "051",
                "Airbus Subsidies",
                "Document will discuss government assistance to Airbus Industrie.",
                "To be relevant, a document must cite or discuss assistance to Airbus.",
                1,
            ),
            (
                "301",
                "International Organized Crime",
                "Identify organizations that participate in international criminal activity.",
                "A relevant document must as a minimum identify the organization.",
                2,
            ),
        ]

    def test_tsv_topics(self, campaign, tmp_path):
        text = "051\tAirbus Subsidies\tgovernment assistance\n0301\tOrganized crime\n"
        import_topics(campaign=campaign, source=write(tmp_path, "t.tsv", text), name="t.tsv")
        assert topics_of(campaign) == [
            ("051", "Airbus Subsidies", "government assistance", "", 1),
            ("0301", "Organized crime", "", "", 2),
        ]

    def test_jsonl_topics(self, campaign, tmp_path):
        lines = [
            {"id": "051", "title": "Airbus", "description": "d", "narrative": "n"},
            {"id": 7, "title": "Seven"},
        ]
        text = "\n".join(json.dumps(line) for line in lines)
        import_topics(campaign=campaign, source=write(tmp_path, "t.jsonl", text), name="t.jsonl")
        assert topics_of(campaign) == [("051", "Airbus", "d", "n", 1), ("7", "Seven", "", "", 2)]

    def test_smart_topics_keep_their_dotI_ids_or_take_their_positions(
        self, campaign, other_campaign, tmp_path
    ):
        path = write(tmp_path, "cran.qry", CRAN_QRY)
        import_topics(campaign=campaign, source=path, name="cran.qry")
        assert [t[0] for t in topics_of(campaign)] == ["001", "002", "004"]
        import_topics(campaign=other_campaign, source=path, name="cran.qry", positional_ids=True)
        assert [t[:2] for t in topics_of(other_campaign)] == [
            (
                "1",
                "what similarity laws must be obeyed when constructing aeroelastic models "
                "of heated high speed aircraft .",
            ),
            (
                "2",
                "what are the structural and aeroelastic problems associated with flight "
                "of high speed aircraft .",
            ),
            (
                "3",
                "what problems of heat conduction in composite slabs have been solved so far .",
            ),
        ]

    def test_a_second_import_updates_changed_topics_and_appends_new_ones(self, campaign, tmp_path):
        import_topics(
            campaign=campaign, source=write(tmp_path, "a.tsv", "1\tOne\n2\tTwo\n"), name="a"
        )
        summary = import_topics(
            campaign=campaign,
            source=write(tmp_path, "b.tsv", "2\tTwo, revised\n1\tOne\n3\tThree\n"),
            name="b",
        )
        assert summary.counts == {"new topics": 1, "updated": 1, "unchanged": 1}
        assert [(*t[:2], t[4]) for t in topics_of(campaign)] == [
            ("1", "One", 1),
            ("2", "Two, revised", 2),
            ("3", "Three", 3),
        ]

    def test_a_file_object_and_gzip_are_read_like_a_path(self, campaign):
        import gzip

        data = io.BytesIO(gzip.compress(b"\xef\xbb\xbf051\tAirbus\r\n052\tBoeing"))
        import_topics(campaign=campaign, source=data, name="topics.tsv.gz")
        assert [t[:2] for t in topics_of(campaign)] == [("051", "Airbus"), ("052", "Boeing")]

    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (
                "1\tOne\n3 01\tSpaced\n",
                ["t.tsv line 2: topic id '3 01' contains whitespace"],
            ),
            (
                "1\tOne\n2\tTwo\n1\tAgain\n",
                ["t.tsv line 3: topic id '1' repeats the topic of line 1"],
            ),
            (
                b"1\tOne\n2\tcaf\xe9\n3\tThree\n4\t\xff\n",
                [
                    "t.tsv line 2: is not valid UTF-8 (byte 0xE9 at column 6); "
                    "pass --encoding if the file is not UTF-8",
                    "t.tsv line 4: is not valid UTF-8 (byte 0xFF at column 3); "
                    "pass --encoding if the file is not UTF-8",
                ],
            ),
            (b"1\tOne\n2\tT\x00wo\n", ["t.tsv line 2: contains a NUL byte"]),
            (
                "1\tOne\n2\n",
                [
                    "t.tsv line 2: has 1 tab-separated column; expected 2 (id, title), "
                    "3 (id, title, description) or 4 (id, title, description, narrative)"
                ],
            ),
        ],
        ids=["whitespace-in-id", "duplicate", "invalid-utf8", "nul", "columns"],
    )
    def test_a_bad_line_imports_no_topic(self, campaign, tmp_path, content, expected):
        make_topics(campaign, ["0"])
        assert refused("topics", campaign, tmp_path, "t.tsv", content) == expected


class TestDocuments:
    def test_trec_documents_keep_html_raw_and_show_it_sanitised(self, campaign, tmp_path):
        summary = import_documents(
            campaign=campaign, source=write(tmp_path, "docs.trec", TREC_DOCS), name="docs.trec"
        )
        assert summary.counts == {"new documents": 2, "updated": 0, "unchanged": 0}
        html_doc = Document.objects.get(campaign=campaign, doc_id="0042")
        assert html_doc.title == "Airbus gets & keeps its subsidies"
        assert html_doc.is_html
        assert '<script>alert("x")</script>' in html_doc.body  # stored exactly as given
        assert "https://example.org/run/SECRET" in html_doc.body
        assert "<b>subsidies</b>" in html_doc.body_html
        assert "script" not in html_doc.body_html
        assert "alert" not in html_doc.body_html
        assert "href" not in html_doc.body_html
        assert "example.org" not in html_doc.body_html
        assert "source" in html_doc.body_html  # the link's text stays
        plain = Document.objects.get(campaign=campaign, doc_id="FT911-3")
        assert not plain.is_html
        assert plain.body == "Plain text about cartels & crime.\n\nSecond paragraph."
        assert plain.body_html == (
            "<p>Plain text about cartels &amp; crime.</p><p>Second paragraph.</p>"
        )

    def test_jsonl_documents(self, campaign, tmp_path):
        lines = [
            {"id": "0042", "title": "T", "text": "Body <i>one</i>."},
            {"docid": "d2", "contents": "Body two."},
        ]
        text = "\n".join(json.dumps(line) for line in lines) + "\n"
        import_documents(campaign=campaign, source=write(tmp_path, "d.jsonl", text), name="d")
        rows = list(campaign.documents.values_list("doc_id", "title", "body", "is_html"))
        assert rows == [("0042", "T", "Body <i>one</i>.", True), ("d2", "", "Body two.", False)]

    def test_tsv_documents_with_and_without_titles(self, campaign, tmp_path):
        text = "0042\tA title\tThe text.\nd2\tOnly text.\n"
        import_documents(campaign=campaign, source=write(tmp_path, "d.tsv", text), name="d.tsv")
        assert list(campaign.documents.values_list("doc_id", "title", "body")) == [
            ("0042", "A title", "The text."),
            ("d2", "", "Only text."),
        ]

    def test_smart_documents(self, campaign, tmp_path):
        import_documents(
            campaign=campaign, source=write(tmp_path, "cran.all", CRAN_DOCS), name="cran.all"
        )
        first = campaign.documents.get(doc_id="1")
        assert first.title == (
            "experimental investigation of the aerodynamics of a wing in a slipstream ."
        )
        assert first.body == (
            "Authors: brenckman,m.\nSource: j. ae. scs. 25, 1958, 324.\n\n"
            "experimental investigation of the aerodynamics of a\nwing in a slipstream ."
        )
        assert campaign.documents.count() == 2

    def test_gzip_documents_stream_in_batches(self, campaign, tmp_path):
        count = DOCUMENT_BATCH * 2 + 5
        text = "".join(f"{n:05d}\tText of document {n}.\n" for n in range(count))
        path = write(tmp_path, "big.tsv.gz", text, gzipped=True)
        seen = []
        summary = import_documents(
            campaign=campaign,
            source=path,
            name="big.tsv.gz",
            progress=lambda done, total, message: seen.append(done),
        )
        assert summary.counts == {"new documents": count, "updated": 0, "unchanged": 0}
        assert seen == [DOCUMENT_BATCH, 2 * DOCUMENT_BATCH]
        assert campaign.documents.get(doc_id="00000").body == "Text of document 0."

    def test_a_second_import_replaces_the_text_of_known_documents(self, campaign, tmp_path):
        import_documents(campaign=campaign, source=write(tmp_path, "a", "d1\tOld.\n"), name="a.tsv")
        summary = import_documents(
            campaign=campaign, source=write(tmp_path, "b", "d1\t<p>New</p>\nd2\tTwo\n"), name="b"
        )
        assert summary.counts == {"new documents": 1, "updated": 1, "unchanged": 0}
        d1 = campaign.documents.get(doc_id="d1")
        assert (d1.body, d1.body_html, d1.is_html) == ("<p>New</p>", "<p>New</p>", True)

    def test_a_byte_identical_import_changes_nothing_and_says_so(self, campaign, tmp_path):
        text = "d1\tOne.\nd2\tTitle\tTwo.\nd3\tThree.\n"
        import_documents(campaign=campaign, source=write(tmp_path, "a", text), name="a.tsv")
        before = list(campaign.documents.order_by("pk").values())
        again = import_documents(campaign=campaign, source=write(tmp_path, "b", text), name="b")
        assert again.counts == {"new documents": 0, "updated": 0, "unchanged": 3}
        assert again.message() == "Imported documents: 0 new documents, 0 updated, 3 unchanged."
        assert list(campaign.documents.order_by("pk").values()) == before
        retitled = text.replace("Title", "New title")
        changed = import_documents(
            campaign=campaign, source=write(tmp_path, "c", retitled), name="c"
        )
        assert changed.counts == {"new documents": 0, "updated": 1, "unchanged": 2}

    @pytest.mark.parametrize(
        ("content", "expected"),
        [
            (
                '{"id": "d 1", "text": "x"}\n{"id": "d2", "text": "y"}\n',
                ["d.jsonl line 1: document id 'd 1' contains whitespace"],
            ),
            (
                "d1\tone\nd2\ttwo\nd1\tagain\n",
                ["d.jsonl line 3: document id 'd1' repeats the document of line 1"],
            ),
            (b"d1\tone\nd2\tT\x00wo\n", ["d.jsonl line 2: contains a NUL byte"]),
        ],
        ids=["whitespace-in-id", "duplicate", "nul"],
    )
    def test_a_bad_record_imports_no_document(self, campaign, tmp_path, content, expected):
        assert refused("documents", campaign, tmp_path, "d.jsonl", content) == expected

    def test_a_bad_line_after_many_stored_batches_still_imports_nothing(self, campaign, tmp_path):
        good = "".join(f"d{n}\ttext {n}\n" for n in range(DOCUMENT_BATCH * 3)).encode()
        content = good + b"bad\tcaf\xe9\n" + b"d-last\ttext\n"
        problems = refused("documents", campaign, tmp_path, "big.tsv", content)
        line = DOCUMENT_BATCH * 3 + 1
        assert problems == [
            f"big.tsv line {line}: is not valid UTF-8 (byte 0xE9 at column 8); "
            "pass --encoding if the file is not UTF-8"
        ]
        assert not Document.objects.exists()

    def test_only_pooled_keeps_the_documents_of_the_pools(self, campaign, tmp_path):
        make_topics(campaign, ["051"])
        make_run(campaign, "bm25", {"051": [("0042", 3.0), ("d2", 2.0), ("d3", 1.0)]})
        make_pool(campaign, depth=2)
        text = "0042\tpooled\nd2\tpooled too\nd3\tbelow the depth\nd4\tin no run\n"
        summary = documents_importer(
            campaign=campaign,
            sources=[("docs.tsv", io.BytesIO(text.encode()))],
            options={"only_pooled": True},
            progress=lambda *args: None,
            user=None,
        )
        assert summary.counts == {
            "new documents": 2,
            "updated": 0,
            "unchanged": 0,
            "skipped (not pooled)": 2,
        }
        assert list(campaign.documents.values_list("doc_id", flat=True)) == ["0042", "d2"]

    def test_only_pooled_without_a_pool_is_refused(self, campaign):
        with pytest.raises(ParseError) as error:
            documents_importer(
                campaign=campaign,
                sources=[("docs.tsv", io.BytesIO(b"d1\ttext\n"))],
                options={"only_pooled": True},
                progress=lambda *args: None,
                user=None,
            )
        assert problem_texts(error) == [
            "docs.tsv: the campaign has no pools yet, so keeping only pooled documents would "
            "keep nothing; build a pool first or import every document."
        ]
        assert not Document.objects.exists()


def test_ids_keep_their_leading_zeros(campaign, tmp_path):
    import_topics(campaign=campaign, source=write(tmp_path, "t.tsv", "051\tA\n51\tB\n"), name="t")
    import_documents(
        campaign=campaign, source=write(tmp_path, "d.tsv", "0042\tx\n42\ty\n"), name="d"
    )
    assert sorted(Topic.objects.values_list("topic_id", flat=True)) == ["051", "51"]
    assert sorted(Document.objects.values_list("doc_id", flat=True)) == ["0042", "42"]
