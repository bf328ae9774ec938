"""Encode benchmarks that time each (encoder, mode, threads) in a fresh subprocess.

A script using this module re-runs itself with ``--child``: the child pins itself to the CPUs
asked for, loads the documents, encodes them --runs times and prints one JSON line
({wall, cpu, bytes, docs}); the parent runs one child per measurement, with RAYON_NUM_THREADS
set, so each library's thread pool gets the thread count asked for.

  doc    a Python loop of one-document encodes, the process pinned to one CPU;
  batch  one call of the library's batch API, pinned to T CPUs.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import _corpus

Encode = Callable[[str], Sequence[int]]
EncodeBatch = Callable[[list[str]], Sequence[Sequence[int]]]


def add_arguments(ap: argparse.ArgumentParser, encoders: Sequence[str]) -> None:
    """The options every such script takes, and the hidden ones of its children."""
    ap.add_argument("--corpus", type=Path, default=_corpus.DEFAULT_CORPUS)
    ap.add_argument("--sources", default=",".join(_corpus.DEFAULT_SOURCES))
    ap.add_argument("--max-mb", type=float, default=20)
    ap.add_argument("--encoders", default=",".join(encoders))
    ap.add_argument("--threads", default="1,2", help="thread counts for batch mode")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--encoder", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--hf-json", help=argparse.SUPPRESS)
    ap.add_argument("--ids-out", help=argparse.SUPPRESS)


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(args: argparse.Namespace, one: Encode, batch: EncodeBatch) -> None:
    """One measurement of `one` (doc mode) or `batch`: prints JSON {wall, cpu, bytes, docs}."""
    threads = int(args.threads)
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    docs = _corpus.load_docs(args.corpus, args.sources.split(","), args.max_mb)
    texts = [d.text for d in docs]
    one("warm-up, hello world 中文")
    best = None
    for _ in range(args.runs):
        w0, c0 = time.perf_counter(), _cpu_seconds()
        out = [one(t) for t in texts] if args.mode == "doc" else batch(texts)
        w, c = time.perf_counter() - w0, _cpu_seconds() - c0
        if best is None or w < best[0]:
            best = (w, c)
    if args.ids_out:
        with open(args.ids_out, "w") as f:
            json.dump([list(map(int, ids)) for ids in out], f)
    print(json.dumps({"wall": best[0], "cpu": best[1], "bytes": sum(d.nbytes for d in docs), "docs": len(docs)}))


def run_children(script: str, args: argparse.Namespace, ids_dir: Path, label: str,
                 extra: Sequence[str] = ()) -> tuple[list[tuple], dict[str, list], dict]:
    """One child of `script` per encoder in doc mode, then per thread count and encoder in batch
    mode. Returns the rows (encoder, mode, threads, MB/s, MB/CPU-s), each encoder's ids in doc
    mode, and the last child's JSON (its docs and bytes)."""
    encoders = args.encoders.split(",")
    runs = [(e, "doc", 1) for e in encoders]
    runs += [(e, "batch", int(t)) for t in args.threads.split(",") for e in encoders]
    rows, ids, last = [], {}, {}
    for enc, mode, threads in runs:
        ids_out = ids_dir / f"{label}-{enc}.json" if mode == "doc" else None
        cmd = [sys.executable, script, "--child", "--encoder", enc, "--mode", mode, "--threads", str(threads),
               "--corpus", str(args.corpus), "--sources", args.sources, "--max-mb", str(args.max_mb),
               "--runs", str(args.runs), *extra]
        cmd += ["--ids-out", str(ids_out)] if ids_out else []
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads), RAYON_RS_NUM_THREADS=str(threads))
        _corpus.log(f"{label} {enc} {mode} T={threads} ...")
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            _corpus.log(f"  failed: {res.stderr.strip().splitlines()[-1:]}")
            continue
        last = json.loads(res.stdout.strip().splitlines()[-1])
        mb = last["bytes"] / 1e6
        rows.append((enc, mode, threads, mb / last["wall"], mb / last["cpu"]))
        if ids_out:
            ids[enc] = json.loads(ids_out.read_text())
    return rows, ids, last


def same_ids(ids: dict[str, list], enc: str, reference: list | None) -> str:
    """"yes", "N docs differ", or "" where there is nothing to compare."""
    if reference is None or enc not in ids:
        return ""
    if ids[enc] == reference:
        return "yes"
    return f"{sum(a != b for a, b in zip(ids[enc], reference))} docs differ"
