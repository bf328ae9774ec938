"""The Tokenizer API beyond parity: errors on bad files, decoding, vocabulary look-ups."""

from __future__ import annotations

import gc
import gzip
import json
import multiprocessing
import weakref
from pathlib import Path

import pytest

import tokpipe
from tests.conftest import VOCAB
from tests.test_loader_fuzz import added_token, byte_level_bpe_json, unigram_json, wordpiece_json
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


@pytest.mark.parametrize("bad", [-1, 2**32, -(2**70)])
def test_decode_an_id_outside_u32_is_a_tokpipe_error(bad: int) -> None:
    # These never reach the vocabulary: converting them to token ids raised OverflowError.
    tok = ours("cl100k")
    for decode in (tok.decode, tok.decode_bytes):
        with pytest.raises(tokpipe.InvalidArgumentError, match=rf"^token id {bad} is not in the vocabulary"):
            decode([100, bad])
    assert tok.id_to_token(bad) is None and tok.token_bytes(bad) is None


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


def test_id_lists_are_left_out_of_the_cycle_collector_yet_keep_what_they_hold() -> None:
    tok = ours("cl100k")
    ids = tok.encode("hello world")
    batch = tok.encode_batch(["one", "two three"], num_threads=2)
    assert ids == [15339, 1917]  # tiktoken's ids for it
    assert not gc.is_tracked(ids) and not any(gc.is_tracked(row) for row in batch)

    class Held:
        pass

    # A list the caller fills with objects still keeps them alive through a collection.
    held = Held()
    probe = weakref.ref(held)
    ids.append(held)
    del held
    gc.collect()
    assert probe() is ids[-1]


def _encode_in_forked_child(texts: list[str], expected: list[list[int]]) -> None:
    """Run in a forked child: the parent's pool of two threads did not come along."""
    if ours("cl100k").encode_batch(texts, num_threads=2) != expected:
        raise SystemExit(1)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_encodes_with_the_thread_count_its_parent_used() -> None:
    """Pools are kept per thread count, but a forked child (``datasets.map(num_proc=...)``)
    inherits none of their threads: given the parent's pool, its batch would wait forever.
    The timeout only tells that wait from an answer; a child encodes two texts in well
    under a second."""
    texts = ["one document", "another, longer document"]
    expected = ours("cl100k").encode_batch(texts, num_threads=2)
    child = multiprocessing.get_context("fork").Process(target=_encode_in_forked_child, args=(texts, expected))
    child.start()
    child.join(timeout=300)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child's encode_batch(num_threads=2) never returned")
    assert child.exitcode == 0


# -- loading untrusted files: ids, sizes and messages -------------------------------------------

