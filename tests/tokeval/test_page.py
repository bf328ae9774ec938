"""The pages of ``tokeval.page`` in headless Chromium (``tests/report/browser.py``; missing, the
tests fail): no console message, every chart label inside its chart and clear of the others,
no page wider than the window; and the sweep's line chart, whose points are checked against
the log scale here. The numbers on the page are checked against the evaluation's, which
``test_evaluate`` checks against peers."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.conftest import VOCAB
from tests.report.browser import Browser
from tests.report.test_report import LAYOUT_PROBLEMS
from tests.tokeval.test_sweep import slices
from tokpipe.report import charts
from tokpipe.tokeval import evaluate_tokenizers, evaluation_page, sweep_page, sweep_vocab_sizes
from tokpipe.tokeval.page import percent, token_cell
from tokpipe.tokeval.evaluate import Token


def open_page(html: str, path: Path, width: int) -> Browser:
    path.write_text(html, encoding="utf-8")
    browser = Browser(width=width)
    browser.open(path)
    assert browser.problems() == [], browser.problems()
    assert browser.evaluate(LAYOUT_PROBLEMS) == []
    return browser


def test_line_chart_puts_points_on_a_log_axis() -> None:
    svg = charts.line_chart([charts.Curve("en", [(1000, 2.0), (10_000, 3.0), (100_000, 3.5)]),
                             charts.Curve("zh", [(1000, 1.0), (10_000, 1.2), (100_000, 1.3)], charts.REJECTED)],
                            x_label="vocabulary size", y_label="chars/token", log_x=True)
    dots = [(float(x), float(y)) for x, y in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)]
    assert len(dots) == 6 and svg.count("<polyline") == 2
    xs = [x for x, _ in dots[:3]]
    # Equal ratios of x, equal steps on the page.
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.2)
    # Up the page (smaller y) for larger values; 0 at the axis.
    assert dots[0][1] > dots[1][1] > dots[2][1]
    assert dots[3][1] > dots[0][1]
    assert ">1k<" in svg and ">10k<" in svg and ">100k<" in svg and "(log scale)" in svg


def test_crowded_tick_labels_are_left_out() -> None:
    svg = charts.line_chart([charts.Curve("a", [(1000, 1.0), (1001, 1.0), (100_000, 2.0)])], x_label="x",
                            y_label="y", log_x=True)
    assert svg.count(">1k<") == 1  # 1000 and 1001 both read 1k, too close to label both


def test_cells() -> None:
    assert [percent(v) for v in (0, 0.00001234, 0.5)] == ["0%", "0.0012%", "50.0%"]
    assert token_cell(Token(5, " the", 4)) == "'␣the' (4 bytes)"
    assert token_cell(Token(5, "-" * 64, 64)) == "'" + "-" * 40 + "…' (64 bytes)"


def test_a_share_below_one_never_reads_as_all() -> None:
    # 2,999 of 3,000 documents round-trip: rounded to one place that would read "100.0%",
    # as if all did, beside a note saying the round trip is below 100%.
    assert percent(2999 / 3000) == "99.96%"
    assert percent(99_999 / 100_000) == "99.99%"
    assert percent(1.0) == "100.0%"
    assert percent(0.9994) == "99.9%"


@pytest.mark.parametrize("width", [1280, 720])
def test_the_evaluation_page_in_the_browser(tmp_path: Path, width: int) -> None:
    records = [{"text": "Hello world, this is English text.", "language": "en"},
               {"text": "<script>alert(1)</script> 猫が好きです。", "language": "ja<b>"}]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    evaluation = evaluate_tokenizers([VOCAB / "cl100k_base.tiktoken.gz", VOCAB / "bert_base_uncased_vocab.txt",
                                      VOCAB / "spm_botchan_unigram_1000.model"], corpus, by="language")
    html = evaluation_page(evaluation)
    assert "<script>" not in html and "ja&lt;b&gt;" in html
    with open_page(html, tmp_path / "eval.html", width) as browser:
        text = browser.evaluate("document.body.innerText")
        for name in ("cl100k_base.tiktoken.gz", "bert_base_uncased_vocab.txt", "spm_botchan_unigram_1000.model",
                     "ja<b>", "en"):
            assert name in text
        m = evaluation.overall["cl100k_base.tiktoken.gz"]
        assert f"{m.chars_per_token:.2f}" in text
        assert browser.evaluate("document.querySelectorAll('svg.chart.columns rect').length") == 3
        browser.screenshot(tmp_path / "eval.png")


def test_the_sweep_page_draws_a_curve_per_language(tmp_path: Path) -> None:
    train, held = slices(tmp_path)
    sweep = sweep_vocab_sizes("unigram", [1000, 1500, 2000, 100_000], train, held)
    with open_page(sweep_page(sweep), tmp_path / "sweep.html", 1280) as browser:
        charts_on_page = browser.evaluate("document.querySelectorAll('svg.chart.lines').length")
        assert charts_on_page == 2
        # One line per language and one for every document, a dot per trained size.
        assert browser.evaluate("document.querySelector('svg.chart.lines').querySelectorAll('polyline').length") == 3
        titles = browser.evaluate("[...document.querySelector('svg.chart.lines').querySelectorAll('circle title')]"
                                  ".map(t => t.textContent)")
        assert len(titles) == 9
        latin = sweep.evaluation.per_group["Latin"]
        assert f"Latin: 1k: {charts.compact(latin['1k'].chars_per_token)}" in titles
        text = browser.evaluate("document.body.innerText")
        assert "too large" in text  # the size it could not train
        browser.screenshot(tmp_path / "sweep.png")
    assert math.isfinite(latin["2k"].chars_per_token)


def test_a_sweep_of_many_languages_draws_the_largest_and_a_bpe_draws_no_fallback(tmp_path: Path) -> None:
    records = [{"text": f"text {n} " * (n + 1), "language": f"l{n:02d}"} for n in range(14)]
    held = tmp_path / "held.jsonl"
    held.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    sweep = sweep_vocab_sizes("bpe", [300, 320], held, held)
    html = sweep_page(sweep)
    # One line per colour: every document and the 9 largest languages (the longest texts).
    assert html.count("<polyline") == len(charts.PALETTE) == 10
    assert "The 9 largest of 14 groups" in html
    # Points sit at the size trained (this corpus runs out of pieces before 300).
    trained = sweep.points[0].vocab_size
    assert trained is not None and trained < 300
    assert f"l13: {charts.compact(trained)}:" in html and f"l04: {charts.compact(trained)}:" not in html
    assert "so it is not drawn" in html
    with open_page(html, tmp_path / "sweep.html", 1280):
        pass
