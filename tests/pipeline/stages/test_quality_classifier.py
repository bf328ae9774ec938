"""The quality classifier (``tokpipe.quality``) and the ``quality_classifier`` stage.

The classifier is trained on the first 70% of the pieces of each reference text (two English
books, a Japanese novel, Chinese notes) against degraded versions of them, and must separate
the last 30% (never seen) from their degraded versions with AUC >= 0.95, per source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe.pipeline as pipeline
from tests.quality_corpus import corpus
from tests.quality_reference import arrow_prepare, assigned, fasttext_scores, python_prepare
from tokpipe.errors import ConfigError, InvalidArgumentError
from tokpipe.pipeline.stages import QualityClassifierFilter
from tokpipe.quality import (REPEATED_LINE, QualityClassifier, TrainedQuality, load_quality_classifier, prepare, roc_auc,
                             train_quality_classifier)

# Small and quick: a few seconds of training on one thread.
SETTINGS = {"epochs": 10, "dim": 16, "bucket": 100_000}
TRAIN_SHARE = 0.7


@pytest.fixture(scope="module")
def split() -> dict[str, tuple[list[str], list[str], list[str], list[str]]]:
    """source -> (train good, train bad, held-out good, held-out bad)."""
    out = {}
    for name, (good, bad) in corpus(size=500, per_source=300).items():
        cut = int(len(good) * TRAIN_SHARE)
        out[name] = (good[:cut], bad[:cut], good[cut:], bad[cut:])
    return out


@pytest.fixture(scope="module")
def trained(split: dict[str, tuple[list[str], ...]]) -> TrainedQuality:
    good = [t for parts in split.values() for t in parts[0]]
    bad = [t for parts in split.values() for t in parts[1]]
    return train_quality_classifier(positive_texts=good, negative_texts=bad, val_fraction=0.1, seed=1, **SETTINGS)


@pytest.fixture(scope="module")
def model_file(trained: TrainedQuality, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("quality") / "quality.bin"
    trained.save(path)
    return path


def test_separates_held_out_reference_from_degraded_text(split: dict[str, tuple[list[str], ...]],
                                                         model_file: Path) -> None:
    classifier = load_quality_classifier(model_file)
    every_score, every_label = [], []
    for name, (_, _, good, bad) in split.items():
        assert len(good) >= 40 and len(bad) == len(good), name
        scores = np.concatenate([classifier.score(good), classifier.score(bad)])
        labels = np.r_[np.ones(len(good), bool), np.zeros(len(bad), bool)]
        auc = roc_auc(scores, labels)
        assert auc >= 0.95, (name, auc)
        every_score.append(scores)
        every_label.append(labels)
    assert roc_auc(np.concatenate(every_score), np.concatenate(every_label)) >= 0.95


def test_held_out_split_metrics(trained: TrainedQuality) -> None:
    v = trained.validation
    assert v is not None and 100 <= v.documents <= 300
    assert v.auc >= 0.95 and v.precision >= 0.8 and v.recall >= 0.8
    assert trained.classifier.meta["validation"]["auc"] == v.auc


def test_saved_model_scores_as_trained(trained: TrainedQuality, model_file: Path,
                                       split: dict[str, tuple[list[str], ...]]) -> None:
    texts = split["botchan.txt"][2][:20] + split["zh_notes"][3][:20]
    assert np.array_equal(load_quality_classifier(model_file).score(texts), trained.classifier.score(texts))


def test_prepare_examples() -> None:
    # fastText's words are what is between whitespace runs: compared as such.
    assert [line.split() for line in prepare(["Hello, World!\n  HELLO, world! \n\nBye", "吾輩は猫である。\n名前はまだ無い。",
                                               None, "", "abc 漢字abc"])] == [line.split() for line in [
        f"hello , world ! {REPEATED_LINE} bye",
        "吾 輩 は 猫 で あ る 。 名 前 は ま だ 無 い 。",
        "", "", "abc 漢 字 abc"]]
    assert prepare(["Café naïve, привет мир; x_1=2 ９"])[0].split() == \
        ["café", "naïve", ",", "привет", "мир", ";", "x_1", "=", "2", "９"]
    assert all("\n" not in line for line in prepare(["a\nb\r\nc\n"]))
    assert prepare(["x" * 50], max_chars=10) == ["x" * 10]


def _check_prepare(texts: list[str | None], max_chars: int | None) -> None:
    ours = prepare(texts, max_chars)
    assert ours == arrow_prepare(texts, max_chars), max_chars
    assert ours == [python_prepare(t, max_chars) for t in texts], max_chars


def test_prepare_equals_the_references_on_every_document(documents: list[tuple[str, str]]) -> None:
    texts: list[str | None] = [text for _, text in documents]
    texts += [None, "", "\n", " \r\n \n"]
    for max_chars in (None, 10_000, 1_000, 7, 1, 0):
        _check_prepare(texts, max_chars)
    # The same documents cut into their lines' halves, so lines repeat across and inside them.
    halves = ["\n".join(line for line in text.splitlines()[:200] for _ in (0, 1)) for _, text in documents]
    _check_prepare(halves, None)


def test_prepare_every_character() -> None:
    """Every assigned character (as Python's tables have it), alone, inside words, upper and
    lower case, in repeated lines: lowercasing, stripping and the class of each are Arrow's."""
    chars = [chr(c) for c in range(0x110000) if assigned(chr(c))]
    texts = [f"A{c}b\n{c}\n x{c.upper()}Y{c}\t\n\u3000{c} \n{c.lower()}\n{c}" for c in chars]
    _check_prepare(texts, None)
    _check_prepare(texts, 3)  # cut inside the first line, after the character


_EDGE = ("aZéÉñÑüÜçÇøØßẞİıΣσςЖжЁёÆæŁłǅǄ\u0301\u0308\u20dd０９٣²½Ⅻ"  # letters, marks, numbers
         "漢字𠀋𪚲かなカナｶﾅーゝ々〆한글ㄱᄀ"  # CJK, kana (half-width too), Hangul, the prolonged-sound mark
         ".,;:!?'\"-–—()[]{}<>/\\|@#$%^&*+=~`_·«»„“”‘’…、。「」『』【】《》！？：；（）"  # punctuation, symbols
         " \t\r\n\v\f\x00\x1c\x1f\x85\xa0\u1680\u2000\u2028\u2029\u3000\ufeff"  # whitespace of every kind
         "😀👍🏽\U0001F1FA\U0001F1F8\ue000\U000F0000\u212a\u2126")  # astral, private use, Kelvin, Ohm
_TEXT = st.lists(st.one_of(st.sampled_from(list(_EDGE)), st.sampled_from(["__label__hq", "</s>", "__repeated_line__",
                                                                          "http://x.com/a?b=1", "\r\n", "\n\n"]),
                           st.characters(codec="utf-8").filter(assigned)),
                 max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), _TEXT), min_size=1, max_size=6), st.one_of(st.none(), st.integers(0, 40)))
