"""``tokpipe report``, loaded in headless Chromium (Debian's ``/usr/bin/chromium``, driven over
the DevTools pipe, see ``tests/report/browser.py``; missing, the tests fail).

Each test makes its corpus, runs ``tokpipe clean`` (and ``tokenize``) and ``tokpipe report``
as a user would, opens the page and checks what a person would look for. Expected numbers
come from the corpus the test wrote, from the Parquet files (read here with pyarrow) or from
the manifest's JSON, never from the report's own code. Every page must load without a console
message, keep every chart label inside its chart and clear of the others, and not be wider
than the window; screenshots of it are left in the test's tmp folder.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA, REPO, VOCAB
from tests.report.browser import Browser

#: Chart labels outside their chart, on top of each other or crossed by a threshold or percentile
#: line, and a page wider than the window.
LAYOUT_PROBLEMS = """(() => {
  const bad = [];
  for (const svg of document.querySelectorAll('svg.chart')) {
    const box = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')];
    const rects = texts.map(t => t.getBoundingClientRect());
    rects.forEach((r, i) => {
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        bad.push('outside its chart: ' + texts[i].textContent);
      for (let j = i + 1; j < rects.length; j++) {
        const q = rects[j];
        if (r.left < q.right - 0.5 && q.left < r.right - 0.5 && r.top < q.bottom - 0.5 && q.top < r.bottom - 0.5)
          bad.push('overlap: ' + texts[i].textContent + ' / ' + texts[j].textContent);
      }
    });
    for (const line of svg.querySelectorAll('line.threshold, line.mark')) {
      const l = line.getBoundingClientRect();
      rects.forEach((r, i) => {
        if (l.left > r.left + 0.5 && l.left < r.right - 0.5 && l.bottom > r.top + 0.5 && l.top < r.bottom - 0.5)
          bad.push('a line through the label: ' + texts[i].textContent);
      });
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth)
    bad.push('page wider than the window: ' + document.documentElement.scrollWidth);
  return bad;
})()"""


def tokpipe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", cwd=REPO)


def ok(*args: str) -> str:
    result = tokpipe(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def short_hash(text: str) -> int:
    """The report's sample order: the first 8 bytes of the id's BLAKE2b-128, big-endian."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()[:8], "big")


N_NORMAL, N_SHORT, N_FEW_WORDS = 30, 4, 3
DUPLICATES = {"A": 4, "B": 2}  # copies of each duplicated text
#: Addresses in the documents the pii stage sees (the kept ones: the normal documents every
#: fifth of which names one; the short ones, rejected before it, hold the others).
KEPT_EMAILS = sum(1 for i in range(N_NORMAL) if i % 5 == 0)


def write_corpus(root: Path) -> Path:
    records = []
    for i in range(N_NORMAL):
        text = (f"Document {i} talks about subject number {i} in plain and simple words. " * (1 + i % 7)
                + (f"Write to person{i}@mail.example for more." if i % 5 == 0 else ""))
        records.append({"id": f"doc-{i}", "text": text, "source": "news" if i % 2 == 0 else "forum",
                        "url": f"https://www.site{i % 3}.example/page/{i}"})
    for i in range(N_SHORT):
        records.append({"id": f"short-{i}", "text": f"tiny {i} secret@leak.example", "source": "forum",
                        "url": f"http://short.example/{i}"})
    for name, copies in DUPLICATES.items():
        for c in range(copies):
            records.append({"id": f"dup-{name}-{c}", "text": f"The duplicated text {name} says the same thing every "
                            f"time it is copied, word for word, in each copy.", "source": "news",
                            "url": f"https://mirror{c}.example/{name}"})
    for i in range(N_FEW_WORDS):
        records.append({"id": f"few-{i}", "text": "Pneumonoultramicroscopicsilicovolcanoconiosis-" * 2 + str(i),
                        "source": "news", "url": f"https://words.example/{i}"})
    corpus = root / "corpus"
    corpus.mkdir()
    lines = [json.dumps(r) for r in records] + ['{"id": "broken", "text": ']
    (corpus / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "pipeline.yaml").write_text(
        "stages:\n"
        "  - type: length_filter\n    min: 40\n"
        "  - type: exact_dedup\n"
        "  - type: text_stats\n    min_words: 5\n"
        "  - type: pii\n    action: mask\n", encoding="utf-8")
    return corpus


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    corpus = write_corpus(root)
    ok("clean", str(corpus), "-c", str(root / "pipeline.yaml"), "-o", str(root / "clean"), "-q", "-w", "1")
    return root / "clean"


def shards(out: Path, key: str) -> list[Path]:
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return [out / e["path"] for e in manifest[key]]


def look(page: Path, shots: Path, width: int = 1280) -> tuple[Browser, str]:
    """Open ``page``; check it loads clean and lays out; leave screenshots in ``shots``."""
    browser = Browser(width=width)
    browser.open(page)
    assert browser.problems() == [], browser.problems()
    assert browser.evaluate(LAYOUT_PROBLEMS) == []
    height = browser.evaluate("document.documentElement.scrollHeight")
    shots.mkdir(exist_ok=True)
    for n, y in enumerate(range(0, height, 1400)):
        browser.screenshot(shots / f"{page.stem}-{n}.png", y, min(1400, height - y))
    assert (shots / f"{page.stem}-0.png").stat().st_size > 10_000
    return browser, browser.evaluate("document.body.innerText")


def test_a_clean_run_in_the_browser(clean_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    out = ok("report", str(clean_run), "-o", str(page))
    assert str(page) in out
    browser, text = look(page, tmp_path)
    with browser:
        kept = pq.read_table(shards(clean_run, "shards"))
        rejected = pq.read_table(shards(clean_run, "rejected")).to_pylist()
        written = N_NORMAL + N_SHORT + sum(DUPLICATES.values()) + N_FEW_WORDS
        assert kept.num_rows == N_NORMAL + len(DUPLICATES)
        # The funnel: every stage's kept count and share of the 45 records read (one unreadable).
        funnel = browser.evaluate("document.querySelector('svg.funnel').textContent")
        assert f"{written} ({written / (written + 1):.1%})" in funnel
        assert f"{kept.num_rows} ({kept.num_rows / (written + 1):.1%})" in funnel
        # Every drop reason, with its count, and its samples: the smallest hashes of their ids.
        reasons = Counter((r["stage"], r["reason"]) for r in rejected)
        assert set(reasons) == {("length_filter", "too_short"), ("exact_dedup", "duplicate"),
                                ("text_stats", "words")}
        table = browser.evaluate("document.querySelector('table.reasons').innerText")
        for (stage, reason), count in reasons.items():
            assert f"{stage}\t{reason}\t{count}\t" in table
            ids = sorted((r["id"] for r in rejected if (r["stage"], r["reason"]) == (stage, reason)), key=short_hash)
            shown = browser.evaluate(f"document.getElementById('samples-{stage}-{reason}').innerText")
            assert all(f"id {i}" in shown for i in ids[:3]) and not any(f"id {i}\n" in shown for i in ids[3:])
        assert ("read", "malformed_json") not in reasons and "malformed_json\t1" in text
        # The pii stage scrubbed what was rejected: the sample texts hold no address.
        assert "secret@leak.example" not in browser.evaluate("document.documentElement.outerHTML")
        assert f"email\t{KEPT_EMAILS}" in text
        # Histograms: one per numeric column the stages wrote, with text_stats' threshold drawn.
        stat_columns = [n for n in kept.column_names if n.startswith("stat_")]
        assert len(stat_columns) == 18
        headings = browser.evaluate("[...document.querySelectorAll('h3')].map(h => h.textContent)")
        assert set(stat_columns) | {"chars", "words"} <= set(headings)
        words = browser.evaluate("""(() => { const h = [...document.querySelectorAll('h3')]
            .find(h => h.textContent === 'stat_words'); return h.parentElement.innerHTML; })()""")
        assert 'class="threshold"' in words and "text_stats.min_words 5" in words
        # Diversity: sources and domains counted from the kept rows here.
        for source, count in Counter(kept.column("source").to_pylist()).items():
            assert f"{source}\t{count}\t" in text
        hosts = Counter(urlsplit(u).hostname.removeprefix("www.") for u in kept.column("url").to_pylist())
        domains = browser.evaluate("[...document.querySelectorAll('table.distribution')].map(t => t.innerText)"
                                   ".join('\\n')")
        for host, count in hosts.items():
            assert f"{host}\t{count}\t" in domains
        # Duplicate clusters: A in 4 copies, B in 2.
        assert "2 clusters of two or more documents; 4 documents removed as duplicates; the largest cluster has 4 " \
               "documents" in text
        assert browser.evaluate("document.querySelectorAll('svg.columns rect').length") == 7
        assert "1-grams" in text and "distinct / all" in text


def test_two_runs_side_by_side(clean_run: Path, tmp_path: Path) -> None:
    root = clean_run.parent
    config = tmp_path / "looser.yaml"
    config.write_text("stages:\n  - type: length_filter\n    min: 10\n  - type: exact_dedup\n", encoding="utf-8")
    looser = tmp_path / "looser"
    ok("clean", str(root / "corpus"), "-c", str(config), "-o", str(looser), "-q", "-w", "1")
    page = tmp_path / "before-after.html"
    ok("report", str(clean_run), str(looser), "-o", str(page))
    browser, text = look(page, tmp_path)
    with browser:
        columns = browser.evaluate("getComputedStyle(document.querySelector('.runs')).gridTemplateColumns")
        assert len(columns.split()) == 2
        header = browser.evaluate("document.querySelector('table.reasons tr').innerText")
        assert str(clean_run) in header and str(looser) in header
        kept = sum(pq.read_metadata(p).num_rows for p in shards(looser, "shards"))
        assert kept == N_NORMAL + N_SHORT + len(DUPLICATES) + N_FEW_WORDS  # nothing under 10 characters
        assert f"documents kept\t{N_NORMAL + len(DUPLICATES)} (" in text and f"\t{kept} (" in text


def test_a_tokenize_run_in_the_browser(clean_run: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    ok("tokenize", str(clean_run), "-t", str(VOCAB / "cl100k_base.tiktoken.gz"), "-o", str(tokens), "--seq-len", "64",
       "-q", "-w", "1")
    page = tmp_path / "tokens.html"
    ok("report", str(tokens), "-o", str(page))
    browser, text = look(page, tmp_path)
    with browser:
        manifest = json.loads((tokens / "manifest.json").read_text(encoding="utf-8"))
        lengths = {}
        for split in manifest["splits"].values():
            table = pq.read_table(tokens / split["documents_file"])
            lengths.update(zip(table.column("id").to_pylist(), table.column("length").to_pylist()))
        assert f"{len(lengths):,} documents, {sum(lengths.values()):,} tokens" in text
        labels = browser.evaluate("[...document.querySelectorAll('svg.histogram text')].map(t => t.textContent)")
        assert "seq_len 64" in labels and any(label.startswith("p90 ") for label in labels)
        assert browser.evaluate("document.querySelectorAll('svg.histogram').length") == 2  # documents and tokens
        kept = pq.read_table(shards(clean_run, "shards"), columns=["id", "source"]).to_pylist()
        by_source = Counter()
        for row in kept:
            by_source[row["source"]] += lengths[row["id"]]
        for source, count in by_source.items():
            assert f"{source}\t{count:,}\t" in text


def test_the_default_web_pipeline_on_common_crawl(tmp_path: Path) -> None:
    """The issue's done-when: examples/web.yaml over the shared Common Crawl samples."""
    web = tmp_path / "web"
    ok("clean", str(CORPORA / "web"), "-c", str(REPO / "examples" / "web.yaml"), "-o", str(web), "-q")
    page = tmp_path / "web.html"
    ok("report", str(web), "-o", str(page))
    browser, text = look(page, tmp_path)
    with browser:
        manifest = json.loads((web / "manifest.json").read_text(encoding="utf-8"))
        assert [s["type"] for s in manifest["config"]["stages"]] == [
            "language", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality", "minhash_dedup", "pii"]
        assert browser.evaluate("document.querySelectorAll('svg.funnel text').length") >= 2 * 8
        rejected = pq.read_table(shards(web, "rejected"), columns=["stage", "reason"]).to_pylist()
        for stage, reason in {(r["stage"], r["reason"]) for r in rejected}:
            shown = browser.evaluate(f"document.getElementById('samples-{stage}-{reason}').innerText")
            assert shown.count("\nid ") >= 1, (stage, reason)
        thresholds = browser.evaluate("[...document.querySelectorAll('svg.histogram line.threshold')].length")
        assert thresholds >= 3  # language.min_score, gopher_quality.min_doc_words and max_doc_words
        languages = Counter(pq.read_table(shards(web, "shards"), columns=["language"]).column("language").to_pylist())
        for language, count in languages.items():
            assert f"{language}\t{count}\t" in text
        assert "Top domains" in text and "distinct domains" in text
        assert "minhash_dedup" in browser.evaluate("[...document.querySelectorAll('h4')].map(h => h.textContent)")


def test_a_folder_that_is_no_output_is_one_line_exit_2(tmp_path: Path) -> None:
    result = tokpipe("report", str(tmp_path), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "not a tokpipe output folder" in result.stderr, result.stderr
    assert not (tmp_path / "r.html").exists()


def test_help_names_every_option() -> None:
    text = ok("report", "--help")
    for option in ("-o, --output", "-q, --quiet", "--storage-option"):
        assert option in text
