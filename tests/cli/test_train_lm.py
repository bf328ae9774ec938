"""``tokpipe train-lm`` through the real console entry point."""

from __future__ import annotations

import os
from pathlib import Path

import kenlm

from tests.cli.test_train import run
from tests.conftest import CORPORA, VOCAB


def test_trains_a_model_kenlm_loads(tmp_path: Path) -> None:
    out = tmp_path / "lm.arpa"
    corpus = CORPORA / "text" / "botchan.txt"
    result = run("train-lm", str(corpus), "--order", "3", "-o", str(out))
    assert result.returncode == 0, result.stderr
    for row in ("documents", "sentences", "tokens", "1-grams", "3-grams", "D1=", "output"):
        assert row in result.stderr, row
    model = kenlm.Model(str(out))
    assert model.order == 3
    line = corpus.read_text(encoding="utf-8").split("\n")[100]
    assert model.score(line) < 0


def test_prune_tokenizer_and_jsonl(tmp_path: Path) -> None:
    full, pruned = tmp_path / "full.arpa", tmp_path / "pruned.arpa"
    web = sorted((CORPORA / "web").glob("*.jsonl.gz"))
    assert web
    base = ("train-lm", *map(str, web), "--order", "4", "--tokenizer", str(VOCAB / "gpt-neo-tokenizer.json"), "-q")
    assert run(*base, "-o", str(full)).returncode == 0
    result = run(*base, "-o", str(pruned), "--prune", "0 1 1")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # -q
    assert os.path.getsize(pruned) < os.path.getsize(full)
    kenlm.Model(str(pruned))


def test_same_output_whatever_the_thread_count(tmp_path: Path) -> None:
    outputs = []
    for threads in (1, 3):
        out = tmp_path / f"t{threads}.arpa"
        result = run("train-lm", str(CORPORA / "text"), "--order", "3", "-q", "-o", str(out), threads=threads)
        assert result.returncode == 0, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    corpus = str(CORPORA / "text" / "botchan.txt")
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("a b\na b\n", encoding="utf-8")
    for args in [("--prune", "1"), ("--prune", "0 2 1"), ("--prune", "0 x"), ("--order", "3", "--prune", "0 0 0 0"),
                 ("--discount-fallback", "0.5 1")]:
        result = run("train-lm", corpus, "-o", str(tmp_path / "x.arpa"), *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "error" in result.stderr, result.stderr
    result = run("train-lm", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "x.arpa"))
    assert result.returncode == 2 and "missing.txt" in result.stderr
    result = run("train-lm", str(tiny), "-o", str(tmp_path / "x.arpa"))
    assert result.returncode == 2 and "discount" in result.stderr and result.stderr.count("\n") == 1
    result = run("train-lm", str(tiny), "-o", str(tmp_path / "x.arpa"), "--order", "2", "--discount-fallback", "-q")
    assert result.returncode == 0, result.stderr
    kenlm.Model(str(tmp_path / "x.arpa"))


def test_help_documents_every_option() -> None:
    result = run("train-lm", "--help")
    assert result.returncode == 0
    for option in ("--order", "--tokenizer", "--prune", "--normalize", "--discount-fallback", "--text-field",
                   "--strict", "--quiet", "--output"):
        assert option in result.stdout, option
