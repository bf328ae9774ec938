"""The Ray engine against the local one: throughput of the same pipeline against the number
of workers, on the same input.

    PYTHONPATH=python python3 benches/python/bench_ray.py [BENCH_CORPUS/docs.jsonl]
        [--mb 60] [--copies 1] [--task-mb 8] [--workers 1 2] [--out SCRATCH/ray]

The input is the first ``--mb`` MB of the corpus (whole lines), the pipeline
``exact_dedup``, ``gopher_quality``, ``minhash_dedup``. ``--copies K`` repeats that input K
times, copy ``c`` of a document with ``_c`` added to its id and `` c`` to its text: exact
dedup then finds no duplicates among the copies and every later stage sees K times the work,
as with a crawl's near-duplicates (minhash_dedup clusters the copies of each kept document).
Ray runs on a local instance with as many CPUs as the largest worker count; its start-up is
not timed. Both engines' outputs are checked to hold the same documents.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

CONFIG = {"stages": [{"type": "exact_dedup"}, {"type": "gopher_quality"}, {"type": "minhash_dedup"}]}


def kept_ids(out: str) -> list[str]:
    data = os.path.join(out, "data")  # the kept shards' folder
    files = sorted(f for f in os.listdir(data) if f.startswith("part-"))
    return sorted(i for f in files for i in pq.read_table(os.path.join(data, f), columns=["id"]).column("id").to_pylist())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(_corpus.DEFAULT_DOCS))
    ap.add_argument("--mb", type=int, default=60)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", default=str(_corpus.SCRATCH / "ray"))
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--task-mb", type=int, default=8)
    args = ap.parse_args()

    import ray

    import tokpipe.pipeline as pipeline

    os.makedirs(args.out, exist_ok=True)
    sample = os.path.join(args.out, "input.jsonl")
    budget = args.mb << 20
    lines = []
    with open(args.corpus, encoding="utf-8") as src:
        for line in src:
            if budget <= 0:
                break
            lines.append(line)
            budget -= len(line.encode())
    with open(sample, "w", encoding="utf-8") as dst:
        for copy in range(args.copies):
            for line in lines:
                if copy == 0:
                    dst.write(line)
                    continue
                doc = json.loads(line)
                doc["id"] = f"{doc['id']}_{copy}"
                doc["text"] = f"{doc['text']} {copy}"
                dst.write(json.dumps(doc, ensure_ascii=False) + "\n")
    mb = os.path.getsize(sample) / 1e6
    cores = len(os.sched_getaffinity(0))
    print(f"input: {mb:.1f} MB ({args.corpus}, {args.copies} cop{'y' if args.copies == 1 else 'ies'}); {cores} cores; "
          f"tasks of {args.task_mb} MB; pipeline: exact_dedup, gopher_quality, minhash_dedup")
    ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False, configure_logging=False)
    print("| engine | workers | seconds | MB/s |")
    print("|---|---:|---:|---:|")
    outputs = {}
    for engine in ("local", "ray"):
        for workers in args.workers:
            out = os.path.join(args.out, f"{engine}-{workers}")
            started = time.perf_counter()
            # task_bytes: tasks of --task-mb MB, so there are enough of them to spread over workers.
            pipeline.run([sample], out, config=CONFIG, workers=workers, engine=engine, overwrite=True,
                         task_bytes=args.task_mb << 20)
            seconds = time.perf_counter() - started
            outputs[(engine, workers)] = kept_ids(out)
            print(f"| {engine} | {workers} | {seconds:.1f} | {mb / seconds:.1f} |", flush=True)
    ray.shutdown()
    reference = outputs[("local", args.workers[0])]
    assert all(ids == reference for ids in outputs.values()), "engines or worker counts disagree"
    print(f"\nevery run kept the same {len(reference):,} documents")


if __name__ == "__main__":
    main()