def test_prepare_generated_text(texts: list[str | None], max_chars: int | None) -> None:
    # Their lines again, in another order and with whitespace around them, so that repeats
    # are common.
    texts = texts + [t + "\n" + "\n".join(f" {line}\t" for line in t.split("\n")[::-1]) for t in texts if t]
    _check_prepare(texts, max_chars)


@pytest.fixture(scope="module")
def variants(split: dict[str, tuple[list[str], ...]]) -> dict[str, TrainedQuality]:
    """Small models of every kind of feature fastText's predict handles: word bigrams (the
    default), character n-grams inside words (for words in and out of the vocabulary), word
    trigrams, words alone."""
    good = [t for parts in split.values() for t in parts[0][:60]]
    bad = [t for parts in split.values() for t in parts[1][:60]]
    kinds = {"bigrams": {}, "char_ngrams": {"char_ngrams": (2, 4)}, "trigrams": {"word_ngrams": 3},
             "words": {"word_ngrams": 1}}
    return {name: train_quality_classifier(positive_texts=good, negative_texts=bad, val_fraction=0.0, seed=2,
                                           **{**SETTINGS, "bucket": 20_000, **kw}) for name, kw in kinds.items()}


def test_scores_equal_fasttexts_on_every_document(documents: list[tuple[str, str]], model_file: Path,
                                                  variants: dict[str, TrainedQuality],
                                                  split: dict[str, tuple[list[str], ...]]) -> None:
    texts = [text for _, text in documents] + [t for parts in split.values() for t in parts[2] + parts[3]] + ["", "\n"]
    classifiers = {"trained": load_quality_classifier(model_file)} | {k: v.classifier for k, v in variants.items()}
    for name, loaded in classifiers.items():
        for max_chars in (10_000, None):
            classifier = QualityClassifier(loaded.blob, {**loaded.meta, "max_chars": max_chars}, model=loaded.model)
            reference = fasttext_scores(classifier.model, prepare(texts, max_chars))
            ours = classifier.score(texts)
            assert ours.shape == reference.shape
            assert np.abs(ours - reference).max() <= 1e-6, (name, max_chars)
            assert np.array_equal(classifier.score_prepared(prepare(texts, max_chars)), ours)
    # The scores spread from one end to the other: the comparison is not of constants.
    scores = classifiers["trained"].score(texts)
    assert (scores < 0.1).any() and (scores > 0.9).any()


