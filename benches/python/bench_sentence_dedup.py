#!/usr/bin/env python3
"""``sentence_dedup`` against datatrove's ``SentenceDedup`` (its three steps), per core, on the
same documents, and a check that both leave every document with the same text (or drop it).

Documents: the shared English corpora (botchan and tinyshakespeare in 30-line pieces, the
Common Crawl samples) with planted repeated spans (``tests/pipeline/stages/
test_sentence_dedup.py``'s ``plant``: runs of lines of one document inserted in another),
taken up to ``--mb`` MB. 3-sentence spans, datatrove's defaults on both sides
(``min_doc_words`` 50, ``min_num_sentences`` 3). datatrove runs its signature, find and filter
steps with one rank in a temporary folder, with its ``sha1`` hash (its default xxhash64 fails
on the str it is given with the installed ``xxhash``). tokpipe runs the stage's ``keys``,
``decide`` and ``revise`` on one Rayon thread (``RAYON_NUM_THREADS=1``, set below before tokpipe
is imported). Per core = MB of text per CPU second (``time.process_time``).

    python3 benches/python/bench_sentence_dedup.py [--mb 4] [--runs 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import print_machine_facts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=4.0, help="MB of documents (default 4)")
    parser.add_argument("--runs", type=int, default=3, help="tokpipe runs, best kept (default 3)")
    args = parser.parse_args()

    from loguru import logger

    logger.remove()
    logging.disable(logging.INFO)
    from tests.conftest import real_english_documents
    from tests.pipeline.stages.test_sentence_dedup import datatrove_dedup, plant, run_stage

    real = [d for d in real_english_documents() if len(d) < 100_000]
    texts: list[str] = []
    size, seed = 0, 0
    while size < args.mb * 1e6:
        for t in plant(real, len(real) // 4, seed=seed)[len(real) if seed else 0:]:
            texts.append(t)
            size += len(t.encode())
            if size >= args.mb * 1e6:
                break
        seed += 1
    mb = size / 1e6

    print_machine_facts(("datatrove", "spacy", "pyarrow"))
    print(f"{len(texts):,} documents, {mb:.2f} MB, 3-sentence spans\n")

    best = best_wall = float("inf")
    for _ in range(args.runs):
        started, wall = time.process_time(), time.perf_counter()
        ours, stage = run_stage([texts[i:i + 1000] for i in range(0, len(texts), 1000)])
        best = min(best, time.process_time() - started)
        best_wall = min(best_wall, time.perf_counter() - wall)
    with tempfile.TemporaryDirectory() as tmp:
        started, wall = time.process_time(), time.perf_counter()
        theirs = datatrove_dedup(texts, Path(tmp))
        peer, peer_wall = time.process_time() - started, time.perf_counter() - wall

    same = sum(a == b for a, b in zip(ours, theirs))
    changed = sum(t is not None and t != o for t, o in zip(theirs, texts))
    extra = stage.stats.extra
    print("| | CPU seconds | wall seconds | MB per CPU second | changed | dropped |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| tokpipe `sentence_dedup` (Rust, 1 thread) | {best:.2f} | {best_wall:.2f} | {mb / best:.2f} | "
          f"{sum(o is not None and o != t for o, t in zip(ours, texts)):,} | {ours.count(None):,} |")
    print(f"| datatrove `SentenceDedup` (3 steps) | {peer:.2f} | {peer_wall:.2f} | {mb / peer:.3f} | {changed:,} | "
          f"{theirs.count(None):,} |")
    print(f"\n**{peer / best:.1f}x datatrove per core**; same result on {same:,} of {len(texts):,} documents; "
          f"{extra['spans_removed']:,} spans and {extra['sentences_removed']:,} of {extra['sentences']:,} "
          f"sentences removed")


if __name__ == "__main__":
    main()
