#!/usr/bin/env python3
"""HTML-to-text extraction: speed and output quality of the candidates for the WARC reader.

What is measured
----------------
Candidates (each one call per HTML document, bytes in, text out):

  resiliparse/main     resiliparse.extract.html2text.extract_plain_text(tree, main_content=True)
  resiliparse/full     the same with main_content=False (every visible text node)
  trafilatura          trafilatura.extract(html)  (its defaults: main content, no comments)

Inputs:

  warc     the HTTP response bodies of ``../shared/corpora/web/*.warc.gz`` (22 real pages from
           the web, parsed with fastwarc); speed is docs/s over them.
  pydocs   the benchmark corpus's ``python-html`` documents (the Python docs rendered as
           HTML, ~50 MB) paired with their ``python-txt`` sources (``_sources/X.rst.txt``): a
           free ground truth for "the main text of the page". Quality is the bag-of-words F1
           between a candidate's output and the reST source (markup words included, so no
           candidate reaches 1.0; it ranks, it does not grade).

Each candidate extracts every document once to warm up, then ``--runs`` more times; the best run
is reported. Single process, single thread.

    python benches/python/bench_extract.py                       # warc + pydocs
    python benches/python/bench_extract.py --corpus DIR --runs 3
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import re
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

WEB = _corpus.SHARED_CORPORA / "web"
WORD = re.compile(r"\w+")


def warc_html_bodies() -> list[bytes]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    bodies: list[bytes] = []
    for path in sorted(glob.glob(str(WEB / "*.warc.gz"))):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.response, parse_http=True):
                if "html" in (record.http_content_type or ""):
                    bodies.append(record.reader.read())
    return bodies


def pydocs_pairs(corpus: Path) -> list[tuple[bytes, str]]:
    """(html bytes, reST source text) for every python-html page whose source is there."""
    html: dict[str, str] = {}
    sources: dict[str, str] = {}
    with open(corpus / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc["source"] == "python-html":
                html[doc["id"][len("python/") : -len(".html")]] = doc["text"]
            elif doc["source"] == "python-txt":
                sources[doc["id"][len("python/_sources/") : -len(".rst.txt")]] = doc["text"]
    return [(html[key].encode("utf-8"), sources[key]) for key in sorted(html) if key in sources]


def candidates() -> dict[str, Callable[[bytes], str]]:
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from resiliparse.parse.html import HTMLTree

    def resiliparse_main(body: bytes) -> str:
        tree = HTMLTree.parse(bytes_to_str(body, detect_encoding(body)))
        return extract_plain_text(tree, main_content=True)

    def resiliparse_full(body: bytes) -> str:
        tree = HTMLTree.parse(bytes_to_str(body, detect_encoding(body)))
        return extract_plain_text(tree, main_content=False)

    def trafilatura_default(body: bytes) -> str:
        return trafilatura.extract(body) or ""

    return {
        "resiliparse/main": resiliparse_main,
        "resiliparse/full": resiliparse_full,
        "trafilatura": trafilatura_default,
    }


def bag_f1(candidate: str, reference: str) -> float:
    got = collections.Counter(WORD.findall(candidate.lower()))
    want = collections.Counter(WORD.findall(reference.lower()))
    overlap = sum((got & want).values())
    if not overlap:
        return 0.0
    precision = overlap / sum(got.values())
    recall = overlap / sum(want.values())
    return 2 * precision * recall / (precision + recall)


def best_time(extract: Callable[[bytes], str], bodies: list[bytes], runs: int) -> tuple[float, list[str]]:
    outputs = [extract(body) for body in bodies]  # warm-up, and the outputs to judge
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for body in bodies:
            extract(body)
        best = min(best, time.perf_counter() - started)
    return best, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=_corpus.DEFAULT_CORPUS)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    extractors = candidates()
    warc = warc_html_bodies()
    warc_mb = sum(map(len, warc)) / 1e6
    print(f"## warc: {len(warc)} HTML responses, {warc_mb:.2f} MB\n")
    print("| extractor | docs/s | MB/s | mean chars out |")
    print("|---|---:|---:|---:|")
    for name, extract in extractors.items():
        seconds, outputs = best_time(extract, warc, args.runs)
        mean_chars = sum(map(len, outputs)) / len(outputs)
        print(f"| {name} | {len(warc) / seconds:,.0f} | {warc_mb / seconds:.1f} | {mean_chars:,.0f} |")

    if not (args.corpus / "docs.jsonl").exists():
        print(f"\n(no benchmark corpus at {args.corpus}; pydocs skipped)")
        return
    pairs = pydocs_pairs(args.corpus)
    bodies = [body for body, _ in pairs]
    mb = sum(map(len, bodies)) / 1e6
    print(f"\n## pydocs: {len(pairs)} pages, {mb:.1f} MB of HTML\n")
    print("| extractor | docs/s | MB/s | bag-of-words F1 vs reST source (mean) | empty outputs |")
    print("|---|---:|---:|---:|---:|")
    for name, extract in extractors.items():
        seconds, outputs = best_time(extract, bodies, args.runs)
        f1 = sum(bag_f1(out, ref) for out, (_, ref) in zip(outputs, pairs)) / len(pairs)
        empty = sum(1 for out in outputs if not out.strip())
        print(f"| {name} | {len(bodies) / seconds:,.0f} | {mb / seconds:.1f} | {f1:.3f} | {empty} |")


if __name__ == "__main__":
    main()
