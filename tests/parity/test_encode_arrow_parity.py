"""``Tokenizer.encode_arrow`` (a whole Arrow string column at once) gives tiktoken's ids for
every document of the shared corpora, in every layout a column comes in."""

from __future__ import annotations

import pyarrow as pa
import pytest

import tokpipe
from tests.conftest import VOCAB
from tests.parity.peers import ENCODINGS, tiktoken_encoding


def _ours(name: str) -> tokpipe.Tokenizer:
    if name == "gpt2":
        return tokpipe.Tokenizer.from_gpt2(VOCAB / "gpt2_encoder.json", VOCAB / "gpt2_vocab.bpe")
    _, gz_name, preset = ENCODINGS[name]
    return tokpipe.Tokenizer.from_tiktoken(VOCAB / gz_name, pattern=preset)


def _texts(documents: list[tuple[str, str]]) -> list[str]:
    # Whole documents, their lines (many short rows) and an empty row.
    texts = [text for _, text in documents]
    for _, text in documents[:3]:
        texts += text.splitlines()[:400]
    return texts + [""]


@pytest.mark.parametrize("name", ["cl100k", "o200k", "gpt2"])
def test_encode_arrow_matches_tiktoken_on_real_text(name: str, documents: list[tuple[str, str]]) -> None:
    ref, tok = tiktoken_encoding(name), _ours(name)
    texts = _texts(documents)
    got = tok.encode_arrow(pa.array(texts, type=pa.string())).to_pylist()
    expected = [ref.encode_ordinary(t) for t in texts]
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"row {i} differs"


def test_encode_arrow_layouts_eos_and_narrow_ids(documents: list[tuple[str, str]]) -> None:
    ref, tok = tiktoken_encoding("gpt2"), _ours("gpt2")
    eos = ref.eot_token
    texts = _texts(documents)[:200] + ["", "tail"]
    expected = [[*ref.encode_ordinary(t), eos] if ref.encode_ordinary(t) else [] for t in texts]
    column = pa.array(texts, type=pa.large_string())
    chunked = pa.chunked_array([pa.array(texts[:50]), pa.array(texts[50:])])
    for layout in (column, chunked, pa.array(["x", *texts]).slice(1)):
        got = tok.encode_arrow(layout, append_id=eos, dtype="uint16", num_threads=2)
        assert got.type == pa.large_list(pa.uint16())
        assert got.to_pylist() == expected


def test_ids_that_do_not_fit_uint16_are_an_error() -> None:
    tok = _ours("cl100k")
    with pytest.raises(tokpipe.errors.InvalidArgumentError):
        tok.encode_arrow(pa.array(["<|endoftext|> hi"]), append_id=100257, dtype="uint16")