def _write_json(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_added_token_id_past_u32_is_refused_not_wrapped(tmp_path: Path) -> None:
    # 2**32 + 300 was read as 300.
    data = byte_level_bpe_json()
    data["added_tokens"].append(added_token("<wrap>", 2**32 + 300))
    with pytest.raises(tokpipe.FormatError, match=r'added_tokens\[3\] "<wrap>" has the id 4294967596, not an integer'):
        tokpipe.Tokenizer.from_file(_write_json(tmp_path, data))


def test_sparse_ids_within_the_limit_load(tmp_path: Path) -> None:
    # Ids may leave gaps (cl100k's special tokens do): up to twice the vocabulary plus 2**20.
    data = byte_level_bpe_json()
    size = len(data["model"]["vocab"]) + len(data["added_tokens"]) + 1
    data["added_tokens"].append(added_token("<far>", 2 * size + 2**20 - 1))
    tok = tokpipe.Tokenizer.from_file(_write_json(tmp_path, data))
    assert tok.encode("a<far>", allowed_special="all") == [tok.token_to_id("a"), 2 * size + 2**20 - 1]
    data["added_tokens"][-1]["id"] += 1
    with pytest.raises(tokpipe.FormatError, match=rf'"<far>" has id {2 * size + 2**20}, far past the vocabulary'):
        tokpipe.Tokenizer.from_file(_write_json(tmp_path, data))


@pytest.mark.parametrize("make", [wordpiece_json, unigram_json, byte_level_bpe_json])
@pytest.mark.parametrize("bad_id, message", [
    (2**32, "has the malformed id 4294967296"),
    (-1, "has the malformed id -1"),
    (10**9, "has id 1000000000, which is no token of the vocabulary"),
])
def test_post_processor_ids_must_be_tokens(tmp_path: Path, make, bad_id: int, message: str) -> None:
    data = make()
    first = data["post_processor"]["single"][0]["SpecialToken"]["id"]
    data["post_processor"]["special_tokens"][first]["ids"] = [bad_id]
    with pytest.raises(tokpipe.FormatError, match=rf"post_processor: special token .*{message}"):
        tokpipe.Tokenizer.from_file(_write_json(tmp_path, data))


@pytest.mark.parametrize("part, value, message", [
    ("decoder", {"type": "NoSuchDecoder"}, 'decoder: "NoSuchDecoder" is not supported with byte-level BPE'),
    ("decoder", {"type": "Metaspace", "replacement": "▁"}, 'decoder: "Metaspace" is not supported'),
    ("post_processor", {"type": "NoSuchProcessor"}, 'post_processor: unknown type "NoSuchProcessor"'),
    ("post_processor", {"type": "RobertaProcessing", "sep": ["</s>", 2**32], "cls": ["<s>", 0]},
     "RobertaProcessing sep has the malformed id 4294967296"),
])
def test_byte_level_bpe_decoder_and_post_processor_are_checked(tmp_path: Path, part: str, value: dict,
                                                                 message: str) -> None:
    # They were not read at all; HF refuses such files.
    data = byte_level_bpe_json()
    data[part] = value
    with pytest.raises(tokpipe.FormatError, match=message):
        tokpipe.Tokenizer.from_file(_write_json(tmp_path, data))


def test_byte_level_bpe_keeps_loading_with_hf_post_processors(tmp_path: Path) -> None:
    data = byte_level_bpe_json()
    for post in (None, {"type": "ByteLevel", "trim_offsets": False},
                 {"type": "RobertaProcessing", "sep": ["</s>", 266], "cls": ["<s>", 265]},
                 {"type": "Sequence", "processors": [{"type": "ByteLevel"}, data["post_processor"]]}):
        data["post_processor"] = post
        assert tokpipe.Tokenizer.from_file(_write_json(tmp_path, data)).encode("ab") == [256]


def test_long_tokens_are_cut_short_in_messages(tmp_path: Path) -> None:
    data = byte_level_bpe_json()
    data["added_tokens"].append({**added_token("y" * 5_000_000, 300), "lstrip": True})
    with pytest.raises(tokpipe.FormatError) as info:
        tokpipe.Tokenizer.from_file(_write_json(tmp_path, data))
    message = str(info.value)
    assert len(message) < 300
    assert f'{tmp_path / "tokenizer.json"}: added token "{"y" * 60}"… (5000000 bytes) sets lstrip' in message
    with pytest.raises(tokpipe.InvalidArgumentError) as info:
        tokpipe.Tokenizer.from_tiktoken(VOCAB / "cl100k_base.tiktoken.gz", special_tokens={"s" * 5_000_000: 5})
    assert len(str(info.value)) < 300 and "(5000000 bytes) has id 5" in str(info.value)


def test_gzip_that_unpacks_past_the_limit_is_refused(tmp_path: Path) -> None:
    # 100 MiB of empty lines in 100 KB: more than 64 MiB, and more than 100 times the file.
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    path = tmp_path / "bomb.tiktoken.gz"
    path.write_bytes(packer.compress(b"\n" * (100 << 20)) + packer.flush())
    with pytest.raises(tokpipe.FormatError, match=r"gzip data unpacks to more than 67108864 bytes, the limit for"):
        tokpipe.Tokenizer.from_tiktoken(path)


# -- the one loader: Tokenizer.from_file tells every format by its content ---------------------

@pytest.mark.parametrize("head, kind", [
    (b'{"version": "1.0", "model": {}}', "tokenizer.json"),
    (b'\xef\xbb\xbf \n {"model": {"type": "BPE"}}', "tokenizer.json"),
    (b'{"!": 0, "\\"": 1}', "gpt2-encoder"),
    (b'{\n  "\\u0120the": 262\n}', "gpt2-encoder"),
    (b"\n\x0f\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02", "sentencepiece"),
    (b"IQ== 0\nIg== 1\n", "tiktoken"),
    (b"#version: 0.2\n\xc4\xa0 t\n", "gpt2-merges"),
    (b"[PAD]\n[UNK]\n##ing\n\xe4\xb8\xad\n", "vocab.txt"),
    (b"", None),
    (b"[1, 2]", None),
    (b"\xff\xfe not utf-8\n", None),
])
def test_detect_tells_each_kind_by_its_content(head: bytes, kind: str | None) -> None:
    from tokpipe.tokenizer_files import detect

    assert detect(head, whole=True) == kind


def test_detect_reads_only_whole_lines_of_a_cut_head() -> None:
    from tokpipe.tokenizer_files import detect

    # The last line of a 64 KiB head may stop mid-token (here mid-character): it is not judged.
    assert detect("[PAD]\n中文\n".encode()[:-2], whole=False) == "vocab.txt"
    assert detect(b"IQ== 0\nIg== 1\nIw", whole=False) == "tiktoken"


def test_from_file_takes_a_tiktoken_pattern_and_refuses_it_for_other_files(tmp_path: Path) -> None:
    plain = tmp_path / "ranks.tiktoken"
    plain.write_bytes(gzip.decompress((VOCAB / "cl100k_base.tiktoken.gz").read_bytes()))
    text = "Custom patterns split differently: 12345 tokens."
    given = tokpipe.Tokenizer.from_file(plain, pattern=r"\S+|\s+")
    assert given.encode(text) == tokpipe.Tokenizer.from_tiktoken(plain, pattern=r"\S+|\s+").encode(text)
    with pytest.raises(tokpipe.InvalidArgumentError, match="pattern"):
        tokpipe.Tokenizer.from_file(plain)  # the name says no pattern
    with pytest.raises(tokpipe.InvalidArgumentError, match="tiktoken"):
        tokpipe.Tokenizer.from_file(NEO, pattern="cl100k")


def test_from_file_refuses_a_gzip_vocab_txt_naming_the_file(tmp_path: Path) -> None:
    packed = tmp_path / "vocab.txt.gz"
    packed.write_bytes(gzip.compress((VOCAB / "bert_base_uncased_vocab.txt").read_bytes()))
    with pytest.raises(tokpipe.FormatError, match="unzip") as info:
        tokpipe.Tokenizer.from_file(packed)
    assert str(packed) in str(info.value)


def test_from_file_finds_gpt2s_pair_from_either_file(tmp_path: Path) -> None:
    for name in ("x_encoder.json", "x_vocab.bpe"):
        source = VOCAB / name.replace("x_", "gpt2_")
        (tmp_path / name).write_bytes(source.read_bytes())
    text = "GPT-2's pair, 'twas found either way."
    ref = tiktoken_encoding("gpt2").encode_ordinary(text)
    assert tokpipe.Tokenizer.from_file(tmp_path / "x_encoder.json").encode(text) == ref
    assert tokpipe.Tokenizer.from_file(tmp_path / "x_vocab.bpe").encode(text) == ref
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "encoder.json").write_bytes((VOCAB / "gpt2_encoder.json").read_bytes())
    with pytest.raises(tokpipe.FormatError, match="vocab.bpe"):
        tokpipe.Tokenizer.from_file(lone / "encoder.json")
