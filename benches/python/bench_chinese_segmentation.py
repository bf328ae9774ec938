#!/usr/bin/env python3
"""Chinese, character level against word level (issue 23): BPE and Unigram trained with and
without ``pre_segment="jieba"`` at the same vocabulary size, measured on held-out Chinese text
by ``tokpipe.tokeval.evaluate_tokenizers`` (the evaluator of ``tokpipe eval-tokenizer``):
characters per token, and vocabulary use (the share of the vocabulary used, and how many
tokens make 90% of the uses). Also the speed of jieba on the training text, and the training
time with and without it.

Two corpora:

  zh_notes  the shared notes (../shared/corpora/text/zh_notes, 180 KB): training on every note
            but 003, whose text is held out (000 and 002 are near-duplicates of each other, so
            one of them would leak; 003 has no twin);
  bench     with ``--corpus DIR`` (built by ../shared/bench/build_corpus.py): its Chinese
            documents (``lang`` zh) of the sources linux-rst (the kernel docs' zh_CN and zh_TW
            translations) and fortunes-zh (classical poems), every 10th document held out.

    PYTHONPATH=python python3 benches/python/bench_chinese_segmentation.py [--corpus DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import SHARED_CORPORA, log, print_machine_facts  # noqa: E402

import tokpipe  # noqa: E402
from tokpipe import presegment  # noqa: E402
from tokpipe.tokeval import evaluate_tokenizers  # noqa: E402


def zh_notes() -> tuple[list[str], list[str]]:
    train, held_out = [], []
    for path in sorted((SHARED_CORPORA / "text" / "zh_notes").glob("*.txt")):
        lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line]
        (held_out if path.name.startswith("003") else train).extend(lines)
    return train, held_out


def bench_corpus(folder: Path) -> tuple[list[str], list[str]]:
    docs = []
    with open(folder / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc["lang"] == "zh" and doc["source"] in ("linux-rst", "fortunes-zh"):
                docs.append(doc["text"])
    return [d for i, d in enumerate(docs) if i % 10], [d for i, d in enumerate(docs) if i % 10 == 0]


def jieba_speed(texts: list[str]) -> tuple[float, float]:
    """MB/s and Han characters/s of the segmenter alone on ``texts`` (one core, best of 3)."""
    segmenter = presegment.segmenter("jieba", "bench")
    assert segmenter is not None
    size = sum(len(t.encode()) for t in texts)
    han = sum(len(run) for t in texts for run in presegment._HAN_RUN.findall(t))
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for text in texts:
            segmenter.parts(text)
        best = min(best, time.perf_counter() - started)
    return size / best / 1e6, han / best


def train(model: str, texts: list[str], vocab_size: int, pre_segment: str | None) -> tuple[tokpipe.Tokenizer, float]:
    started = time.perf_counter()
    if model == "bpe":
        tok = tokpipe.train_bpe(texts=texts, vocab_size=vocab_size, special_tokens=(), pre_segment=pre_segment,
                                show_progress=False)
    else:
        tok = tokpipe.train_unigram(texts=texts, vocab_size=vocab_size, pre_segment=pre_segment, show_progress=False)
    return tok, time.perf_counter() - started


def measure(name: str, train_texts: list[str], held_out: list[str], sizes: dict[str, list[int]]) -> None:
    size = sum(len(t.encode()) for t in train_texts)
    held = sum(len(t.encode()) for t in held_out)
    mb_s, han_s = jieba_speed(train_texts)
    print(f"### {name}: train {size / 1e3:,.0f} KB ({len(train_texts):,} documents), "
          f"held out {held / 1e3:,.0f} KB ({len(held_out):,} documents)\n")
    print(f"jieba (segmenting the Han runs of the training text, one core): {mb_s:.2f} MB/s of text, "
          f"{han_s / 1e3:,.0f} k Han characters/s\n")
    print("| model | vocab | level | train s | chars/token | vocab used | tokens for 90% of uses | round trip |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "held_out.jsonl"
        corpus.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in held_out),
                          encoding="utf-8")
        for model, vocab_sizes in sizes.items():
            for vocab_size in vocab_sizes:
                for level, pre_segment in (("character", None), ("word (jieba)", "jieba")):
                    log(f"{name}: {model} {vocab_size} {level}")
                    tok, seconds = train(model, train_texts, vocab_size, pre_segment)
                    m = evaluate_tokenizers({"t": tok}, corpus).overall["t"]
                    print(f"| {model} | {tok.vocab_size:,} | {level} | {seconds:.1f} | {m.chars_per_token:.3f} | "
                          f"{m.vocabulary_used:.1%} ({m.distinct_tokens:,}) | {m.tokens_for_90:,} | "
                          f"{m.round_trip_share:.0%} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="the bench corpus folder (docs.jsonl)")
    args = parser.parse_args()
    print_machine_facts(["tokpipe", "jieba"])
    train_texts, held_out = zh_notes()
    measure("zh_notes", train_texts, held_out, {"bpe": [1000, 2000, 4000], "unigram": [2500, 4000]})
    if args.corpus:
        train_texts, held_out = bench_corpus(args.corpus)
        measure("bench corpus, Chinese", train_texts, held_out, {"bpe": [8000, 16000, 32000],
                                                                  "unigram": [8000, 16000, 32000]})


if __name__ == "__main__":
    main()
