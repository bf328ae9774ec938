"""Identical ids to HF ``tokenizers`` for byte-level BPE tokenizer.json files, and files we
write that HF loads and encodes exactly as we do."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe
from tests.conftest import VOCAB
from tests.parity.test_tiktoken_parity import ours as ours_openai

NEO = VOCAB / "gpt-neo-tokenizer.json"


@functools.lru_cache(maxsize=None)
def hf_neo() -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(NEO))


@functools.lru_cache(maxsize=None)
def ours_neo() -> tokpipe.Tokenizer:
    return tokpipe.Tokenizer.from_file(NEO)


def hf_ids(tok: tokenizers.Tokenizer, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def test_neo_every_document_encodes_like_hf(documents: list[tuple[str, str]]) -> None:
    # HF matches every added token (special or not) in text; allowed_special="all" asks the same.
    for name, text in documents:
        assert ours_neo().encode(text, allowed_special="all") == hf_ids(hf_neo(), text), name


def test_neo_added_tokens_and_special_tokens_like_hf(documents: list[tuple[str, str]]) -> None:
    text = documents[0][1][:3000]
    mixed = "<|endoftext|>" + text + "|||EMAIL_ADDRESS|||  \t     x<|padding|>" + "    def f():\n        return 1\n"
    assert ours_neo().encode(mixed, allowed_special="all") == hf_ids(hf_neo(), mixed)
    # Added tokens that are not special (runs of spaces) are matched even when no special
    # token is allowed, as HF always does; <|endoftext|> then stays ordinary text.
    ids = ours_neo().encode("a        b<|endoftext|>")
    assert hf_neo().token_to_id("        ") in ids
    assert 50279 not in ids


def test_neo_vocabulary_like_hf() -> None:
    hf, tok = hf_neo(), ours_neo()
    assert tok.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    for token, id_ in list(hf.get_vocab(with_added_tokens=True).items())[::97]:
        assert tok.token_to_id(token) == id_
        assert tok.id_to_token(id_) == token


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60))
def test_neo_generated_text_like_hf(text: str) -> None:
    assert ours_neo().encode(text, allowed_special="all") == hf_ids(hf_neo(), text)


def test_merges_written_as_pairs_load_the_same(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    # tokenizers >= 0.20 writes merges as ["a", "b"] pairs; older files use "a b" strings.
    data = json.loads(NEO.read_text(encoding="utf-8"))
    data["model"]["merges"] = [m.split(" ", 1) for m in data["model"]["merges"]]
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps(data), encoding="utf-8")
    tok = tokpipe.Tokenizer.from_file(pairs)
    for name, text in documents[::5]:
        assert tok.encode(text, allowed_special="all") == ours_neo().encode(text, allowed_special="all"), name


@pytest.mark.parametrize("source", ["neo", "cl100k", "o200k", "gpt2"])
def test_saved_tokenizer_json_loads_in_hf_with_identical_ids(
    source: str, tmp_path: Path, documents: list[tuple[str, str]]
) -> None:
    tok = ours_neo() if source == "neo" else ours_openai(source)
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    again = tokpipe.Tokenizer.from_file(path)
    for name, text in documents:
        expected = tok.encode(text, allowed_special="all")
        assert hf_ids(hf, text) == expected, f"HF differs on {name}"
        assert again.encode(text, allowed_special="all") == expected, f"reloaded tokpipe differs on {name}"


@pytest.mark.parametrize("source", ["cl100k", "gpt2"])
def test_save_tiktoken_round_trips_through_tiktoken(source: str, tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    import tiktoken
    import tiktoken.load

    from tests.parity.peers import tiktoken_encoding

    tok = ours_openai(source)
    path = tmp_path / "out.tiktoken"
    tok.save_tiktoken(path)
    ref = tiktoken_encoding(source)
    assert tiktoken.load.load_tiktoken_bpe(str(path)) == ref._mergeable_ranks
    rebuilt = tiktoken.Encoding("rebuilt", pat_str=ref._pat_str, mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
                                special_tokens=ref._special_tokens)
    for _, text in documents[::3]:
        assert rebuilt.encode_ordinary(text) == tok.encode(text)
