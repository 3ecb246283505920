"""Importing topics, documents, runs and qrels: through the import functions, the commands and
the Files page. The helpers here are shared by the modules of this package."""

from __future__ import annotations

import gzip
from pathlib import Path

from campaigns.models import (
    Assessor,
    Document,
    Job,
    Judgment,
    JudgmentRevision,
    Topic,
    Upload,
    UploadChunk,
)
from pooling.models import Run, RunTopic

STORED = (
    Topic,
    Document,
    Run,
    RunTopic,
    Assessor,
    Judgment,
    JudgmentRevision,
    Upload,
    UploadChunk,
    Job,
)


def stored_rows() -> dict[str, int]:
    """How many rows each kind of imported record has: a refused import changes none of them."""
    return {model.__name__: model.objects.count() for model in STORED}


def write(directory: Path, name: str, content: str | bytes, *, gzipped: bool = False) -> Path:
    """A file in ``directory``: text is written as UTF-8, bytes as they are."""
    data = content.encode() if isinstance(content, str) else content
    path = directory / name
    path.write_bytes(gzip.compress(data) if gzipped else data)
    return path


def run_lines(
    tag: str, ranking: dict[str, list[tuple[str, float]]], *, separator: str = " ", first: int = 1
) -> str:
    """The text of a run file: topic -> [(docid, score), ...] written in the given order, ranks
    counting from ``first``."""
    return "".join(
        separator.join((topic, "Q0", docid, str(rank), repr(score), tag)) + "\n"
        for topic, docs in ranking.items()
        for rank, (docid, score) in enumerate(docs, first)
    )


def problem_texts(error) -> list[str]:
    """The problems of a ParseError (from pytest.raises) as the user reads them."""
    return [str(problem) for problem in error.value.problems]
