"""``tokpipe eval-tokenizer`` through the real console entry point: the issue's comparison of
cl100k, o200k, GPT-2, BERT and a trained Unigram on the shared corpora by language, with its
page in headless Chromium; the sweep's curve; the table within the terminal; exit codes and
one-line errors.

Expected numbers come from peers (tiktoken's token counts, sentencepiece's unknown pieces) or
from the corpus; the command's own library is not asked what to expect.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm

import tokpipe
from tests.conftest import CORPORA, REPO, VOCAB
from tests.parity.peers import tiktoken_encoding
from tests.report.browser import Browser
from tests.report.test_report import LAYOUT_PROBLEMS
from tests.tokeval.test_evaluate import language, shared_texts, write_jsonl
from tests.tokeval.test_sweep import slices

WIDTH = 100
TOKENIZERS = ("cl100k_base.tiktoken.gz", "o200k_base.tiktoken.gz", "gpt2_encoder.json", "bert_base_uncased_vocab.txt")


def run(*args: str, width: int = WIDTH) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS=str(width))
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", env=env, cwd=REPO)


def rows_of(stdout: str) -> dict[tuple[str, str], list[str]]:
    """(group, tokenizer) to the cells of the metric tables' rows, the split tables joined."""
    out: dict[tuple[str, str], list[str]] = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 3 and cells[0] in ("all", "Latin", "ja", "zh") and cells[1].split(".")[0] in NAMES:
            out.setdefault((cells[0], cells[1]), []).extend(cells[2:])
    return out


NAMES = {name.split(".")[0] for name in TOKENIZERS} | {"unigram"}


def test_five_tokenizers_on_the_shared_corpora_by_language(tmp_path: Path) -> None:
    # The comparison: cl100k, o200k, GPT-2, BERT and a Unigram trained here.
    unigram = tmp_path / "unigram.model"
    tokpipe.train_unigram([CORPORA / "text"], vocab_size=8000, show_progress=False).save_sentencepiece(unigram)
    page = tmp_path / "eval.html"
    args = [arg for name in TOKENIZERS for arg in ("-t", str(VOCAB / name))]
    result = run("eval-tokenizer", *args, "-t", str(unigram), str(CORPORA / "text"), "--by", "language",
                 "--report", str(page))
    assert result.returncode == 0, result.stderr
    assert all(len(line) < WIDTH for line in result.stdout.splitlines()), "a line wider than the terminal"
    rows = rows_of(result.stdout)
    names = [*TOKENIZERS, "unigram.model"]
    assert set(rows) == {(g, n) for g in ("all", "Latin", "ja", "zh") for n in names}
    # chars/tok is the first metric: the characters over tiktoken's token count, per language.
    texts = shared_texts()
    for encoding, name in (("cl100k", "cl100k_base.tiktoken.gz"), ("o200k", "o200k_base.tiktoken.gz")):
        enc = tiktoken_encoding(encoding)
        for group in ("Latin", "ja", "zh"):
            docs = [texts[n] for n in texts if language(n) == group]
            tokens = sum(len(enc.encode_ordinary(d)) for d in docs)
            assert rows[(group, name)][0] == f"{sum(map(len, docs)) / tokens:.2f}", (group, name)
    # The trained Unigram's unknown pieces, as sentencepiece counts them, per language: the
    # "fb tokens" column (the sixth metric).
    peer = spm.SentencePieceProcessor(model_file=str(unigram))
    for group in ("Latin", "ja", "zh"):
        ids = [i for n in texts if language(n) == group for i in peer.encode(texts[n])]
        share = ids.count(peer.unk_id()) / len(ids)
        shown = rows[(group, "unigram.model")][5]
        assert shown == ("0%" if share == 0 else f"{share * 100:.2g}%" if share < 0.001 else f"{share * 100:.1f}%")
    # BERT cannot round-trip (it lowercases); the byte-level BPEs always do: the last metric.
    assert rows[("all", "bert_base_uncased_vocab.txt")][8] == "0%"
    assert rows[("all", "cl100k_base.tiktoken.gz")][8] == "100.0%"
    assert "Grouped by language, from a guess from the dominant script" in " ".join(result.stdout.split())
    assert f"report written to {page}" in result.stderr

    browser = Browser(width=1280)
    try:
        browser.open(page)
        assert browser.problems() == [], browser.problems()
        assert browser.evaluate(LAYOUT_PROBLEMS) == []
        text = browser.evaluate("document.body.innerText")
        for name in names:
            assert name in text
        browser.screenshot(tmp_path / "eval.png")
    finally:
        browser.close()


def test_the_sweep_prints_each_size_and_draws_the_curve(tmp_path: Path) -> None:
    train, held = slices(tmp_path)
    page = tmp_path / "sweep.html"
    result = run("eval-tokenizer", "--train", "unigram", "--vocab-sizes", "1k,1500,100k", *map(str, train),
                 "--eval", str(held[0]), "--report", str(page))
    assert result.returncode == 0, result.stderr
    assert "trained unigram 1,000: vocabulary 1,000" in result.stderr
    assert "100,000: not trained: vocab_size 100000 is too large" in " ".join(result.stdout.split())
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["1,500", "1,500"] in [r[:2] for r in rows]
    browser = Browser(width=1280)
    try:
        browser.open(page)
        assert browser.problems() == [], browser.problems()
        assert browser.evaluate(LAYOUT_PROBLEMS) == []
        assert browser.evaluate("document.querySelectorAll('svg.chart.lines polyline').length") == 2 * 3
    finally:
        browser.close()


