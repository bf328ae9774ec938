"""Unigram ``tokenizer.json`` files move both ways between HF ``tokenizers`` and us with the same
ids: the files HF's own converters write for sentencepiece models (``tokenizers``'
``SentencePieceUnigramTokenizer.from_spm`` and transformers' ``SpmConverter``, legacy and not,
and its ``build_tokenizer_from_spm_proto``), for the two shared models and a byte-fallback model
with user-defined symbols trained here; files we write, from those and from ``.model`` files;
and ``.model`` files written from HF files, which sentencepiece loads.

The reference is always HF loading the file's text (what a user of a ``tokenizer.json`` gets):
HF's JSON reader can round a score by one unit in the last place, and near-tied segmentations
follow that rounding, so the in-memory converter output is not the reference.
"""

from __future__ import annotations

import functools
import types
import warnings
from pathlib import Path

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st
from sentencepiece import sentencepiece_model_pb2 as model_pb2
from tokenizers import Tokenizer as HfTokenizer

import tokpipe
from tests.conftest import VOCAB
from tests.parity.peers import USER_DEFINED, trained

MODELS = ["spm_botchan_unigram_1000.model", "spm_ja_unigram_8000.model", "trained:bytes_user_defined"]
SHAPES = ["from_spm", "converter_legacy", "converter", "proto_legacy", "proto"]


def _model_path(name: str, tmp: Path) -> Path:
    if name.startswith("trained:"):
        path = tmp / (name.split(":")[1] + ".model")
        if not path.exists():
            path.write_bytes(trained(name.split(":")[1]))
        return path
    return VOCAB / name


@functools.lru_cache(maxsize=None)
def hf_json(name: str, shape: str, tmp: Path) -> str:
    """The tokenizer.json text HF's converter `shape` writes for sentencepiece model `name`."""
    path = str(_model_path(name, tmp))
    proto = model_pb2.ModelProto()
    proto.ParseFromString(Path(path).read_bytes())
    with warnings.catch_warnings():
        # transformers warns that its old converters drop byte fallback; that is their output.
        warnings.simplefilter("ignore")
        from transformers.convert_slow_tokenizer import SpmConverter

        if shape == "from_spm":
            import sys

            from tokenizers.implementations import SentencePieceUnigramTokenizer

            sys.modules.setdefault("sentencepiece_model_pb2", model_pb2)
            return SentencePieceUnigramTokenizer.from_spm(path)._tokenizer.to_str()
        if shape.startswith("converter"):
            original = types.SimpleNamespace(vocab_file=path, legacy=shape.endswith("legacy"), add_prefix_space=True)
            return SpmConverter(original).converted().to_str()
        vocab = [(p.piece, p.score) for p in proto.pieces]
        return SpmConverter.build_tokenizer_from_spm_proto(proto, vocab, legacy=shape.endswith("legacy")).to_str()


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("unigram_models")


def hf_ids(hf: HfTokenizer, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", MODELS)
def test_hf_files_encode_and_decode_like_hf(name: str, shape: str, tmp: Path, documents: list[tuple[str, str]]) -> None:
    text = hf_json(name, shape, tmp)
    hf = HfTokenizer.from_str(text)
    ours = tokpipe.Tokenizer.from_str(text)
    assert ours.model_type == "Unigram"
    for doc_name, doc in documents:
        ids = hf_ids(hf, doc)
        # HF matches its added tokens (<s>, </s>, user-defined symbols) wherever they are.
        assert ours.encode(doc, allowed_special="all") == ids, doc_name
        assert ours.decode(ids) == hf.decode(ids), doc_name


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", MODELS)
def test_our_tokenizer_json_loads_in_hf_and_encodes_alike(name: str, shape: str, tmp: Path,
                                                          documents: list[tuple[str, str]]) -> None:
    ours = tokpipe.Tokenizer.from_str(hf_json(name, shape, tmp))
    path = tmp / f"{name.replace(':', '_')}-{shape}.json"
    ours.save(path)
    hf = HfTokenizer.from_file(str(path))
    for doc_name, doc in documents:
        assert hf_ids(hf, doc) == ours.encode(doc, allowed_special="all"), doc_name


@pytest.mark.parametrize("shape", ["from_spm", "converter", "proto"])
@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(list(" \t\n\u3000\u00a0x yz.,日本語テキスト\uff21\u0301\U0001f600\u13a0") + USER_DEFINED
                                      + ["  ", "<s>", "</s>", "▁"]), max_size=20))
