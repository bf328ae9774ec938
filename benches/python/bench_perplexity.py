"""Perplexity scoring: tokpipe's Rust scorer vs the ``kenlm`` module (``Model.score`` per
line, in Python, as CCNet calls it), same 5-gram, same documents.

    PYTHONPATH=python python3 benches/python/bench_perplexity.py [BENCH_CORPUS/docs.jsonl]
        [--train-mb 20] [--score-mb 40] [--order 5]

English documents of the bench corpus (linux-rst, python-txt, gcide) alternate between a
training half (a whitespace-word 5-gram trained with ``train_lm``, up to --train-mb) and a
scoring half (up to --score-mb). Both score every document as CCNet does (lines cut at "\\n",
each ``<s> line </s>``). Prints training time, load times, MB/s per core (tokpipe uses all
cores: its MB/s is divided by the core count; kenlm runs on one core), the ratio, and the
largest difference between the two document scores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import kenlm
import numpy as np
import pyarrow as pa

from tokpipe import LanguageModel, train_lm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

SOURCES = ("linux-rst", "python-txt", "gcide")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(_corpus.DEFAULT_DOCS))
    ap.add_argument("--train-mb", type=float, default=20.0)
    ap.add_argument("--score-mb", type=float, default=40.0)
    ap.add_argument("--order", type=int, default=5)
    args = ap.parse_args()
    train, score = [], []
    train_bytes = score_bytes = 0
    with open(args.corpus, encoding="utf-8") as f:
        for i, line in enumerate(f):
            d = json.loads(line)
            if d.get("source") not in SOURCES:
                continue
            size = len(d["text"].encode())
            if i % 2 == 0 and train_bytes < args.train_mb * 1e6:
                train.append(d["text"])
                train_bytes += size
            elif i % 2 == 1 and score_bytes < args.score_mb * 1e6:
                score.append(d["text"])
                score_bytes += size
            if train_bytes >= args.train_mb * 1e6 and score_bytes >= args.score_mb * 1e6:
                break
    # The threads tokpipe scores with (RAYON_NUM_THREADS=1 measures one core against one core).
    cores = int(os.environ.get("RAYON_NUM_THREADS", 0)) or len(os.sched_getaffinity(0))
    print(f"train: {len(train)} documents, {train_bytes / 1e6:.1f} MB; score: {len(score)} documents, "
          f"{score_bytes / 1e6:.1f} MB; {cores} cores")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.arpa"
        started = time.perf_counter()
        lm = train_lm(texts=train, order=args.order, show_progress=False)
        lm.save(path)
        print(f"train_lm order {args.order}: {time.perf_counter() - started:.1f} s, n-grams {lm.kept}, "
              f"ARPA {path.stat().st_size / 1e6:.0f} MB")
        started = time.perf_counter()
        ours = LanguageModel.load(path)
        ours_load = time.perf_counter() - started
        started = time.perf_counter()
        theirs = kenlm.Model(str(path))
        print(f"load: tokpipe {ours_load:.1f} s, kenlm {time.perf_counter() - started:.1f} s")

    column = pa.array(score, type=pa.string())
    ours.document_scores(column[:100])  # warm the thread pool
    started = time.perf_counter()
    our_scores, our_lengths = ours.document_scores(column)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    their_scores = np.array([sum(theirs.score(line) for line in doc.split("\n")) for doc in score])
    kenlm_s = time.perf_counter() - started
    mb = score_bytes / 1e6
    ours_rate, kenlm_rate = mb / ours_s / cores, mb / kenlm_s
    print(f"tokpipe: {ours_s:.2f} s, {mb / ours_s:.1f} MB/s on {cores} cores = {ours_rate:.1f} MB/s/core")
    print(f"kenlm:   {kenlm_s:.2f} s, {kenlm_rate:.1f} MB/s/core (one core, Python loop over lines)")
    print(f"ratio per core: {ours_rate / kenlm_rate:.1f}x; tokens scored: {int(our_lengths.sum()):,}")
    diff = np.abs(our_scores - their_scores)
    print(f"largest |log10 p| difference per document: {diff.max():.2e}")


if __name__ == "__main__":
    main()
