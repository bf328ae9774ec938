"""``Tokenizer.save_pretrained`` (``tokpipe/hf_dir.py``) against transformers itself: the folder
it writes loads with ``AutoTokenizer.from_pretrained`` and gives tokpipe's ids on real English,
Japanese and Chinese lines of the shared corpora, for every family, read from the shared vocab
files and trained here: byte-level BPE (GPT-2, cl100k, ``train_bpe``), WordPiece (BERT's
``vocab.txt``, ``train_wordpiece``), Unigram (sentencepiece's ``.model``, ``train_unigram``) and
sentencepiece BPE (a ``.model`` sentencepiece trains here). The expected roles are those of HF's
own files for each family, written out by hand; padding, ``return_tensors="np"``, the attention
mask and decoding are checked on HF's side.

Where the two differ on purpose, the difference is checked too: HF matches special-token strings
inside text, tokpipe reads them as text unless ``allowed_special`` names them; and a
sentencepiece Unigram loaded from a ``.model`` (or trained) picks sentencepiece's segmentation
among equally scored ones, HF's Unigram its own.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

import tokpipe
from tests.conftest import CORPORA, VOCAB
from tests.parity.peers import trained_bpe
from tokpipe.errors import InvalidArgumentError

TEXT = CORPORA / "text"


def _nonblank(lines: list[str]) -> list[str]:
    """Blank lines left out: HF's batch call and ours agree on them too, but they test nothing."""
    return [line for line in lines if line.strip()]


ENGLISH = _nonblank((TEXT / "tinyshakespeare.txt").read_text(encoding="utf-8").splitlines()[:400])
JAPANESE = _nonblank((TEXT / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines()[:200])
CHINESE = _nonblank([line for path in sorted((TEXT / "zh_notes").glob("*.txt"))[:6]
                     for line in path.read_text(encoding="utf-8").splitlines()])
LINES = ENGLISH + JAPANESE + CHINESE
#: Text to train on: another English book and the rest of the Japanese and Chinese text.
TRAIN = ((TEXT / "botchan.txt").read_text(encoding="utf-8").splitlines()
         + (TEXT / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines()[200:1200]
         + [line for path in sorted((TEXT / "zh_notes").glob("*.txt"))[6:]
            for line in path.read_text(encoding="utf-8").splitlines()])


def _spm_bpe(tmp: Path) -> tokpipe.Tokenizer:
    """A Llama-style sentencepiece BPE model (byte fallback, identity rules) that sentencepiece
    trains here on the shared text, loaded from its ``.model`` file."""
    path = tmp / "llama_like.model"
    path.write_bytes(trained_bpe("llama_like"))
    return tokpipe.Tokenizer.from_file(path)


# name -> (how to get the tokenizer, the roles HF's own files give that family). Byte-level
# BPE: GPT-2's files name <|endoftext|> bos, eos and unk; pad is ours (GPT-2 has none).
# sentencepiece: pad is <pad> where the vocabulary has one (the Unigram trained with pad_id=3),
# else <unk>.
GPT2_ROLES = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
              "pad_token": "<|endoftext|>"}
BERT_ROLES = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
              "mask_token": "[MASK]"}
SPM_ROLES = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}
CASES: dict[str, tuple[Callable[[Path], tokpipe.Tokenizer], dict[str, str]]] = {
    "gpt2": (lambda _: tokpipe.Tokenizer.from_file(VOCAB / "gpt2_encoder.json"), GPT2_ROLES),
    "cl100k": (lambda _: tokpipe.Tokenizer.from_file(VOCAB / "cl100k_base.tiktoken.gz"), GPT2_ROLES),
    "train_bpe": (lambda _: tokpipe.train_bpe(texts=TRAIN, vocab_size=3000, show_progress=False), GPT2_ROLES),
    "bert": (lambda _: tokpipe.Tokenizer.from_file(VOCAB / "bert_base_uncased_vocab.txt"), BERT_ROLES),
    "train_wordpiece": (lambda _: tokpipe.train_wordpiece(texts=TRAIN, vocab_size=3000, show_progress=False),
                        BERT_ROLES),
    "spm_unigram": (lambda _: tokpipe.Tokenizer.from_file(VOCAB / "spm_ja_unigram_8000.model"), SPM_ROLES),
    "train_unigram": (lambda _: tokpipe.train_unigram(texts=TRAIN, vocab_size=3000, pad_id=3, show_progress=False),
                      {**SPM_ROLES, "pad_token": "<pad>"}),
    "spm_bpe": (_spm_bpe, SPM_ROLES),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[tokpipe.Tokenizer, Path]]:
    """The tokenizer of a case and the folder its ``save_pretrained`` wrote (once per module)."""
    root = tmp_path_factory.mktemp("hf")

    @functools.lru_cache(maxsize=None)
    def get(name: str) -> tuple[tokpipe.Tokenizer, Path]:
        tok = CASES[name][0](root)
        tok.save_pretrained(root / name)
        return tok, root / name

    return get


