"""The parity sweeps' documents: a sample by default, every document whole under ``-m slow``.

Each parity test that takes ``documents`` runs twice over: ``[sample]``, every shared document
(English, Japanese and Chinese books, Common Crawl JSONL, WARC pages) cut to its first
``SAMPLE_CHARS`` characters, so a contributor's run still meets every kind of text; and
``[all]``, marked ``slow``, the documents whole (the books are a megabyte each), which CI runs
with ``pytest -m slow``.
"""

from __future__ import annotations

import pytest

from tests.conftest import load_documents

#: Enough for many lines and paragraphs of each document, a fiftieth of the books.
SAMPLE_CHARS = 20_000


@pytest.fixture(scope="session", params=["sample", pytest.param("all", marks=pytest.mark.slow)])
def documents(request: pytest.FixtureRequest) -> list[tuple[str, str]]:
    docs = load_documents()
    if request.param == "sample":
        return [(name, text[:SAMPLE_CHARS]) for name, text in docs]
    return docs
