"""``tokenize`` stage: ids equal to the peers' (tiktoken, HF tokenizers) plus the EOS they
name, dtype by vocabulary size, empty documents dropped, the tokenizer loaded once."""

from __future__ import annotations

import pyarrow as pa
import pytest
import tokenizers

from tests.conftest import VOCAB
from tests.parity.peers import tiktoken_encoding
from tokpipe import train_bpe
from tokpipe.errors import ConfigError
from tokpipe.pipeline.base import REASON
from tokpipe.pipeline.stages import Tokenize
from tokpipe.pipeline.stages.tokenize import load_tokenizer


def batch_of(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts})


def real_texts(documents: list[tuple[str, str]]) -> list[str]:
    return [t for _, t in documents] + ["", "a", " ", "\n"]


@pytest.mark.parametrize("name, path, dtype", [
    ("gpt2", VOCAB / "gpt2_encoder.json", pa.uint16()),       # 50,257 ids
    ("cl100k", VOCAB / "cl100k_base.tiktoken.gz", pa.uint32()),  # 100,277 ids
    ("o200k", VOCAB / "o200k_base.tiktoken.gz", pa.uint32()),   # 200,019 ids
])
def test_ids_are_tiktokens_plus_its_end_of_text(name: str, path: object, dtype: pa.DataType,
                                               documents: list[tuple[str, str]]) -> None:
    ref = tiktoken_encoding(name)
    texts = real_texts(documents)
    stage = Tokenize(tokenizer=str(path))
    result = stage.process(batch_of(texts))
    expected = [ref.encode_ordinary(t) + [ref.eot_token] for t in texts]
    kept = [e for e in expected if len(e) > 1]
    assert result.kept.schema.field("input_ids").type.value_type == dtype
    assert result.kept.column("input_ids").to_pylist() == kept
    assert result.kept.column("length").to_pylist() == [len(e) for e in kept]
    assert result.kept.schema.field("length").type == pa.int32()
    # Only the empty text has no token: dropped, with its reason.
    assert result.rejected is not None
    assert result.rejected.column("text").to_pylist() == [""]
    assert result.rejected.column(REASON).to_pylist() == ["empty"]
    assert stage.stats.as_dict()["dropped_empty"] == 1
    assert stage.stats.extra["tokens"] == sum(len(e) for e in kept)


def test_hf_tokenizer_json_and_its_eos(documents: list[tuple[str, str]]) -> None:
    path = VOCAB / "gpt-neo-tokenizer.json"
    peer = tokenizers.Tokenizer.from_file(str(path))
    eos = peer.token_to_id("<|endoftext|>")
    texts = real_texts(documents)[:30]
    result = Tokenize(tokenizer=str(path), keep_text=False).process(batch_of(texts))
    expected = [peer.encode(t, add_special_tokens=False).ids + [eos] for t in texts if t]
    assert result.kept.column("input_ids").to_pylist() == expected
    assert "text" not in result.kept.schema.names
    assert result.kept.schema.field("input_ids").type.value_type == pa.uint16()  # 50,280 ids


def test_bert_vocab_ends_documents_with_sep_and_explicit_eos_token() -> None:
    path = VOCAB / "bert_base_uncased_vocab.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    stage = Tokenize(tokenizer=str(path))
    assert stage.eos_id == lines.index("[SEP]")
    assert Tokenize(tokenizer=str(path), eos_token="[CLS]").eos_id == lines.index("[CLS]")
    with pytest.raises(ConfigError, match="no token '<nope>'"):
        Tokenize(tokenizer=str(path), eos_token="<nope>")


def test_no_eos_is_a_clear_error_unless_append_eos_is_off(tmp_path: object, documents: list[tuple[str, str]]) -> None:
    from pathlib import Path

    tok = train_bpe(texts=[t for _, t in documents[:3]], vocab_size=300, special_tokens=(), show_progress=False)
    path = Path(str(tmp_path)) / "tokenizer.json"
    tok.save(path)
    with pytest.raises(ConfigError, match="no end-of-document token"):
        Tokenize(tokenizer=str(path))
    result = Tokenize(tokenizer=str(path), append_eos=False).process(batch_of(["hello world", ""]))
    peer = tokenizers.Tokenizer.from_file(str(path))
    assert result.kept.column("input_ids").to_pylist() == [peer.encode("hello world").ids]


def test_tokenizer_is_loaded_once_per_process() -> None:
    path = str(VOCAB / "gpt2_encoder.json")
    first = load_tokenizer(path)
    stage = Tokenize(tokenizer=path)
    stage.process(batch_of(["one"]))
    stage.process(batch_of(["two"]))
    assert load_tokenizer(path) is first
    assert Tokenize(tokenizer=path)._tokenizer is first


def test_same_ids_however_the_documents_are_batched(documents: list[tuple[str, str]]) -> None:
    texts = real_texts(documents)
    stage = Tokenize(tokenizer=str(VOCAB / "gpt2_encoder.json"))
    whole = stage.process(batch_of(texts)).kept.column("input_ids").to_pylist()
    pieces = []
    for start in range(0, len(texts), 7):
        pieces += stage.process(batch_of(texts[start:start + 7])).kept.column("input_ids").to_pylist()
    assert pieces == whole
