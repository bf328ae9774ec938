"""The Tokenizer API beyond parity: errors on bad files, decoding, vocabulary look-ups."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tokpipe
from tests.conftest import VOCAB
from tests.parity.peers import tiktoken_encoding
from tests.parity.test_tiktoken_parity import ours

NEO = VOCAB / "gpt-neo-tokenizer.json"


def test_errors_share_one_base_class() -> None:
    for cls in (tokpipe.FormatError, tokpipe.PatternError, tokpipe.InvalidArgumentError, tokpipe.CorpusError):
        assert issubclass(cls, tokpipe.TokpipeError)
    assert issubclass(tokpipe.FormatError, ValueError)


def test_missing_file_is_file_not_found_with_its_name(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError) as info:
        tokpipe.Tokenizer.from_file(missing)
    assert info.value.filename == str(missing)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "invalid JSON"),
        (b"{\"model\": ", "invalid JSON"),
        (b"[1, 2]", "no `model`"),
        (b"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", "vocabulary is empty"),
        (b"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "vocabulary is empty"),
        # A ByteLevel pre-tokenizer makes it byte-level BPE, which needs the bytes (without one,
        # this is BPE over characters, which HF loads too).
        (b"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         b"\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", "byte-level"),
    ],
)
def test_corrupt_tokenizer_json_raises_format_error_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(tokpipe.FormatError, match=message) as info:
        tokpipe.Tokenizer.from_file(path)
    assert str(path) in str(info.value)


def test_truncated_tokenizer_json_raises_format_error(tmp_path: Path) -> None:
    data = NEO.read_bytes()
    for cut in (len(data) // 3, len(data) - 10):
        path = tmp_path / f"cut{cut}.json"
        path.write_bytes(data[:cut])
        with pytest.raises(tokpipe.FormatError):
            tokpipe.Tokenizer.from_file(path)


def test_merge_with_unknown_token_is_a_format_error(tmp_path: Path) -> None:
    data = json.loads(NEO.read_text(encoding="utf-8"))
    data["model"]["merges"][5] = "Ġ zzzunknown"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(tokpipe.FormatError, match="zzzunknown"):
        tokpipe.Tokenizer.from_file(path)


def test_corrupt_tiktoken_files(tmp_path: Path) -> None:
    good = gzip.decompress((VOCAB / "cl100k_base.tiktoken.gz").read_bytes())
    cases = {
        "truncated.gz": (VOCAB / "cl100k_base.tiktoken.gz").read_bytes()[:5000],
        "bad-base64.tiktoken": b"IQ== 0\n!!!notbase64 1\n",
        "bad-rank.tiktoken": b"IQ== zero\n",
        "empty.tiktoken": b"",
        "binary.tiktoken": bytes(range(256)) * 4,
        "no-bytes.tiktoken": good.split(b"\n")[300].split(b" ")[0] + b" 0\n",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(tokpipe.FormatError) as info:
            tokpipe.Tokenizer.from_tiktoken(path, pattern="cl100k")
        assert str(path) in str(info.value), name


def test_tiktoken_plain_and_gzip_load_the_same(tmp_path: Path) -> None:
    plain = tmp_path / "cl100k_base.tiktoken"
    plain.write_bytes(gzip.decompress((VOCAB / "cl100k_base.tiktoken.gz").read_bytes()))
    text = "Plain and gzip files load alike, 12345 times."
    assert tokpipe.Tokenizer.from_tiktoken(plain, pattern="cl100k").encode(text) == ours("cl100k").encode(text)


def test_bad_pattern_is_a_pattern_error() -> None:
    with pytest.raises(tokpipe.PatternError):
        tokpipe.Tokenizer.from_tiktoken(VOCAB / "cl100k_base.tiktoken.gz", pattern="(unclosed")


def test_custom_pattern_is_used(documents: list[tuple[str, str]]) -> None:
    # A custom pattern equal to a preset's regex text gives the same ids as tiktoken does with it.
    ref = tiktoken_encoding("cl100k")
    tok = tokpipe.Tokenizer.from_tiktoken(VOCAB / "cl100k_base.tiktoken.gz", pattern=r"\S+|\s+")
    import tiktoken

    custom = tiktoken.Encoding("custom", pat_str=r"\S+|\s+", mergeable_ranks=ref._mergeable_ranks, special_tokens={})
    for _, text in documents[:6]:
        assert tok.encode(text) == custom.encode_ordinary(text)


def test_decode_replaces_invalid_utf8_and_decode_bytes_is_exact() -> None:
    tok, ref = ours("cl100k"), tiktoken_encoding("cl100k")
    ids = tok.encode("é中🙂")
    # Cut a multi-byte character in half: the bytes are exact, the text gets U+FFFD.
    byte_ids = [tok.bytes_to_id(bytes([b])) for b in "🙂".encode()]
    assert tok.decode_bytes(byte_ids[:2]) == "🙂".encode()[:2]
    assert tok.decode(byte_ids[:2]) == ref.decode(byte_ids[:2])
    assert "\ufffd" in tok.decode(byte_ids[:2])
    assert tok.decode(ids) == "é中🙂"


def test_decode_unknown_id_is_an_error() -> None:
    tok = ours("cl100k")
    with pytest.raises(tokpipe.InvalidArgumentError, match="not in the vocabulary"):
        tok.decode([tok.vocab_size + 10])


def test_vocabulary_lookups() -> None:
    tok = ours("gpt2")
    assert tok.token_to_id("Ġthe") == 262
    assert tok.id_to_token(262) == "Ġthe"
    assert tok.token_bytes(262) == b" the"
    assert tok.bytes_to_id(b" the") == 262
    assert tok.id_to_token(50256) == "<|endoftext|>"
    assert tok.token_to_id("<|endoftext|>") == 50256
    assert tok.id_to_token(10**9) is None
    assert tok.token_to_id("no such token at all") is None


def test_allowed_special_must_be_all_or_a_collection() -> None:
    with pytest.raises(ValueError, match="all"):
        ours("cl100k").encode("x", allowed_special="everything")  # type: ignore[arg-type]


def test_encode_batch_accepts_any_iterable() -> None:
    tok = ours("cl100k")
    texts = ["one", "two three", ""]
    assert tok.encode_batch(iter(texts)) == [tok.encode(t) for t in texts]
