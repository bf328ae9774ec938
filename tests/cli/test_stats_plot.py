"""``tokpipe stats --plot``: the report's length histograms (documents and tokens per length,
p50/p90/p99 and ``seq_len`` marked) in an .html or .svg file, and a .png that says up front
which extra it needs.

Expected numbers come from the ``documents`` tables of the output, read here with pyarrow and
numpy; the page is checked in headless Chromium like the report's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, VOCAB
from tests.report.browser import Browser
from tests.report.test_report import LAYOUT_PROBLEMS


def tokpipe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", cwd=REPO, env=env)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plot")
    (root / "in").mkdir()
    texts = [" ".join(f"word{j}" for j in range(1 + (i * 37) % 400)) for i in range(120)]
    (root / "in" / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    result = tokpipe("tokenize", str(root / "in"), "-t", str(VOCAB / "cl100k_base.tiktoken.gz"), "-o",
                     str(root / "tokens"), "--seq-len", "256", "-q", "-w", "1")
    assert result.returncode == 0, result.stderr
    return root / "tokens"


def lengths_of(out: Path) -> np.ndarray:
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return np.concatenate([pq.read_table(out / split["documents_file"]).column("length").to_numpy()
                           for split in manifest["splits"].values()])


def test_the_html_plot_in_the_browser(tokens: Path, tmp_path: Path) -> None:
    plot = tmp_path / "lengths.html"
    result = tokpipe("stats", str(tokens), "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    lengths = lengths_of(tokens)
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    with Browser() as browser:
        browser.open(plot)
        assert browser.problems() == []
        assert browser.evaluate(LAYOUT_PROBLEMS) == []
        browser.screenshot(tmp_path / "lengths.png")
        labels = browser.evaluate("[...document.querySelectorAll('svg text')].map(t => t.textContent)")
        for name, value in (("p50", p50), ("p90", p90), ("p99", p99)):
            assert any(label.startswith(f"{name} ") for label in labels), labels
        assert "seq_len 256" in labels
        # y ticks on both charts: documents and tokens.
        assert browser.evaluate("document.querySelectorAll('svg.histogram').length") == 2
        y_labels = browser.evaluate("[...document.querySelectorAll('svg.histogram')].map(s => "
                                    "s.querySelector('text[transform]').textContent)")
        assert y_labels == ["documents", "tokens (token-weighted)"]
        text = browser.evaluate("document.body.innerText")
        assert f"{len(lengths):,} documents, {int(lengths.sum()):,} tokens" in text
        assert f"p50 {p50:,.0f}, p90 {p90:,.0f}, p99 {p99:,.0f}" in text


def test_an_svg_plot_is_one_svg_of_both_charts(tokens: Path, tmp_path: Path) -> None:
    plot = tmp_path / "lengths.svg"
    assert tokpipe("stats", str(tokens), "--plot", str(plot)).returncode == 0
    import xml.etree.ElementTree as ET

    root = ET.parse(plot).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(root.findall("{http://www.w3.org/2000/svg}svg")) == 2


def test_a_png_without_matplotlib_says_so_before_any_work(tokens: Path, tmp_path: Path) -> None:
    # matplotlib made unimportable whether or not it is installed here.
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('blocked by the test')\n", encoding="utf-8")
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])}
    result = tokpipe("stats", str(tokens), "--plot", str(tmp_path / "lengths.png"), env=env)
    assert result.returncode == 2
    assert result.stdout == ""  # nothing summarised first
    assert result.stderr.count("\n") == 1 and "tokpipe[plot]" in result.stderr and "matplotlib" in result.stderr
    assert not (tmp_path / "lengths.png").exists()


def test_a_plot_of_another_type_is_refused_up_front(tokens: Path, tmp_path: Path) -> None:
    result = tokpipe("stats", str(tokens), "--plot", str(tmp_path / "lengths.pdf"))
    assert result.returncode == 2 and result.stdout == "" and ".pdf" in result.stderr


def test_a_png_plot_draws_both_charts_with_matplotlib(tokens: Path, tmp_path: Path) -> None:
    # matplotlib comes with the test extra (the `plot` extra's library), so the .png path runs here.
    import matplotlib.image

    result = tokpipe("stats", str(tokens), "--plot", str(tmp_path / "lengths.png"))
    assert result.returncode == 0, result.stderr
    png = tmp_path / "lengths.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(str(png))
    assert pixels.shape[:2] == (600, 800)  # figsize (8, 6) at matplotlib's 100 dpi
    # The seq_len marker is drawn in pure red (axvline color="red"): some pixels are red.
    red = (pixels[..., 0] > 0.9) & (pixels[..., 1] < 0.1) & (pixels[..., 2] < 0.1)
    assert red.sum() > 100