@functools.lru_cache(maxsize=None)
def auto(folder: Path) -> Any:
    with warnings.catch_warnings():
        # transformers' own deprecation notices are not what is tested here.
        warnings.simplefilter("ignore")
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(folder))


@pytest.mark.parametrize("name", list(CASES))
def test_autotokenizer_loads_the_family_roles(name: str, saved: Any) -> None:
    tok, folder = saved(name)
    hf = auto(folder)
    expected = CASES[name][1]
    for role in ("bos_token", "eos_token", "unk_token", "pad_token", "cls_token", "sep_token", "mask_token"):
        assert getattr(hf, role) == expected.get(role), role
        if role in expected:
            assert getattr(hf, role + "_id") == tok.token_to_id(expected[role]), role
    assert hf.model_max_length == (512 if name in ("bert", "train_wordpiece") else 2048)
    assert sorted(path.name for path in folder.iterdir()) == [
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]


@pytest.mark.parametrize("add_special_tokens", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_autotokenizer_gives_tokpipe_ids(name: str, add_special_tokens: bool, saved: Any) -> None:
    tok, folder = saved(name)
    hf = auto(folder)
    theirs = hf(LINES, add_special_tokens=add_special_tokens)["input_ids"]
    # tokpipe reading the same tokenizer.json, special-token strings matched as HF matches
    # them: every id the same.
    from_file = tokpipe.Tokenizer.from_file(folder / "tokenizer.json")
    assert from_file.encode_batch(LINES, allowed_special="all", add_special_tokens=add_special_tokens) == theirs
    # The tokenizer that was saved, with its defaults: the same ids but where a line holds a
    # special-token string, which HF matches (one Chinese line quotes BERT's "[UNK]").
    ours = tok.encode_batch(LINES, add_special_tokens=add_special_tokens)
    specials = [str(token) for token in hf.all_special_tokens]
    differing = [LINES[i] for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert all(any(s in line for s in specials) for line in differing), differing
    assert len(differing) <= 1


@pytest.mark.parametrize("name", list(CASES))
def test_padding_to_numpy_with_the_pad_token_and_mask(name: str, saved: Any) -> None:
    import numpy as np

    tok, folder = saved(name)
    hf = auto(folder)
    batch = [ENGLISH[0], JAPANESE[1], CHINESE[2], ENGLISH[3]]  # lengths differ
    unpadded = hf(batch)["input_ids"]
    padded = hf(batch, padding=True, return_tensors="np")
    longest = max(map(len, unpadded))
    assert len({len(ids) for ids in unpadded}) > 1
    assert isinstance(padded["input_ids"], np.ndarray)
    assert padded["input_ids"].shape == padded["attention_mask"].shape == (len(batch), longest)
    pad_id = tok.token_to_id(CASES[name][1]["pad_token"])
    assert hf.pad_token_id == pad_id
    for row, ids in enumerate(unpadded):
        assert padded["input_ids"][row].tolist() == ids + [pad_id] * (longest - len(ids))
        assert padded["attention_mask"][row].tolist() == [1] * len(ids) + [0] * (longest - len(ids))


@pytest.mark.parametrize("name", list(CASES))
def test_hf_decodes_as_tokpipe(name: str, saved: Any) -> None:
    tok, folder = saved(name)
    hf = auto(folder)
    from_file = tokpipe.Tokenizer.from_file(folder / "tokenizer.json")
    for line, ids in zip(LINES, hf(LINES, add_special_tokens=False)["input_ids"]):
        decoded = hf.decode(ids, skip_special_tokens=True)
        assert decoded == from_file.decode(ids), line
        if name in ("gpt2", "cl100k", "train_bpe"):
            # Byte-level BPE is lossless, in HF too (clean_up_tokenization_spaces is off).
            assert decoded == line == tok.decode(ids)


def test_left_padding_and_a_given_length(tmp_path: Path) -> None:
    tok = tokpipe.Tokenizer.from_file(VOCAB / "gpt2_encoder.json")
    tok.save_pretrained(tmp_path, model_max_length=1024, padding_side="left")
    hf = auto(tmp_path)
    assert hf.model_max_length == 1024
    padded = hf(["a b c d", "e"], padding=True)
    assert padded["input_ids"][1] == [50256] * 3 + tok.encode("e")
    assert padded["attention_mask"][1] == [0, 0, 0, 1]


def test_named_roles_replace_the_defaults(tmp_path: Path) -> None:
    tok = tokpipe.Tokenizer.from_file(VOCAB / "cl100k_base.tiktoken.gz")
    tok.save_pretrained(tmp_path, bos_token="<|fim_prefix|>", pad_token="<|fim_suffix|>")
    hf = auto(tmp_path)
    assert (hf.bos_token, hf.eos_token, hf.pad_token) == ("<|fim_prefix|>", "<|endoftext|>", "<|fim_suffix|>")
    assert hf.pad_token_id == 100260
    # The other special tokens are special to HF too (skipped when decoding).
    assert set(hf.all_special_tokens) == set(tok.special_tokens)
    assert hf.decode([100258, 40, 100276], skip_special_tokens=True) == tok.decode([40])


def test_a_named_token_outside_the_vocabulary_is_an_error_before_writing(tmp_path: Path) -> None:
    tok = tokpipe.Tokenizer.from_file(VOCAB / "bert_base_uncased_vocab.txt")
    folder = tmp_path / "out"
    with pytest.raises(InvalidArgumentError, match=r"^save_pretrained: pad_token '<pad>' is not in the vocabulary$"):
        tok.save_pretrained(folder, pad_token="<pad>")
    with pytest.raises(InvalidArgumentError, match="padding_side must be 'right' or 'left'"):
        tok.save_pretrained(folder, padding_side="middle")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="model_max_length must be a positive integer"):
        tok.save_pretrained(folder, model_max_length=0)
    assert not folder.exists()
    with pytest.raises(InvalidArgumentError) as info:
        tok.save_pretrained(folder, eos_token="x" * 10_000)
    assert len(str(info.value)) < 120


def test_tokenizer_json_is_the_saved_file_unless_a_role_needs_adding(tmp_path: Path) -> None:
    # GPT-2's and BERT's roles are special tokens already: save's bytes, untouched.
    for name in ("gpt2_encoder.json", "bert_base_uncased_vocab.txt"):
        tok = tokpipe.Tokenizer.from_file(VOCAB / name)
        tok.save(tmp_path / "plain.json")
        tok.save_pretrained(tmp_path / name)
        assert (tmp_path / name / "tokenizer.json").read_bytes() == (tmp_path / "plain.json").read_bytes()
    # sentencepiece's <unk> is an ordinary piece; HF's converters list it as a special added token.
    tok = tokpipe.Tokenizer.from_file(VOCAB / "spm_botchan_unigram_1000.model")
    tok.save_pretrained(tmp_path / "spm")
    added = json.loads((tmp_path / "spm" / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    assert [(t["id"], t["content"], t["special"]) for t in added] == [(0, "<unk>", True), (1, "<s>", True),
                                                                      (2, "</s>", True)]
    config = json.loads((tmp_path / "spm" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert sorted(config["added_tokens_decoder"]) == ["0", "1", "2"]


# -- special-token strings inside text -------------------------------------------------------------

SPECIAL_TEXT = {
    "gpt2": "Hello<|endoftext|> world",
    "bert": "the [SEP] token and [MASK]",
    "spm_unigram": "吾輩は</s>猫である<s>",
    "spm_bpe": "one</s> two <s>three",
}


@pytest.mark.parametrize("name", list(SPECIAL_TEXT))
def test_hf_matches_special_strings_and_allowed_special_all_does_too(name: str, saved: Any) -> None:
    tok, folder = saved(name)
    hf = auto(folder)
    text = SPECIAL_TEXT[name]
    theirs = hf(text, add_special_tokens=False)["input_ids"]
    special_ids = set(tok.special_tokens.values())
    assert special_ids & set(theirs)  # HF made the strings special tokens
    assert not special_ids & set(tok.encode(text))  # tokpipe's default reads them as text
    assert tok.encode(text, allowed_special="all") == theirs
    # And HF reads them as text when asked to, as tokpipe does by default...
    as_text = hf(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert as_text == tokpipe.Tokenizer.from_file(folder / "tokenizer.json").encode(text)
    if name == "spm_unigram":
        # ...but HF's Unigram scores <s> and </s> as ordinary pieces (score 0), so its lattice
        # still makes them from that text, as tokpipe does reading a Unigram tokenizer.json;
        # sentencepiece, and tokpipe reading the .model, never make a control piece from text.
        assert special_ids & set(as_text) and as_text != tok.encode(text)
    else:
        assert as_text == tok.encode(text)


def test_a_role_that_was_an_ordinary_piece_is_matched_by_the_saved_file(saved: Any) -> None:
    # sentencepiece's <unk> is no special token of a .model; save_pretrained makes it one, as HF
    # does, so allowed_special="all" matches it in the saved tokenizer.json only.
    tok, folder = saved("spm_unigram")
    hf = auto(folder)
    text = "猫 <unk> 犬"
    theirs = hf(text, add_special_tokens=False)["input_ids"]
    assert 0 in theirs and 0 not in tok.encode(text, allowed_special="all")
    assert tokpipe.Tokenizer.from_file(folder / "tokenizer.json").encode(text, allowed_special="all") == theirs


def test_equally_likely_unigram_segmentations_follow_the_file_read() -> None:
    # A Unigram from a .model (or trained) gives sentencepiece's ids; read from tokenizer.json,
    # HF's. Where two segmentations score the same, the two libraries pick differently: this
    # tokenizer cuts a run of 40 hyphens into 13 + 13 + 1 + 13 (sentencepiece) or 1 + 13 + 13 +
    # 13 (HF), and save_pretrained's folder gives HF's choice.
    import sentencepiece as spm

    lines = ((TEXT / "botchan.txt").read_text(encoding="utf-8").splitlines()[:3000]
             + (TEXT / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines()[:200])
    tok = tokpipe.train_unigram(texts=lines, vocab_size=1000, character_coverage=0.98, show_progress=False)
    text = "-" * 40
    peer = spm.SentencePieceProcessor(model_proto=tok.sentencepiece_bytes())
    hf_ids = tokpipe.Tokenizer.from_str(tok.to_str()).encode(text)
    assert tok.encode(text) == peer.encode(text) != hf_ids
    assert sorted(tok.encode(text)) == sorted(hf_ids)  # the same pieces in another order: a tie
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from tokenizers import Tokenizer as HfTokenizer
    assert HfTokenizer.from_str(tok.to_str()).encode(text, add_special_tokens=False).ids == hf_ids


# -- object storage ---------------------------------------------------------------------------------

def test_save_pretrained_to_a_url_writes_the_local_files(bucket: str, tmp_path: Path) -> None:
    from tests.s3_server import bucket_filesystem

    tok = tokpipe.Tokenizer.from_file(VOCAB / "spm_botchan_unigram_1000.model")
    tok.save_pretrained(tmp_path / "local")
    tok.save_pretrained(f"s3://{bucket}/models/tok")
    fs = bucket_filesystem()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert fs.cat_file(f"{bucket}/models/tok/{name}") == (tmp_path / "local" / name).read_bytes(), name
