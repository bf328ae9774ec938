"""The English word splitter behind the C4, FineWeb and Gopher rules (``tokpipe_core::text::
en_words``) against what it ports: spaCy 3's blank English tokenizer, whose tokens less the
whitespace ones are datatrove's ``split_into_words(text, "en")``. Every document of the shared
corpora (English books and web text, but also Chinese, Japanese and raw HTML, which exercise
the URL, special-case and script rules), token for token."""

from __future__ import annotations

import spacy

from tests.conftest import load_documents, real_english_documents
from tokpipe import _core


def test_words_equal_spacys_on_every_document() -> None:
    tokenizer = spacy.blank("en").tokenizer
    docs = real_english_documents() + [text for _, text in load_documents()]
    differ = []
    for i, text in enumerate(docs):
        expected = [t.text for t in tokenizer(text) if t.text.strip()]
        if _core.words(text) != expected:
            differ.append(i)
    assert len(docs) > 1500
    assert differ == []


def test_special_cases_and_urls() -> None:
    # Cases found among split tokens ("a." after an infix hyphen), contractions, URLs inside
    # markup, units and currencies after digits, and hyphen runs.
    tokenizer = spacy.blank("en").tokenizer
    for text in ["all men's ware-a.", "don't can't y'all", "(see https://example.org/a?b=1).",
                 'href="https://cdn.example.com/x.css"', "10km 5US$ 3+ 20°C.", "well--known a-–b",
                 "Z.Marcus U.S.A. e.g. :) (-:"]:
        assert _core.words(text) == [t.text for t in tokenizer(text) if t.text.strip()], text
