"""``tokpipe train-quality-classifier`` and ``tokpipe inspect`` through the real console entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli.test_train import run
from tests.quality_corpus import corpus
from tokpipe.quality import load_quality_classifier, roc_auc

SMALL = ("--epochs", "10", "--dim", "16", "--bucket", "100000")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str], list[str]]:
    """Good documents as JSONL, bad ones as Parquet (two reader formats), and held-out ones."""
    root = tmp_path_factory.mktemp("quality-cli")
    good, bad, held_good, held_bad = [], [], [], []
    for g, b in corpus(size=500, per_source=300).values():
        cut = int(len(g) * 0.7)
        good += g[:cut]
        bad += b[:cut]
        held_good += g[cut:]
        held_bad += b[cut:]
    (root / "good.jsonl").write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                                             for i, t in enumerate(good)), encoding="utf-8")
    pq.write_table(pa.table({"id": [str(i) for i in range(len(bad))], "text": bad}), root / "bad.parquet")
    return root / "good.jsonl", root / "bad.parquet", held_good, held_bad


def test_trains_a_model_the_stage_loads(inputs: tuple[Path, Path, list[str], list[str]], tmp_path: Path) -> None:
    good, bad, held_good, held_bad = inputs
    out = tmp_path / "quality.bin"
    result = run("train-quality-classifier", "--positive", str(good), "--negative", str(bad), "-o", str(out),
                 "--val-fraction", "0.2", "--seed", "7", *SMALL)
    assert result.returncode == 0, result.stderr
    for row in ("positive documents", "negative documents", "held out", "precision", "recall", "auc", "output"):
        assert row in result.stderr, row
    printed_auc = float(result.stderr.split("auc")[1].split()[0])
    assert printed_auc >= 0.9  # the bar (0.95) is checked on the held-out pieces below
    classifier = load_quality_classifier(out)
    assert classifier.meta["validation"]["auc"] == pytest.approx(printed_auc, abs=1e-4)
    scores = classifier.score(held_good + held_bad)
    assert roc_auc(scores, np.r_[np.ones(len(held_good), bool), np.zeros(len(held_bad), bool)]) >= 0.95

    shown = run("inspect", str(out), held_good[0])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("quality_score") and float(lines[0].split()[1]) == pytest.approx(scores[0], abs=1e-4)
    features = [ln.split() for ln in lines[1:]]
    assert len(features) == 10 and all(len(f) == 2 for f in features)
    weights = [abs(float(f[0])) for f in features]
    assert weights == sorted(weights, reverse=True)
    # A link list is pushed down by its URL pieces.
    links = run("inspect", str(out), "\n".join(f"[page {i}](https://www.example.com/p{i}.html)" for i in range(20)),
                "--top", "6")
    assert links.returncode == 0 and float(links.stdout.split()[1]) < 0.5
    pushed_down = {ln.split()[1] for ln in links.stdout.splitlines()[1:] if float(ln.split()[0]) < 0}
    assert len(pushed_down & {"https", "www", "example", "com", "html"}) >= 2, links.stdout


def test_usage_errors_exit_2(inputs: tuple[Path, Path, list[str], list[str]], tmp_path: Path) -> None:
    good, bad, _, _ = inputs
    out = tmp_path / "q.bin"
    for args in (("--positive", str(good), "-o", str(out)),  # no --negative
                 ("--positive", str(good), "--negative", str(bad), "--val-fraction", "1"),
                 ("--positive", str(good), "--negative", str(bad), "--epochs", "0"),
                 ("--positive", str(good), "--negative", str(bad), "--char-ngrams", "4", "2"),
                 ("--positive", str(tmp_path / "missing.jsonl"), "--negative", str(bad))):
        result = run("train-quality-classifier", *args)
        assert result.returncode == 2, (args, result.stderr)
    assert not out.exists()


def test_inspect_refuses_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"not a model")
    result = run("inspect", str(bogus), "some text")
    assert result.returncode == 1 and "not a tokpipe quality model" in result.stderr
    assert run("inspect", str(tmp_path / "missing.bin"), "x").returncode == 2
