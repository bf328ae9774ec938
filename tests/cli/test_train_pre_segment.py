"""``--pre-segment jieba`` on ``tokpipe train-bpe``, ``train-unigram`` and ``tokpipe train``,
through the real console entry point, on the shared Chinese notes."""

from __future__ import annotations

import re
from pathlib import Path

import jieba
import sentencepiece as spm
import tokenizers

from tests.cli.test_train import run
from tests.conftest import CORPORA

ZH_NOTES = CORPORA / "text" / "zh_notes"
HAN_RUN = re.compile("[\u4e00-\u9fff]+")


def jieba_words() -> str:
    """Every jieba word of the notes' Han runs, NUL between, computed here with jieba."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(ZH_NOTES.glob("*.txt")))
    return "\x00".join(word for run in HAN_RUN.findall(text) for word in jieba.cut(run))


def han_tokens_across_words(tokens: list[str]) -> list[str]:
    words = jieba_words()
    han = (t.lstrip("\u2581 ") for t in tokens)
    return [t for t in han if len(t) > 1 and HAN_RUN.fullmatch(t) and t not in words]


def test_train_bpe_and_unigram_with_jieba(tmp_path: Path) -> None:
    bpe = tmp_path / "bpe.json"
    result = run("train-bpe", str(ZH_NOTES), "--pre-segment", "jieba", "--vocab-size", "2000", "-o", str(bpe))
    assert result.returncode == 0, result.stderr
    assert "documents" in result.stderr
    hf = tokenizers.Tokenizer.from_file(str(bpe))
    # Byte-level tokens as text: the whole-character ones are the Han words learned.
    vocab = [hf.decode([i]) for i in range(hf.get_vocab_size())]
    assert han_tokens_across_words(vocab) == []

    model = tmp_path / "zh.model"
    result = run("train", "--model", "unigram", str(ZH_NOTES), "--pre-segment", "jieba", "--vocab-size", "3000",
                 "-o", str(model))
    assert result.returncode == 0, result.stderr
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert han_tokens_across_words([sp.id_to_piece(i) for i in range(sp.get_piece_size())]) == []
    # Without the option the same command learns pieces across words: the check can fail.
    plain = tmp_path / "plain.model"
    assert run("train-unigram", str(ZH_NOTES), "--vocab-size", "3000", "-o", str(plain), "-q").returncode == 0
    sp = spm.SentencePieceProcessor(model_file=str(plain))
    assert han_tokens_across_words([sp.id_to_piece(i) for i in range(sp.get_piece_size())])


def test_bad_values_are_usage_errors(tmp_path: Path) -> None:
    out = str(tmp_path / "t.json")
    bad = run("train-bpe", str(ZH_NOTES), "--pre-segment", "thulac", "-o", out)
    assert bad.returncode == 2 and "--pre-segment" in bad.stderr
    wordpiece = run("train", "--model", "wordpiece", str(ZH_NOTES), "--pre-segment", "jieba", "-o", out)
    assert wordpiece.returncode == 2 and "--pre-segment is not an option of --model wordpiece" in wordpiece.stderr
    assert not Path(out).exists()
