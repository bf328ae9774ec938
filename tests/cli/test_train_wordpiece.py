"""``tokpipe train-wordpiece`` through the real console entry point."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer as HfTokenizer
from tokenizers import normalizers, pre_tokenizers
from tokenizers.implementations import BertWordPieceTokenizer
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

from tests.cli.test_train import run
from tests.conftest import CORPORA

BOOKS = [CORPORA / "text" / "botchan.txt", CORPORA / "text" / "tinyshakespeare.txt"]


def test_frequency_score_gives_hf_vocabulary_from_files(tmp_path: Path) -> None:
    out, vocab_txt = tmp_path / "wp.json", tmp_path / "vocab.txt"
    result = run("train-wordpiece", *map(str, BOOKS), "--vocab-size", "2000", "--score", "frequency",
                 "-o", str(out), "--vocab-txt", str(vocab_txt))
    assert result.returncode == 0, result.stderr
    assert "vocabulary" in result.stderr
    hf = HfTokenizer(WordPiece(unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.train([str(p) for p in BOOKS], WordPieceTrainer(
        vocab_size=2000, min_frequency=2, limit_alphabet=1000, show_progress=False,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    ours = HfTokenizer.from_file(str(out))
    assert set(ours.get_vocab()) == set(hf.get_vocab())
    # The vocab.txt loads in HF's BERT tokenizer and encodes as our tokenizer.json does.
    bert = BertWordPieceTokenizer(str(vocab_txt), lowercase=True)
    text = BOOKS[0].read_text(encoding="utf-8")[:20000]
    assert bert.encode(text).ids == ours.encode(text).ids


def test_pmi_score_is_the_ratio_rule(tmp_path: Path) -> None:
    # --score pmi trains what train_wordpiece(score="pmi") does (checked against a reference
    # implementation of the ratio in tests/test_train_wordpiece.py), unlike the default.
    import tokpipe

    outputs = {}
    for score in ("pmi", "likelihood"):
        out = tmp_path / f"{score}.json"
        result = run("train-wordpiece", str(BOOKS[0]), "--vocab-size", "700", "--score", score, "-q", "-o", str(out))
        assert result.returncode == 0, result.stderr
        outputs[score] = HfTokenizer.from_file(str(out)).get_vocab()
    api = tokpipe.train_wordpiece(BOOKS[0], vocab_size=700, score="pmi", show_progress=False)
    assert outputs["pmi"] == {api.id_to_token(i): i for i in range(api.vocab_size)}
    assert outputs["pmi"] != outputs["likelihood"]


def test_same_output_whatever_the_thread_count(tmp_path: Path) -> None:
    outputs = []
    for threads in (1, 3):
        out = tmp_path / f"t{threads}.json"
        result = run("train-wordpiece", str(CORPORA / "text"), "--vocab-size", "1500", "-q", "-o", str(out),
                     threads=threads)
        assert result.returncode == 0, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_unknown_token_missing_is_a_usage_error(tmp_path: Path) -> None:
    result = run("train-wordpiece", str(BOOKS[0]), "--special-token", "[PAD]", "-o", str(tmp_path / "x.json"))
    assert result.returncode == 2
    assert "unknown token" in result.stderr