_WORDS = ["the", "of", "and", "i", "猫", "吾", "輩", ",", ".", "__repeated_line__", "</s>", "__label__hq",
          "__label__lq", "__label__other", "<", ">", "qzxv", "the,", "ü", "ß"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.sampled_from(_WORDS), st.text(st.characters(codec="utf-8"), max_size=6),
                                   st.sampled_from([" ", "  ", "\t", "\v", "\f", "\r", "\x00", "\n"])),
                         max_size=30).map(" ".join), min_size=1, max_size=8))
def test_predict_equals_fasttexts_on_any_line(variants: dict[str, TrainedQuality], lines: list[str]) -> None:
    """Lines straight to the model (``score_prepared``): fastText's reader's every separator,
    its end-of-line token and labels inside the text, words in and out of the vocabulary,
    a second line (which fastText does not read)."""
    for name, trained in variants.items():
        ours = trained.classifier.score_prepared(lines)
        assert np.abs(ours - fasttext_scores(trained.classifier.model, lines)).max() <= 1e-6, name


def test_scores_do_not_depend_on_the_thread_count(model_file: Path, documents: list[tuple[str, str]],
                                                  tmp_path: Path) -> None:
    texts = [text for _, text in documents]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    code = ("import json, sys, numpy as np; from tokpipe.quality import load_quality_classifier; "
            "texts = json.load(open(sys.argv[2], encoding='utf-8')); "
            "np.save(sys.argv[3], load_quality_classifier(sys.argv[1]).score(texts))")
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code, str(model_file), str(tmp_path / "texts.json"), str(tmp_path / "one.npy")],
                   env=env, check=True)
    assert np.array_equal(np.load(tmp_path / "one.npy"), load_quality_classifier(model_file).score(texts))


