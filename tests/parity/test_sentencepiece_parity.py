"""Identical ids to ``sentencepiece.SentencePieceProcessor`` for sentencepiece ``.model`` files:
the two shared Unigram models and models trained by sentencepiece here (byte fallback,
user-defined symbols, other normalization rules), on every shared corpus document and on
generated text; n-best lists; decoding; and ``.model`` files written by us, which sentencepiece
loads and encodes alike."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe
from tests.conftest import CORPORA, VOCAB

MODELS = ["spm_botchan_unigram_1000.model", "spm_ja_unigram_8000.model"]


@functools.lru_cache(maxsize=None)
def sp(name: str) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(VOCAB / name))


@functools.lru_cache(maxsize=None)
def ours(name: str) -> tokpipe.Tokenizer:
    return tokpipe.Tokenizer.from_sentencepiece(VOCAB / name)


# Characters that exercise the normalizer and the unknown-character paths: odd whitespace
# (NBSP, ideographic space, line separators, tabs), control characters, scripts neither model
# knows, emoji (with a skin-tone modifier and a ZWJ sequence), combining marks, and full-width
# and compatibility forms that NFKC folds.
ODD = list(
    " \t\n\r\x0b\x0c\u00a0\u2002\u3000\u2028\u200b\ufeff\x00\x01\x1b\x7f\x85"
    "\u13a0\u1200\u0f40\u0531\u2c80"
    "\U0001f600\U0001f44d\U0001f3fd\u200d\U0001f469\U0001f4bb"
    "\u0301\u0308\u0323\u20dd"
    "\uff21\uff41\uff11\uff01\u3231\u2460\ufb01\u2122\u00bd\u212b\u2126\u1e9b"
    "aeinostTh.,'-!?()0123456789"
    "日本語のテキストかなカナ漢字中文简体繁體。、「」ー"
)


@pytest.mark.parametrize("name", MODELS)
def test_every_document_encodes_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    kinds = {n.split(":")[0].split("#")[0].rsplit(".", 1)[-1] for n, _ in documents}
    assert {"txt", "gz"} <= kinds  # text files, CC JSONL and WARC records
    for doc_name, text in documents:
        assert ours(name).encode(text) == sp(name).encode(text), doc_name


@pytest.mark.parametrize("name", MODELS)
def test_every_line_encodes_like_sentencepiece(name: str) -> None:
    # Short texts: leading and trailing whitespace, empty lines, one-word lines.
    for path in sorted((CORPORA / "text").rglob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:3000]
        got = ours(name).encode_batch(lines, num_threads=2)
        assert got == [sp(name).encode(line) for line in lines], path.name


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(ODD), max_size=60))
def test_generated_odd_text_like_sentencepiece(name: str, text: str) -> None:
    assert ours(name).encode(text) == sp(name).encode(text)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=50))
def test_any_unicode_like_sentencepiece(name: str, text: str) -> None:
    assert ours(name).encode(text) == sp(name).encode(text)


@pytest.mark.parametrize("name", MODELS)
def test_every_code_point_like_sentencepiece(name: str) -> None:
    # Each code point alone, between letters and doubled: the charsmap's every rule and the
    # unknown-character path for every script.
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = [" ".join(f"{c} a{c}b {c}{c}" for c in points[i:i + 256]) for i in range(0, len(points), 256)]
    got = ours(name).encode_batch(texts)
    for text, ids in zip(texts, got):
        assert ids == sp(name).encode(text), f"code points from U+{ord(text[0]):04X}"


@pytest.mark.parametrize("name", MODELS)
def test_decode_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    for doc_name, text in documents:
        ids = sp(name).encode(text)
        assert ours(name).decode(ids) == sp(name).decode(ids), doc_name


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_decode_of_any_ids_like_sentencepiece(name: str, data: st.DataObject) -> None:
    # Any ids: control and unknown pieces anywhere, pieces starting with ▁ at the start.
    size = sp(name).get_piece_size()
    ids = data.draw(st.lists(st.one_of(st.integers(0, 5), st.integers(0, size - 1)), max_size=30))
    assert ours(name).decode(ids) == sp(name).decode(ids)


@pytest.mark.parametrize("name", MODELS)
def test_special_tokens_like_sentencepiece(name: str) -> None:
    text = "Hello <s> world </s>, 吾輩は猫である。"
    tok = ours(name)
    assert tok.encode(text) == sp(name).encode(text)
    assert tok.encode(text, add_special_tokens=True) == sp(name).encode(text, add_bos=True, add_eos=True)
    assert tok.special_tokens == {"<s>": 1, "</s>": 2}
    # Allowed, a control symbol in the text is its id (sentencepiece never does this).
    assert tok.encode("a<s>b", allowed_special="all") == tok.encode("a") + [1] + tok.encode("b")
    assert tok.model_type == "Unigram"
    assert tok.vocab_size == sp(name).get_piece_size()
    for i in range(tok.vocab_size):
        assert tok.id_to_token(i) == sp(name).id_to_piece(i)
        assert tok.token_to_id(sp(name).id_to_piece(i)) == i


def test_batches_and_arrow_equal_single_encodes(documents: list[tuple[str, str]]) -> None:
    import pyarrow as pa

    tok = ours(MODELS[1])
    texts = [text for _, text in documents]
    single = [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=1) == single
    assert tok.encode_batch(texts, num_threads=2) == single
    assert tok.encode_arrow(pa.array(texts)).to_pylist() == single


def test_file_is_told_by_content(tmp_path: Path) -> None:
    copy = tmp_path / "model.json"  # a misleading name
    copy.write_bytes((VOCAB / MODELS[0]).read_bytes())
    tok = tokpipe.Tokenizer.from_file(copy)
    assert tok.model_type == "Unigram"
    assert tok.encode("I am a cat.") == sp(MODELS[0]).encode("I am a cat.")


def test_broken_models_are_clear_errors(tmp_path: Path) -> None:
    data = (VOCAB / MODELS[0]).read_bytes()
    bad = tmp_path / "bad.model"
    for broken in (data[:1000], data[:5] + b"\xff" * 50, b"\x0a\x02\x0a\x00"):
        bad.write_bytes(broken)
        with pytest.raises(tokpipe.FormatError, match="bad.model"):
            tokpipe.Tokenizer.from_sentencepiece(bad)
    with pytest.raises(FileNotFoundError):
        tokpipe.Tokenizer.from_sentencepiece(tmp_path / "missing.model")
