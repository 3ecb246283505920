"""Plain-text documents read like a page: hard-wrapped prose joined into paragraphs that wrap to
any screen, paragraph breaks kept, and monospace only for code, sessions and tables."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from campaigns.formats import iter_documents
from campaigns.models import Document
from campaigns.sanitize import render_body, render_plain_text
from campaigns.textfiles import iter_lines

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DEMO = Path(__file__).resolve().parents[2] / "pooljudge" / "demo" / "documents.jsonl.gz"

WRAPPED = """\
an experimental study of a wing in a propeller slipstream was
made in order to determine the spanwise distribution of the lift
increase due to slipstream at different angles of attack of the wing
and at different free stream to slipstream velocity ratios ."""


def test_hard_wrapped_prose_becomes_one_paragraph_without_line_breaks():
    html = render_plain_text(WRAPPED)
    assert html == "<p>" + " ".join(WRAPPED.split("\n")) + "</p>"
    assert "<br>" not in html


def test_blank_lines_and_indented_first_lines_start_paragraphs():
    text = (
        "experimental investigation of the aerodynamics of a\n"
        "wing in a slipstream .\n"
        "  an experimental study of a wing in a propeller slipstream was\n"
        "made in order to determine the spanwise distribution of the lift .\n"
        "  the comparative span loading curves, together with\n"
        "supporting evidence, showed a substantial part of the lift increment .\n"
        "\n"
        "A last paragraph."
    )
    paragraphs = re.findall(r"<p>(.*?)</p>", render_plain_text(text))
    assert paragraphs == [
        "experimental investigation of the aerodynamics of a wing in a slipstream .",
        "an experimental study of a wing in a propeller slipstream was made in order to "
        "determine the spanwise distribution of the lift .",
        "the comparative span loading curves, together with supporting evidence, showed a "
        "substantial part of the lift increment .",
        "A last paragraph.",
    ]


def test_short_lines_and_list_items_keep_their_line_breaks():
    text = "Authors: ting-yili\nSource: rensselaer polytechnic institute\n\n- one\n- two"
    assert render_plain_text(text) == (
        "<p>Authors: ting-yili<br>Source: rensselaer polytechnic institute</p><p>- one<br>- two</p>"
    )


def test_an_indented_list_is_a_list_not_code():
    text = "It:\n\n    - handles optional arguments\n    - produces usage messages"
    assert render_plain_text(text) == (
        "<p>It:</p><p>- handles optional arguments<br>- produces usage messages</p>"
    )


def test_lines_longer_than_any_wrap_column_are_paragraphs_of_their_own():
    first, second = "word " * 40, "more " * 40
    assert render_plain_text(f"{first}\n{second}") == (
        f"<p>{first.strip()}</p><p>{second.strip()}</p>"
    )


def test_code_sessions_and_tables_stay_line_for_line_in_monospace():
    text = (
        "Deprecated, use 'staticmethod' with 'abstractmethod' instead:\n\n"
        "    class C(ABC):\n"
        "        @staticmethod\n"
        "        def f(x):\n"
        "            return x < 1\n\n"
        ">>> f(0)\nTrue\n\n"
        "name     value   unit\n"
        "alpha    1.0     m\n"
        "beta     2.5     s"
    )
    html = render_plain_text(text)
    blocks = re.findall(r"<pre><code>(.*?)</code></pre>", html, re.S)
    assert blocks == [
        "class C(ABC):\n    @staticmethod\n    def f(x):\n        return x &lt; 1",
        "&gt;&gt;&gt; f(0)\nTrue",
        "name     value   unit\nalpha    1.0     m\nbeta     2.5     s",
    ]
    assert html.startswith("<p>Deprecated, use &#x27;staticmethod&#x27;")


def test_text_stays_text_whatever_it_spells():
    html, is_html = render_body("a < b & <c> 'quoted' \"too\"\n\n<not a tag")
    assert not is_html
    assert "<c>" not in html
    assert "&lt;c&gt;" in html
    assert "&lt;not a tag" in html


def test_whitespace_only_and_empty_bodies_render_nothing():
    assert render_plain_text("") == ""
    assert render_plain_text("\n  \n\t\n") == ""


def test_a_megabyte_of_wrapped_text_renders_in_linear_time():
    # One paragraph of 15,000 wrapped lines: joined once, not line by line (no quadratic copy).
    text = "\n".join(["lorem ipsum dolor sit amet consectetur adipiscing elit sed do"] * 15000)
    html = render_plain_text(text)
    assert html.count("<p>") == 1
    assert len(html) > len(text)


def test_the_demo_docstrings_render_code_in_pre_and_prose_in_paragraphs():
    with gzip.open(DEMO, "rt", encoding="utf-8") as lines:
        docs = {d["id"]: d for d in map(json.loads, lines)}
    abstract = render_plain_text(docs["d00006"]["text"])
    assert "<pre><code>class C(ABC):" in abstract
    prose = render_plain_text(docs["d00101"]["text"])
    assert "<br>" not in prose
    assert "<p>If the calling coroutine has not acquired the lock when this method is" in prose


@pytest.mark.shared_data
def test_cranfield_abstracts_read_as_paragraphs():
    path = DATA / "cranfield" / "variant-B_xyxxyyxy" / "cran.all.1400"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    documents = list(iter_documents(iter_lines(path, name=path.name), format="smart"))
    assert len(documents) == 1400
    broken = 0
    for document in documents:
        html = render_plain_text(document.body)
        abstract = html.split("</p>", 2)[-1] if document.body.startswith("Authors") else html
        broken += abstract.count("<br>")
    # The old rendering put a <br> at every line end: about 11 per abstract.
    assert broken < 0.02 * len(documents), broken


def _rerender_migration() -> tuple[str, str]:
    """The campaigns migration that renders plain text again, and the one before it (found by
    what it does, not by its number, which may change when branches merge)."""
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.operations import RunPython

    loader = MigrationLoader(connection)
    for (app, name), migration in loader.disk_migrations.items():
        if app == "campaigns" and any(
            isinstance(op, RunPython) and op.code.__name__ == "render_plain_text_again"
            for op in migration.operations
        ):
            [(_, parent)] = [dep for dep in migration.dependencies if dep[0] == "campaigns"]
            return name, parent
    raise AssertionError("no campaigns migration renders plain text again")


@pytest.mark.django_db(transaction=True)
def test_the_migration_renders_existing_plain_text_documents_again(campaign):
    """Documents imported before the new rendering get it from the data migration; HTML
    documents and the bodies themselves are untouched."""
    old_plain = "<p>" + "<br>".join(WRAPPED.split("\n")) + "</p>"
    Document.objects.bulk_create(
        [
            Document(campaign=campaign, doc_id="plain", body=WRAPPED, body_html=old_plain),
            Document(
                campaign=campaign,
                doc_id="html",
                body="<p>x<br>y</p>",
                body_html="<p>x<br>y</p>",
                is_html=True,
            ),
        ]
    )
    mine, before = _rerender_migration()
    call_command("migrate", "campaigns", before, verbosity=0)
    try:
        call_command("migrate", "campaigns", mine, verbosity=0)
    finally:
        call_command("migrate", verbosity=0)
    plain = Document.objects.get(doc_id="plain")
    assert plain.body == WRAPPED
    assert plain.body_html == render_plain_text(WRAPPED)
    assert "<br>" not in plain.body_html
    assert Document.objects.get(doc_id="html").body_html == "<p>x<br>y</p>"
