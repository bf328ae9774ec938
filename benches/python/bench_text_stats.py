"""text_stats, blocklist and language stages: throughput on the bench corpus.

    PYTHONPATH=python python3 benches/python/bench_text_stats.py [BENCH_CORPUS/docs.jsonl] [--mb 50]
        [--language-docs 2000]

Reads the corpus's first ``--mb`` MB of documents (in file order). Prints MB/s (wall clock)
and MB per CPU second (= per core, and steady when other work shares the machine) for
``text_stats`` and ``blocklist`` (the Rust kernels use all cores), and documents/s for
``language`` (Lingua's parallel batch API, first 1,000 characters of each document; also
Lingua's low-accuracy mode) on the first ``--language-docs`` documents, beside Lingua called
one document at a time from Python (what a per-document stage would do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import pyarrow as pa

from tokpipe.pipeline.stages.language import LanguageFilter
from tokpipe.pipeline.stages.text_stats import Blocklist, TextStats

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

# A blocklist of common English words and phrases, so that matches are frequent (the costly case).
WORDS = ["the", "of the", "kernel", "driver", "memory", "function", "return", "python", "module", "error",
         "file system", "user space", "interrupt", "device tree", "lock", "free", "buffer", "page", "bad", "hack"]


def timed(fn, repeat: int = 3) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads) of the fastest of ``repeat`` runs.
    On a shared machine the CPU seconds are the steadier figure: per core means per CPU second."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def main() -> None:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(_corpus.DEFAULT_DOCS))
    ap.add_argument("--mb", type=float, default=50.0, help="read this many MB of documents")
    ap.add_argument("--language-docs", type=int, default=2000)
    args = ap.parse_args()
    docs, size, sources = [], 0, {}
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append(d["text"])
            n = len(d["text"].encode())
            size += n
            sources[d["source"]] = sources.get(d["source"], 0) + n
            if size >= args.mb * 1e6:
                break
    mb = size / 1e6
    cores = len(os.sched_getaffinity(0))
    print(f"{len(docs)} documents, {mb:.1f} MB ({', '.join(f'{s} {b / 1e6:.1f} MB' for s, b in sources.items())}), "
          f"{cores} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    batch = pa.record_batch([pa.array(docs, type=pa.large_string())], names=["text"])

    stats, block = TextStats(), Blocklist(words=WORDS, max_per_1000_words=None)
    for name, stage in (("text_stats", stats), ("blocklist", block)):
        wall, cpu = timed(lambda: stage.process(batch))
        print(f"{name:12s} {mb / wall:8.1f} MB/s wall  {mb / cpu:8.1f} MB per CPU second  "
              f"({wall:.2f} s wall, {cpu:.2f} s CPU)")

    sample = docs[:args.language_docs]
    stage = LanguageFilter(min_score=None)
    # Lingua loads a language's models when a text first needs them: the first run warms up.
    wall, cpu = timed(lambda: stage.detect(pa.array(sample)), repeat=2)
    print(f"language     {len(sample) / wall:8.0f} docs/s wall  {len(sample) / cpu:8.0f} docs per CPU second  "
          f"({len(sample)} docs, first {stage.max_chars} chars, {wall:.2f} s wall, {cpu:.2f} s CPU)")
    fast = LanguageFilter(min_score=None, low_accuracy=True)
    wall, cpu = timed(lambda: fast.detect(pa.array(sample)), repeat=2)
    print(f"language, low_accuracy {len(sample) / wall:8.0f} docs/s wall  {len(sample) / cpu:8.0f} docs per CPU second")
    detector = stage._detector
    loop = sample[:max(1, len(sample) // 4)]
    wall, cpu = timed(lambda: [detector.compute_language_confidence_values(t[:stage.max_chars]) for t in loop],
                      repeat=1)
    print(f"lingua, one document at a time from Python: {len(loop) / wall:8.0f} docs/s wall  "
          f"{len(loop) / cpu:8.0f} docs per CPU second ({len(loop)} docs)")


if __name__ == "__main__":
    main()