def test_generated_text_like_hf(shape: str, parts: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.getbasetemp() / "unigram_models_gen"
    tmp.mkdir(exist_ok=True)
    text = "".join(parts)
    for name in (MODELS[1], MODELS[2]):
        data = hf_json(name, shape, tmp)
        hf = HfTokenizer.from_str(data)
        ours = tokpipe.Tokenizer.from_str(data)
        assert ours.encode(text, allowed_special="all") == hf_ids(hf, text), name
        ids = hf_ids(hf, text)
        assert ours.decode(ids) == hf.decode(ids)


@pytest.mark.parametrize("name", MODELS)
def test_model_written_as_tokenizer_json_encodes_like_sentencepiece_in_hf(name: str, tmp: Path,
                                                                          documents: list[tuple[str, str]]) -> None:
    path = _model_path(name, tmp)
    peer = spm.SentencePieceProcessor(model_file=str(path))
    ours = tokpipe.Tokenizer.from_sentencepiece(path)
    out = tmp / f"{path.stem}.json"
    ours.save(out)
    hf = HfTokenizer.from_file(str(out))
    reloaded = tokpipe.Tokenizer.from_file(out)
    for doc_name, doc in documents:
        ids = hf_ids(hf, doc)
        assert reloaded.encode(doc, allowed_special="all") == ids, doc_name
        # HF's ids are sentencepiece's here. On a model trained here they differ on 3 of the
        # documents, where segmentations tie: HF sums scores per word in f64, sentencepiece
        # over the text in f32, and the two break those ties apart.
        if not name.startswith("trained:"):
            assert ids == peer.encode(doc), doc_name
    # <s> ... </s> when special tokens are asked for, in HF too.
    assert hf.encode("Hello").ids == ours.encode("Hello", add_special_tokens=True)


@pytest.mark.parametrize("name", MODELS)
def test_hf_file_written_as_model_encodes_alike_in_sentencepiece(name: str, tmp: Path,
                                                                 documents: list[tuple[str, str]]) -> None:
    # transformers' newest converter spells sentencepiece's normalizer in HF steps; written back
    # as a .model it is sentencepiece's normalizer again, and sentencepiece's ids come out.
    ours = tokpipe.Tokenizer.from_str(hf_json(name, "proto_legacy", tmp))
    out = tmp / f"{name.replace(':', '_')}-from-json.model"
    ours.save_sentencepiece(out)
    peer = spm.SentencePieceProcessor(model_file=str(out))
    original = spm.SentencePieceProcessor(model_file=str(_model_path(name, tmp)))
    for doc_name, doc in documents:
        assert peer.encode(doc) == original.encode(doc), doc_name
    assert tokpipe.Tokenizer.from_sentencepiece(out).encode("New York <sep> 日本") == original.encode("New York <sep> 日本")


def test_unigram_json_errors_name_the_problem(tmp_path: Path) -> None:
    cases = {
        '{"model": {"type": "Unigram", "vocab": [], "unk_id": 0}}': "vocabulary is empty",
        '{"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": null}}': "without unk_id",
        '{"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": 5}}': "past the vocabulary",
        '{"model": {"type": "Unigram", "vocab": [["<unk>"]], "unk_id": 0}}': r"vocab\[0\]",
        '{"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": 0}, '
        '"normalizer": {"type": "Precompiled", "precompiled_charsmap": "!!"}}': "base64",
        '{"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": 0}, '
        '"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}}': "prepend_scheme",
        '{"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": 0}, '
        '"pre_tokenizer": {"type": "Whitespace"}}': "not supported",
    }
    for text, message in cases.items():
        path = tmp_path / "tokenizer.json"
        path.write_text(text)
        with pytest.raises(tokpipe.FormatError, match=message):
            tokpipe.Tokenizer.from_file(path)
