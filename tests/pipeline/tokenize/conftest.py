"""Fixtures of the ``tokpipe.pipeline.tokenize`` tests: real text, and a small corpus of it
on disk (see ``helpers``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.tokenize.helpers import corpus_records


@pytest.fixture(scope="module")
def records() -> list[dict[str, str]]:
    return corpus_records()


@pytest.fixture()
def corpus(tmp_path: Path, records: list[dict[str, str]]) -> Path:
    """Three JSONL files; small tasks so several workers share the work."""
    folder = tmp_path / "in"
    folder.mkdir()
    third = len(records) // 3
    for n, part in enumerate((records[:third], records[third:2 * third], records[2 * third:])):
        with open(folder / f"{n}.jsonl", "w", encoding="utf-8") as f:
            for r in part:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return folder