def test_unusable_fasttext_files_are_refused(model_file: Path, variants: dict[str, TrainedQuality],
                                            tmp_path: Path) -> None:
    with zipfile.ZipFile(model_file) as z:
        meta = json.loads(z.read("meta.json"))
        blob = z.read("model.bin")

    def packed(name: str, model_bin: bytes) -> Path:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("meta.json", json.dumps(meta))
            z.writestr("model.bin", model_bin)
        return path

    with pytest.raises(ConfigError, match=r"cut\.bin \(model\.bin\): fastText model ends inside its input matrix"):
        load_quality_classifier(packed("cut.bin", blob[: len(blob) // 2]))
    with pytest.raises(ConfigError, match="wrong magic"):
        load_quality_classifier(packed("text.bin", b"not a model at all"))
    # fastText's own quantized form (.ftz), product-quantized, is read (issue 25) and scores as
    # fastText scores it. (The smallest model, a copy of its own: quantizing changes it.)
    model = QualityClassifier(variants["words"].classifier.blob, meta).model
    model.quantize(qnorm=True, cutoff=0)
    quantized = tmp_path / "quantized.ftz"
    model.save_model(str(quantized))
    loaded = load_quality_classifier(packed("quantized.bin", quantized.read_bytes()))
    lines = ["the cat sat on the mat", "吾輩は猫である", "of of of and", "", "qzxv ü ß"]
    assert np.abs(loaded.score_prepared(lines) - fasttext_scores(model, lines)).max() <= 1e-6


def test_roc_auc_counts_pairs() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 200).astype(float)  # many ties
    labels = rng.random(200) < 0.4
    pos, neg = scores[labels], scores[~labels]
    pairs = sum(float(p > n) + 0.5 * float(p == n) for p in pos for n in neg) / (len(pos) * len(neg))
    assert roc_auc(scores, labels) == pytest.approx(pairs, abs=1e-12)
    assert roc_auc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0


def test_training_is_reproducible(split: dict[str, tuple[list[str], ...]]) -> None:
    good, bad = split["botchan.txt"][0][:60], split["botchan.txt"][1][:60]
    a = train_quality_classifier(positive_texts=good, negative_texts=bad, seed=3, **SETTINGS)
    b = train_quality_classifier(positive_texts=good, negative_texts=bad, seed=3, **SETTINGS)
    texts = split["botchan.txt"][2][:30]
    assert np.array_equal(a.classifier.score(texts), b.classifier.score(texts))


def test_bad_arguments() -> None:
    for kwargs in ({"val_fraction": 1.0}, {"epochs": 0}, {"char_ngrams": (3, 2)}, {"char_ngrams": (0, 3)}, {"seed": -1}):
        with pytest.raises(InvalidArgumentError):
            train_quality_classifier(positive_texts=["a b"], negative_texts=["c d"], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        train_quality_classifier(positive_texts=["a b"])


def _rewrite(src: Path, dst: Path, **changes: object) -> Path:
    with zipfile.ZipFile(src) as z:
        meta = json.loads(z.read("meta.json"))
        blob = z.read("model.bin")
    meta.update(changes)
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("meta.json", json.dumps(meta))
        z.writestr("model.bin", blob)
    return dst


def test_model_file_format_and_version_are_checked(model_file: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(model_file) as z:
        meta = json.loads(z.read("meta.json"))
    assert meta["format"] == "tokpipe-quality" and meta["version"] == 1
    assert load_quality_classifier(_rewrite(model_file, tmp_path / "same.bin")).meta["version"] == 1
    with pytest.raises(ConfigError, match="version 2"):
        load_quality_classifier(_rewrite(model_file, tmp_path / "newer.bin", version=2))
    with pytest.raises(ConfigError, match="format"):
        load_quality_classifier(_rewrite(model_file, tmp_path / "other.bin", format="something-else"))
    raw = tmp_path / "raw.bin"
    with zipfile.ZipFile(model_file) as z:
        raw.write_bytes(z.read("model.bin"))  # fastText's bare file: not self-describing
    with pytest.raises(ConfigError, match="not a tokpipe quality model"):
        load_quality_classifier(raw)


def test_stage_arguments(model_file: Path, tmp_path: Path) -> None:
    for kwargs in ({}, {"threshold": 0.5, "top_fraction": 0.5}, {"threshold": 1.5}, {"top_fraction": -0.1}):
        with pytest.raises(InvalidArgumentError):
            QualityClassifierFilter(model=str(model_file), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        QualityClassifierFilter(model=str(tmp_path / "missing.bin"), threshold=0.5)


def _write_inputs(root: Path, texts: list[str]) -> None:
    root.mkdir()
    for n in range(3):
        part = range(n * len(texts) // 3, (n + 1) * len(texts) // 3)
        (root / f"part{n}.jsonl").write_text("".join(json.dumps({"id": f"d{i:03d}", "text": texts[i]}, ensure_ascii=False)
                                                     + "\n" for i in part), encoding="utf-8")


def test_stage_through_the_executor(split: dict[str, tuple[list[str], ...]], model_file: Path, tmp_path: Path) -> None:
    texts = []
    for _, _, good, bad in split.values():
        texts += [t for pair in zip(good[:15], bad[:15]) for t in pair]
    # Exact ties: the same document three times, in different tasks.
    texts += [texts[0], texts[1]]
    texts.insert(len(texts) // 2, texts[0])
    _write_inputs(tmp_path / "in", texts)
    scores = load_quality_classifier(model_file).score(texts)
    ids = [f"d{i:03d}" for i in range(len(texts))]
    n_keep = int(np.floor(0.4 * len(texts) + 0.5))
    by_rank = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
    cases = {"threshold": ({"threshold": 0.5}, {ids[i] for i in range(len(texts)) if scores[i] >= 0.5}),
             "top": ({"top_fraction": 0.4}, {ids[i] for i in by_rank[:n_keep]})}
    for case, (params, expected) in cases.items():
        assert 0 < len(expected) < len(texts)
        for workers in (1, 2):
            out = tmp_path / f"{case}{workers}"
            config = {"stages": [{"type": "quality_classifier", "model": str(model_file), **params}]}
            result = pipeline.run([tmp_path / "in"], out, config=config, workers=workers)
            kept = pq.read_table(sorted(out.glob("data/part-*.parquet"))).to_pylist()
            assert {r["id"] for r in kept} == expected, (case, workers)
            for r in kept:
                assert r["quality_score"] == pytest.approx(scores[ids.index(r["id"])], abs=1e-12)
            rejected = pq.read_table(sorted(out.glob("rejected/part-*.parquet"))).to_pylist()
            assert {r["id"] for r in rejected} == set(ids) - expected
            assert {r["reason"] for r in rejected} == {"low_quality"}
            stats = result.stats["quality_classifier"].as_dict()
            assert stats["kept"] == len(expected) and stats["dropped_low_quality"] == len(texts) - len(expected)
    # The tie at the top-fraction boundary is broken by position: the first copy is ranked first.
    assert cases["top"][1] == {ids[i] for i in by_rank[:n_keep]}
