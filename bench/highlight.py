"""Times marking a topic's terms in a 1 MB document (assess/highlight.py) and rendering 1 MB of
plain text (campaigns/sanitize.py), the two costs the judging screen adds per document.

Run from the repository root: ``python bench/highlight.py``. Prints the best of five runs, in
milliseconds, for a 1 MB sanitised HTML document in three shapes: no term in it (the whole text
is searched and nothing rewritten), terms everywhere under the mark cap (the cap stops the work
early), and terms everywhere with the cap lifted (what the cap saves); then the time to render
1 MB of hard-wrapped plain text, and the Cranfield collection's 1,400 abstracts when
../shared/data is present (the data migration's work per document). The target is that a 1 MB
document adds well under 100 ms, against the ~5 ms a prefetched document takes to appear.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assess.highlight import highlight_html, topic_terms  # noqa: E402
from campaigns.sanitize import render_plain_text  # noqa: E402

MEGABYTE = 1_000_000
TOPIC = (
    "coronavirus origin",
    "What is the origin of COVID-19? Studies of the virus's genes and bat reservoirs.",
)
CRANFIELD = ROOT.parent / "shared" / "data" / "cranfield" / "variant-B_xyxxyyxy" / "cran.all.1400"


def best_of(repeats: int, call) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def html_of(sentence: str) -> str:
    paragraph = "<p>" + sentence * 20 + "</p>\n"
    return paragraph * (MEGABYTE // len(paragraph) + 1)


def main() -> None:
    terms = topic_terms(*TOPIC)
    print(f"terms: {', '.join(terms.words)}")
    quiet = html_of("Lorem ipsum dolor sit amet, consectetur adipiscing elit &amp; sed do. ")
    busy = html_of("The virus origin is unknown &amp; coronavirus studies of genes go on. ")
    rows = [
        ("1 MB, no term", lambda: highlight_html(quiet, terms)),
        ("1 MB, terms everywhere, capped", lambda: highlight_html(busy, terms)),
        (
            "1 MB, terms everywhere, no cap",
            lambda: highlight_html(busy, terms, max_marks=10**9, max_scan=10**9),
        ),
    ]
    for name, call in rows:
        marks = call().count('<mark class="term">')
        print(f"highlight {name}: {best_of(5, call):.1f} ms ({marks:,} marks)")
    wrapped = "\n".join(
        ["an experimental study of a wing in a propeller slipstream was made in"] * 14_300
    )
    print(
        f"plain text, 1 MB hard-wrapped ({len(wrapped):,} chars): "
        f"{best_of(5, lambda: render_plain_text(wrapped)):.1f} ms"
    )
    if CRANFIELD.exists():
        from campaigns.formats import iter_documents
        from campaigns.textfiles import iter_lines

        bodies = [
            record.body
            for record in iter_documents(iter_lines(CRANFIELD, name="cran"), format="smart")
        ]
        elapsed = best_of(3, lambda: [render_plain_text(body) for body in bodies])
        print(
            f"plain text, Cranfield's {len(bodies):,} documents: {elapsed:.1f} ms "
            f"({1000 * elapsed / len(bodies):.1f} us per document)"
        )


if __name__ == "__main__":
    main()