def test_a_narrow_terminal_splits_the_table(tmp_path: Path) -> None:
    corpus = tmp_path / "doc.txt"
    corpus.write_text("Some English text for the table.", encoding="utf-8")
    result = run("eval-tokenizer", "-t", str(VOCAB / "gpt2_encoder.json"), str(corpus), width=50)
    assert result.returncode == 0, result.stderr
    assert all(len(line) < 50 for line in result.stdout.splitlines())
    # Every metric header is still there, in tables of their own.
    for header in ("chars/tok", "bytes/tok", "tok/word", "fb docs", "fb bytes", "fb tokens", "vocab used", "90% in",
                   "round trip"):
        assert header in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("doc.txt",), "give at least one tokenizer with -t"),
    (("-t", "{gpt2}"), "give the corpus"),
    (("-t", "{gpt2}", "missing.txt"), "input does not exist"),
    (("-t", "{gpt2}", "doc.txt", "--report", "out.png"), "--report must name an .html file"),
    (("-t", "{gpt2}", "doc.txt", "--report", "no/such/folder/out.html"), "--report: no folder"),
    (("-t", "{gpt2}", "doc.txt", "--vocab-sizes", "8k"), "--vocab-sizes and --eval go with --train"),
    (("--train", "bpe", "doc.txt", "--eval", "doc.txt"), "--train needs --vocab-sizes"),
    (("--train", "bpe", "--vocab-sizes", "8k,lots", "doc.txt", "--eval", "doc.txt"),
     "--vocab-sizes: vocabulary size 'lots' is not a number"),
    (("--train", "bpe", "-t", "{gpt2}", "--vocab-sizes", "8k", "doc.txt", "--eval", "doc.txt"),
     "-t and --train do not go together"),
    (("--train", "bpe", "--vocab-sizes", "8k", "doc.txt", "--eval", "missing.txt"), "input does not exist"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "doc.txt").write_text("text", encoding="utf-8")
    filled = [a.format(gpt2=VOCAB / "gpt2_encoder.json") if a.startswith("{") else
              str(tmp_path / a) if a.endswith((".txt", ".png", ".html")) else a for a in args]
    result = run("eval-tokenizer", *filled)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr
    assert result.stdout == ""


def test_click_rejects_a_bad_choice_before_any_work(tmp_path: Path) -> None:
    result = run("eval-tokenizer", "-t", str(VOCAB / "gpt2_encoder.json"), str(tmp_path), "--by", "colour")
    assert result.returncode == 2 and "'colour' is not one of" in result.stderr


def test_failures_of_the_work_exit_1(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text("text", encoding="utf-8")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    bad_tokenizer = run("eval-tokenizer", "-t", str(tmp_path / "bad.json"), str(tmp_path / "doc.txt"))
    assert bad_tokenizer.returncode == 1 and bad_tokenizer.stderr.count("\n") == 1
    assert "bad.json" in bad_tokenizer.stderr
    (tmp_path / "docs.jsonl").write_text('{"content": "text"}\n', encoding="utf-8")
    no_documents = run("eval-tokenizer", "-t", str(VOCAB / "gpt2_encoder.json"), str(tmp_path / "docs.jsonl"))
    assert no_documents.returncode == 1 and "no document read" in no_documents.stderr
    nothing_trained = run("eval-tokenizer", "--train", "bpe", "--vocab-sizes", "10", str(tmp_path / "doc.txt"),
                          "--eval", str(tmp_path / "doc.txt"))
    assert nothing_trained.returncode == 1
    assert "no vocabulary size could be trained" in nothing_trained.stderr
    assert "10: not trained" in nothing_trained.stdout


def test_json_output(tmp_path: Path) -> None:
    import json

    corpus = tmp_path / "doc.txt"
    corpus.write_text("Hello there, world.", encoding="utf-8")
    result = run("eval-tokenizer", "-t", str(VOCAB / "gpt2_encoder.json"), str(corpus), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    enc = tiktoken_encoding("gpt2")
    assert data["overall"]["gpt2_encoder.json"]["tokens"] == len(enc.encode_ordinary("Hello there, world."))


def test_a_group_called_all_keeps_its_own_numbers(tmp_path: Path) -> None:
    # A language value "all" is a group like any other: its row must not repeat the overall one.
    texts = {"all": "hello world, and more words here. " * 40, "zh": "我是猫。名字还没有。" * 40}
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t, "language": g} for g, t in texts.items()])
    result = run("eval-tokenizer", "-t", str(VOCAB / "cl100k_base.tiktoken.gz"), str(corpus), "--by", "language")
    assert result.returncode == 0, result.stderr
    enc = tiktoken_encoding("cl100k")
    tokens = {g: len(enc.encode_ordinary(t)) for g, t in texts.items()}
    overall = sum(map(len, texts.values())) / sum(tokens.values())
    group = len(texts["all"]) / tokens["all"]
    assert f"{overall:.2f}" != f"{group:.2f}"
    # The first two "all" rows are the chars/tok table's (a split table repeats the rows).
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("all ")]
    assert [cells[2] for cells in rows[:2]] == [f"{overall:.2f}", f"{group:.2f}"]
