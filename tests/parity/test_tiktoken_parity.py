"""Identical ids to tiktoken for cl100k, o200k and gpt2 (r50k) on real text and generated text."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe
from tests.conftest import VOCAB
from tests.parity.peers import ENCODINGS, tiktoken_encoding

NAMES = ["cl100k", "o200k", "gpt2"]


@functools.lru_cache(maxsize=None)
def ours(name: str) -> tokpipe.Tokenizer:
    if name == "gpt2":
        return tokpipe.Tokenizer.from_gpt2(VOCAB / "gpt2_encoder.json", VOCAB / "gpt2_vocab.bpe")
    _, gz_name, preset = ENCODINGS[name]
    return tokpipe.Tokenizer.from_tiktoken(VOCAB / gz_name, pattern=preset)


@pytest.mark.parametrize("name", NAMES)
def test_vocabulary_and_special_tokens_match(name: str) -> None:
    ref, tok = tiktoken_encoding(name), ours(name)
    assert tok.special_tokens == ref._special_tokens
    assert tok.vocab_size == ref.n_vocab
    for id_ in [0, 1, 255, 256, 1000, ref.n_vocab // 2, ref.max_token_value]:
        assert tok.token_bytes(id_) == ref.decode_single_token_bytes(id_)


@pytest.mark.parametrize("name", NAMES)
def test_every_document_encodes_like_tiktoken(name: str, documents: list[tuple[str, str]]) -> None:
    ref, tok = tiktoken_encoding(name), ours(name)
    for doc_name, text in documents:
        expected = ref.encode_ordinary(text)
        got = tok.encode(text)
        assert got == expected, f"{name}: ids differ on {doc_name}"
        assert tok.decode(got) == text


@pytest.mark.parametrize("name", NAMES)
def test_encode_to_numpy_matches_tiktoken(name: str, documents: list[tuple[str, str]]) -> None:
    ref, tok = tiktoken_encoding(name), ours(name)
    for doc_name, text in documents:
        expected = ref.encode_to_numpy(text, disallowed_special=())
        got = tok.encode_to_numpy(text)
        assert got.dtype == expected.dtype == np.uint32, doc_name
        assert np.array_equal(got, expected), f"{name}: ids differ on {doc_name}"
    special = sorted(ref.special_tokens_set)[0]
    mixed = f"one {special} two"
    expected = ref.encode_to_numpy(mixed, allowed_special="all")
    assert np.array_equal(tok.encode_to_numpy(mixed, allowed_special="all"), expected)
    assert tok.encode_to_numpy("").shape == (0,)


@pytest.mark.parametrize("name", NAMES)
def test_encode_batch_matches_tiktoken_on_every_thread_count(name: str, documents: list[tuple[str, str]]) -> None:
    ref, tok = tiktoken_encoding(name), ours(name)
    texts = [text for _, text in documents]
    expected = ref.encode_ordinary_batch(texts)
    for threads in (1, 2, 3, None):
        assert tok.encode_batch(texts, num_threads=threads) == expected


@pytest.mark.parametrize("name", NAMES)
def test_special_tokens_like_tiktoken(name: str, documents: list[tuple[str, str]]) -> None:
    ref, tok = tiktoken_encoding(name), ours(name)
    specials = sorted(ref.special_tokens_set)
    text = documents[0][1][:2000]
    mixed = specials[0] + text[:500] + "".join(specials) + text[500:] + specials[-1]
    # By default a special token is ordinary text (tiktoken's encode_ordinary).
    assert tok.encode(mixed) == ref.encode_ordinary(mixed)
    assert tok.encode(mixed, allowed_special="all") == ref.encode(mixed, allowed_special="all")
    one = {specials[-1]}
    assert tok.encode(mixed, allowed_special=one) == ref.encode(mixed, allowed_special=one, disallowed_special=())
    assert tok.encode_batch([mixed, text], allowed_special="all") == ref.encode_batch([mixed, text], allowed_special="all")


# Characters that stress the split patterns: every kind of whitespace, digits of several
# scripts, letters of every case category, combining marks, apostrophes, CJK, emoji, and the
# contraction letters in both cases.
_NASTY = (
    " \t\r\n\u00a0\u2028\u3000\u200b"
    "0123456789٣²½"
    "aAzZsStTdDmMlLvVrReEſK"
    "ǅʰéÉßﬁ\u0301\u0308"
    "'’\"/.,;:!?-_()[]{}<>@#$%^&*+=|\\~`"
    "中文日本語한국어カタカナ"
    "😀👍🏽🇫🇷\u200d"
)
_text = st.text(alphabet=st.sampled_from(list(_NASTY)), max_size=80) | st.text(max_size=40)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=300, deadline=None)
@given(text=_text)
def test_generated_text_encodes_like_tiktoken(name: str, text: str) -> None:
    ids = ours(name).encode(text)
    assert ids == tiktoken_encoding(name).encode_ordinary(text)
    assert ours(name).decode(ids) == text


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_decode_inverts_encode(text: str) -> None:
    tok = ours("cl100k")
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode_bytes(ids) == text.encode("utf-8", errors="surrogatepass")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "text",
    [
        "a" * 20_000,
        " " * 20_000,
        "\n" * 20_000,
        "1" * 20_000,
        "!" * 20_000,
        "ab" * 10_000,
        "x" * 5_000 + " y" * 5_000,
        "中" * 10_000,
    ],
    ids=["letters", "spaces", "newlines", "digits", "punct", "ab", "mixed", "cjk"],
)
def test_long_runs_match_tiktoken(name: str, text: str) -> None:
    assert ours(name).encode(text) == tiktoken_encoding(name).encode_ordinary(text)


@pytest.mark.parametrize(
    "text",
    [
        "a" * 1_000_000,
        " " * 1_000_000,
        "9" * 1_000_000,
        ".-" * 500_000,
        "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(300_000)),
    ],
    ids=["one-letter", "spaces", "digits", "punct-no-space", "cjk-no-space"],
)
def test_one_megabyte_adversarial_input_round_trips(text: str) -> None:
    # tiktoken is quadratic on such pieces, so the check here is that we finish (a quadratic
    # merge or a recursive matcher would hang or overflow) and give back the input.
    for name in NAMES:
        tok = ours(name)
        ids = tok.encode(text)
        assert tok.decode(ids) == text
