#!/usr/bin/env python3
"""What ``keep_freed_memory`` (glibc ``mallopt``, set by the command line and the workers)
saves: the JSON Lines reader alone, and reading plus encoding (the tokenize stage), over
docs.jsonl, each in a fresh process with and without it, alternating.

Each row is the best of --runs runs: wall seconds, CPU seconds (user + system) and minor
page faults of the timed part (the imports and the tokenizer load are not timed).

    python3 benches/python/bench_reader_malloc.py --runs 5
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import DEFAULT_CORPUS, VOCAB_DIR, print_machine_facts  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from tokpipe.pipeline.config import StageSpec
from tokpipe.pipeline.engines.units import prefetched
from tokpipe.pipeline.allocator import keep_freed_memory
from tokpipe.pipeline.readers import ReaderOptions, plan_tasks, read_task

path, mode, keep, vocab = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
if keep:
    keep_freed_memory()
options = ReaderOptions(extra_fields=False)
stage = StageSpec("tokenize", {"tokenizer": vocab, "keep_text": False}).build() if mode == "encode" else None

def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime, r.ru_minflt

t0, c0, f0 = usage()
documents = 0
for task in plan_tasks([path], options):
    for batch in prefetched(read_task(task, options, lambda error: None)):
        documents += batch.num_rows
        if stage is not None:
            stage.process(batch)
t1, c1, f1 = usage()
print(json.dumps({"documents": documents, "wall": t1 - t0, "cpu": c1 - c0, "faults": f1 - f0}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--vocab", default=str(VOCAB_DIR / "cl100k_base.tiktoken.gz"))
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    path = args.corpus / "docs.jsonl"
    print_machine_facts()
    best: dict[tuple[str, bool], dict[str, float]] = {}
    for _ in range(args.runs):
        for mode in ("read", "encode"):
            for keep in (False, True):
                out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode, "1" if keep else "0", args.vocab],
                                     check=True, capture_output=True, text=True).stdout
                got = json.loads(out)
                slot = best.setdefault((mode, keep), got)
                for key in ("wall", "cpu", "faults"):
                    slot[key] = min(slot[key], got[key])
    print(f"\n{path} ({path.stat().st_size / 1e6:.0f} MB), best of {args.runs}\n")
    print("| work | keep_freed_memory | seconds | CPU-s | page faults |")
    print("|---|---|---:|---:|---:|")
    for (mode, keep), r in best.items():
        work = "read JSON Lines" if mode == "read" else "read + tokenize stage"
        print(f"| {work} | {'yes' if keep else 'no'} | {r['wall']:.2f} | {r['cpu']:.2f} | {int(r['faults']):,} |")


if __name__ == "__main__":
    main()
