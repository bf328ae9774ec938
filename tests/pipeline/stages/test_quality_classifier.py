"""The quality classifier (``tokpipe.quality``) and the ``quality_classifier`` stage.

The classifier is trained on the first 70% of the pieces of each reference text (two English
books, a Japanese novel, Chinese notes) against degraded versions of them, and must separate
the last 30% (never seen) from their degraded versions with AUC >= 0.95, per source.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tests.quality_corpus import corpus
from tokpipe.errors import ConfigError, InvalidArgumentError
from tokpipe.pipeline.stages import QualityClassifierFilter
from tokpipe.quality import (REPEATED_LINE, TrainedQuality, load_quality_classifier, prepare, roc_auc,
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


def test_prepare() -> None:
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
            kept = pq.read_table(sorted(out.glob("part-*.parquet"))).to_pylist()
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
