"""``tokpipe train-unigram`` through the real console entry point."""

from __future__ import annotations

import io
from pathlib import Path

import sentencepiece as spm
from tokenizers import Tokenizer as HfTokenizer

from tests.cli.test_train import run
from tests.conftest import CORPORA

BOTCHAN = CORPORA / "text" / "botchan.txt"
WAGAHAIWA = CORPORA / "text" / "wagahaiwa_nekodearu.txt"


def test_model_output_encodes_like_sentencepiece_trained_alike(tmp_path: Path) -> None:
    model, json_path = tmp_path / "m.model", tmp_path / "tokenizer.json"
    result = run("train-unigram", str(BOTCHAN), str(WAGAHAIWA), "--vocab-size", "3000", "--byte-fallback",
                 "--user-defined-symbol", "<sep>", "--user-defined-symbol", "New York", "--pad-id", "3",
                 "-o", str(json_path), "--model-file", str(model))
    assert result.returncode == 0, result.stderr
    for row in ("documents", "vocabulary", "output", "sentencepiece model"):
        assert row in result.stderr
    ours = spm.SentencePieceProcessor(model_file=str(model))
    hf = HfTokenizer.from_file(str(json_path))
    # sentencepiece's trainer on the same files and options: the same specs and meta pieces.
    buf = io.BytesIO()
    lines = [line for p in (BOTCHAN, WAGAHAIWA) for line in p.read_text(encoding="utf-8").splitlines()]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, model_type="unigram",
                                   vocab_size=3000, byte_fallback=True, user_defined_symbols=["<sep>", "New York"],
                                   pad_id=3, minloglevel=2)
    ref = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    assert ours.get_piece_size() == ref.get_piece_size() == hf.get_vocab_size() == 3000
    for i in range(3 + 1 + 2 + 256):  # <unk> <s> </s> <pad>, the two symbols, the bytes
        assert ours.id_to_piece(i) == ref.id_to_piece(i), i
    text = "Botchan<sep>said, New York 吾輩は猫である。\U0001F600"
    assert ours.encode(text, out_type=str).count("<sep>") == 1
    assert ours.encode(text, out_type=str)[-4:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text)


def test_dot_model_output_is_a_sentencepiece_model(tmp_path: Path) -> None:
    out = tmp_path / "u.model"
    result = run("train-unigram", str(BOTCHAN), "--vocab-size", "800", "--normalization", "identity",
                 "--no-split-by-whitespace", "--split-digits", "-q", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    sp = spm.SentencePieceProcessor(model_file=str(out))
    assert sp.get_piece_size() == 800
    pieces = [sp.id_to_piece(i) for i in range(800)]
    # Without whitespace splitting, some piece holds ▁ inside; with split digits, no piece
    # holds two digits.
    assert any("\u2581" in p[1:] for p in pieces)
    assert not any(sum(c.isdigit() for c in p) > 1 for p in pieces)


def test_same_model_whatever_the_thread_count(tmp_path: Path) -> None:
    outputs = []
    for threads in (1, 2):
        out = tmp_path / f"t{threads}.model"
        result = run("train-unigram", str(CORPORA / "text"), "--vocab-size", "6000", "-q", "-o", str(out),
                     threads=threads)
        assert result.returncode == 0, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    result = run("train-unigram", str(WAGAHAIWA), "--vocab-size", "100", "-o", str(out))
    assert result.returncode == 2
    assert "required characters" in result.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    result = run("train-unigram", str(empty), "-o", str(out))
    assert result.returncode == 2
    assert "no text" in result.stderr
    result = run("train-unigram", str(BOTCHAN), "--normalization", "nfc", "-o", str(out))
    assert result.returncode == 2
    assert "nfc" in result.stderr
    result = run("train-unigram", str(tmp_path / "missing.txt"), "-o", str(out))
    assert result.returncode == 2
    assert not out.exists()


def test_skipped_sentences_show_in_the_summary(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text(BOTCHAN.read_text(encoding="utf-8") + "x" * 5000 + "\n", encoding="utf-8")
    result = run("train-unigram", str(corpus), "--vocab-size", "500", "-o", str(tmp_path / "t.json"))
    assert result.returncode == 0, result.stderr
    assert ["set", "aside:", "sentence_too_long", "1"] in [line.split() for line in result.stderr.splitlines()]
