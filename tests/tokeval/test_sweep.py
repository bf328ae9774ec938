"""``sweep_vocab_sizes`` and ``parse_vocab_sizes``: tiny vocabularies on slices of the shared
English and Chinese texts, so that it runs in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORPORA
from tokpipe.errors import CorpusError, InvalidArgumentError
from tokpipe.tokeval import parse_vocab_sizes, sweep_vocab_sizes
from tokpipe.tokeval.sweep import size_name

ENGLISH = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")
CHINESE = (CORPORA / "text" / "zh_notes" / "001_03f153afd046558c.txt").read_text(encoding="utf-8")


def slices(root: Path) -> tuple[list[Path], list[Path]]:
    """Training and held-out files: different parts of one English book and one Chinese note."""
    files = {"train/en.txt": ENGLISH[:40_000], "train/zh.txt": CHINESE[:20_000],
             "held/en.txt": ENGLISH[100_000:110_000], "held/zh.txt": CHINESE[30_000:40_000]}
    for name, text in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return [root / "train" / "en.txt", root / "train" / "zh.txt"], [root / "held"]


@pytest.mark.parametrize(("text", "sizes"), [("8k,16k,32k,64k", [8000, 16000, 32000, 64000]),
                                              (" 500, 1.5k ,500", [500, 1500]), ("2M", [2_000_000]),
                                              ("300", [300])])
def test_sizes_parse(text: str, sizes: list[int]) -> None:
    assert parse_vocab_sizes(text) == sizes


@pytest.mark.parametrize("text", ["", "8k,", "x", "0", "-5", "1.2345k", "8kk", "8 k", "inf", "1e3"])
def test_bad_sizes_name_the_entry(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="vocabulary size"):
        parse_vocab_sizes(text)


def test_size_names() -> None:
    assert [size_name(n) for n in (8000, 300, 1500, 32768)] == ["8k", "300", "1500", "32768"]


def test_a_unigram_sweep_reports_the_size_it_cannot_reach(tmp_path: Path) -> None:
    train, held = slices(tmp_path)
    sweep = sweep_vocab_sizes("unigram", [1500, 1000, 100_000], train, held)
    assert [p.asked for p in sweep.points] == [1000, 1500, 100_000]
    assert [p.vocab_size for p in sweep.points] == [1000, 1500, None]
    assert "too large" in (sweep.points[2].error or "")
    evaluation = sweep.evaluation
    assert evaluation is not None and [t.name for t in evaluation.tokenizers] == ["1k", "1500"]
    assert set(evaluation.groups) == {"Latin", "zh"}
    # The numbers are the trained tokenizers' on the held-out files.
    for name, tokenizer in sweep.tokenizers.items():
        held_texts = [(tmp_path / "held" / f).read_text(encoding="utf-8") for f in ("en.txt", "zh.txt")]
        assert evaluation.overall[name].tokens == sum(len(tokenizer.encode(t)) for t in held_texts)
    # A larger vocabulary compresses the English held-out text more.
    latin = evaluation.per_group["Latin"]
    assert latin["1500"].chars_per_token > latin["1k"].chars_per_token


def test_a_trainer_that_stops_short_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "tiny.txt").write_text("the cat sat on the mat\n" * 20, encoding="utf-8")
    sweep = sweep_vocab_sizes("wordpiece", [5000], tmp_path / "tiny.txt", tmp_path / "tiny.txt")
    [point] = sweep.points
    assert point.error is None and point.vocab_size is not None and point.vocab_size < 5000
    assert point.note == f"trained {point.vocab_size:,}, smaller than asked: the corpus ran out of pieces"


def test_a_size_below_the_alphabet_trains_larger_and_says_so(tmp_path: Path) -> None:
    # WordPiece keeps its 5 special tokens, every character and every ##-prefixed character
    # that follows another: 10 is less than that, so the trainer returns those alone.
    text = "the cat sat on the mat\n"
    (tmp_path / "tiny.txt").write_text(text * 20, encoding="utf-8")
    sweep = sweep_vocab_sizes("wordpiece", [10], tmp_path / "tiny.txt", tmp_path / "tiny.txt")
    [point] = sweep.points
    words = text.split()
    alphabet = {c for w in words for c in w}
    continuing = {c for w in words for c in w[1:]}
    assert point.vocab_size == 5 + len(alphabet) + len(continuing)
    assert "larger than asked" in point.note


def test_a_missing_held_out_corpus_fails_before_training(tmp_path: Path) -> None:
    train, _ = slices(tmp_path)
    trained = []
    with pytest.raises(CorpusError, match="does not exist"):
        sweep_vocab_sizes("bpe", [300], train, tmp_path / "missing", on_trained=trained.append)
    assert trained == []


def test_bad_model() -> None:
    with pytest.raises(InvalidArgumentError, match="model must be"):
        sweep_vocab_sizes("spm", [300], "a", "b")  # type: ignore[arg-type]


def test_the_held_out_language_column_is_read(tmp_path: Path) -> None:
    import json

    train, _ = slices(tmp_path)
    held = tmp_path / "held.jsonl"
    held.write_text("".join(json.dumps({"text": t, "lang": lang}) + "\n"
                            for t, lang in ((ENGLISH[200_000:201_000], "en"), (CHINESE[:500], "zh-Hans"))),
                    encoding="utf-8")
    sweep = sweep_vocab_sizes("bpe", [300], train, held, language_field="lang")
    assert sweep.evaluation is not None
    assert set(sweep.evaluation.groups) == {"en", "zh-Hans"}
    assert sweep.evaluation.grouped_from == "the lang column"
