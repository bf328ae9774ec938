"""``tokpipe.train_bpe`` against HF ``tokenizers``' ``BpeTrainer`` on the shared corpora.

Both trainers get the same pre-tokenizer, vocabulary size, special tokens, ``min_frequency``
and ``max_token_length``; HF's byte-level setup is the one its docs give for GPT-2 style BPE
(``ByteLevel`` pre-tokenizer, ``initial_alphabet=ByteLevel.alphabet()``). The vocabularies and
merge lists must be equal, and the tokenizer.json we write must encode like HF's own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import tokenizers
from tokenizers import Regex, models, pre_tokenizers, trainers

import tokpipe
from tests.conftest import CORPORA
from tests.parity.peers import tiktoken_encoding


def hf_pre_tokenizer(pattern: str) -> pre_tokenizers.PreTokenizer:
    """HF's pre-tokenizer for one of our presets.

    gpt2 is HF's ByteLevel with its built-in regex. cl100k and o200k are the published
    tiktoken patterns in a ``Split``, with the one change Oniguruma needs: tiktoken's
    possessive ``{1,3}+`` means "repeat the {1,3} group" to Oniguruma, so it becomes ``{1,3}``
    (the same matches, as ``\\p{N}`` never backtracks into the following alternatives).
    """
    if pattern == "gpt2":
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    regex = tiktoken_encoding(pattern)._pat_str.replace("{1,3}+", "{1,3}")
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def hf_trainer(vocab_size: int, min_frequency: int, special_tokens: Sequence[str],
               max_token_length: int | None) -> trainers.BpeTrainer:
    return trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=max_token_length,
        show_progress=False,
    )


def hf_empty(pattern: str) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = hf_pre_tokenizer(pattern)
    tok.decoder = tokenizers.decoders.ByteLevel()
    return tok


def vocab_and_merges(tokenizer_json: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    model = json.loads(tokenizer_json)["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges  # type: ignore[return-value]


def assert_same_training(ours: tokpipe.Tokenizer, hf: tokenizers.Tokenizer) -> None:
    our_vocab, our_merges = vocab_and_merges(ours.to_str())
    hf_vocab, hf_merges = vocab_and_merges(hf.to_str())
    assert len(our_merges) == len(hf_merges)
    first_difference = next((i for i, (a, b) in enumerate(zip(our_merges, hf_merges)) if a != b), None)
    assert first_difference is None, (first_difference, our_merges[first_difference], hf_merges[first_difference])
    assert our_vocab == hf_vocab
    assert ours.vocab_size == hf.get_vocab_size(with_added_tokens=True)


@pytest.fixture(scope="module")
def text_files() -> list[Path]:
    files = sorted((CORPORA / "text").rglob("*.txt"))
    assert len(files) >= 4
    return files


# (pattern, vocab_size, min_frequency, special tokens, max_token_length): the presets, small
# and large vocabularies, several min_frequency values, special tokens and a length cap.
FILE_CASES = [
    ("gpt2", 1000, 2, ["<|endoftext|>"], None),
    ("gpt2", 8000, 5, [], 12),
    ("cl100k", 4000, 2, ["<|endoftext|>", "<|fim_prefix|>"], None),
    ("o200k", 3000, 3, ["<s>", "</s>"], None),
]


@pytest.mark.parametrize(("pattern", "vocab_size", "min_frequency", "specials", "max_len"), FILE_CASES)
def test_training_on_files_matches_hf(text_files: list[Path], pattern: str, vocab_size: int, min_frequency: int,
                                      specials: list[str], max_len: int | None) -> None:
    # HF's Tokenizer.train reads files line by line, each line one sequence; so do we.
    hf = hf_empty(pattern)
    hf.train([str(f) for f in text_files], hf_trainer(vocab_size, min_frequency, specials, max_len))
    ours = tokpipe.train_bpe(text_files, vocab_size=vocab_size, pattern=pattern, special_tokens=specials,
                             min_frequency=min_frequency, max_token_length=max_len, show_progress=False)
    assert_same_training(ours, hf)


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_training_on_documents_matches_hf(documents: list[tuple[str, str]], pattern: str) -> None:
    # Whole documents (newlines inside) as sequences, as train_from_iterator takes them.
    texts = [text for _, text in documents]
    hf = hf_empty(pattern)
    hf.train_from_iterator(texts, hf_trainer(2000, 2, ["<|endoftext|>"], None))
    ours = tokpipe.train_bpe(texts=texts, vocab_size=2000, pattern=pattern, show_progress=False)
    assert_same_training(ours, hf)


def test_special_tokens_that_spell_bytes_and_merges_match_hf(documents: list[tuple[str, str]]) -> None:
    # HF keeps one string -> id map: a special token "!" is also the byte "!", and "the" is
    # the merge that spells it. Both keep the special token's id.
    texts = [text for _, text in documents[:20]]
    specials = ["!", "the", "<|endoftext|>"]
    hf = hf_empty("gpt2")
    hf.train_from_iterator(texts, hf_trainer(600, 2, specials, None))
    ours = tokpipe.train_bpe(texts=texts, vocab_size=600, special_tokens=specials, show_progress=False)
    assert_same_training(ours, hf)
    sample = "the theory! <|endoftext|> (the end!)"
    assert ours.encode(sample, allowed_special="all") == hf.encode(sample).ids
    assert ours.decode(ours.encode(sample)) == sample


def test_trained_tokenizer_json_encodes_like_hf(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    texts = [text for _, text in documents]
    ours = tokpipe.train_bpe(texts=texts, vocab_size=3000, pattern="cl100k", show_progress=False)
    path = tmp_path / "tokenizer.json"
    ours.save(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for name, text in documents:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, name
        assert ours.decode(ours.encode(text)) == text, name
    # And our own loader reads the file back to the same tokenizer.
    again = tokpipe.Tokenizer.from_file(path)
    assert again.to_str() == ours.to_str()
