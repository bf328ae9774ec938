"""How the Rust core scales with cores: each kernel's throughput at 1, 2, 4, ... threads, with
the encoders' peers (tiktoken, HF tokenizers) beside tokpipe on the same texts.

    PYTHONPATH=python python3 benches/python/bench_scaling.py [BENCH_CORPUS/docs.jsonl] [--mb 64]
        [--threads 1 2 4 8 16] [--runs 3] [--vocab-dir ../shared/corpora/vocab]

Each thread count runs in a fresh child process pinned to that many CPUs
(``sched_setaffinity``) with ``RAYON_NUM_THREADS`` set, so tokpipe's pool, HF's pool and
tiktoken's ``num_threads`` all get the same cores. The input is the first ``--mb`` MB of the
corpus (whole JSON lines), held in memory as one Arrow string column; only the kernel call is
timed (best of ``--runs``). Printed: MB/s per kernel and thread count, and the speed-up over one
thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _corpus import CACHE, DEFAULT_DOCS, VOCAB_DIR, print_machine_facts  # noqa: E402


def load_texts(corpus: str, mb: int) -> list[str]:
    texts, budget = [], mb << 20
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            if budget <= 0:
                break
            texts.append(json.loads(line)["text"])
            budget -= len(line)
    return texts


def kernels(texts: list[str], vocab_dir: str, threads: int) -> dict[str, object]:
    """Name -> a zero-argument callable doing one pass over ``texts``. The encoders are
    ``bench_encode.py``'s, so each peer is built exactly as in the single-machine bench."""
    import pyarrow as pa

    from bench_encode import ENCODERS, Vocab
    from tokpipe.pipeline import kernels as k
    from tokpipe.pipeline.base import stage_class

    column = pa.array(texts, pa.large_string())
    batch = pa.record_batch({"id": pa.array([str(i) for i in range(len(texts))]), "text": column})
    vocab = Vocab("cl100k", Path(vocab_dir), CACHE)
    work: dict[str, object] = {}
    for name in ("tokpipe", "tiktoken", "hf-tokenizers"):
        encoder = ENCODERS[name]
        if encoder.available() is None:
            work[f"encode batch cl100k ({name})"] = encoder.batch(encoder.make(vocab), threads)
    tok = ENCODERS["tokpipe"].make(vocab)
    work["encode_arrow cl100k (tokpipe)"] = lambda: tok.encode_arrow(column, num_threads=threads)
    gopher = stage_class("gopher_quality")()
    pii = stage_class("pii")()
    work.update({
        "minhash signatures, 128 perm": lambda: k.minhash_signatures(column),
        "exact_dedup keys": lambda: k.exact_dedup_keys(column, True, True),
        "gopher_quality stage": lambda: gopher.apply(batch),
        "pii stage (all types, tag)": lambda: pii.apply(batch),
    })
    return {name: (run if name.startswith("encode_arrow") or not name.startswith("encode") else
                   (lambda run=run: run(texts))) for name, run in work.items()}


def child(args: argparse.Namespace) -> None:
    texts = load_texts(args.corpus, args.mb)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    results = {}
    for name, run in kernels(texts, args.vocab_dir, args.child).items():
        best = float("inf")
        for _ in range(args.runs):
            started = time.perf_counter()
            run()  # type: ignore[operator]
            best = min(best, time.perf_counter() - started)
        results[name] = mb / best
    print(json.dumps({"mb": mb, "docs": len(texts), "results": results}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(DEFAULT_DOCS))
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--vocab-dir", default=str(VOCAB_DIR))
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    print_machine_facts(["tokpipe", "tiktoken", "tokenizers"])
    cores = sorted(os.sched_getaffinity(0))
    table: dict[str, dict[int, float]] = {}
    meta = None
    for threads in args.threads:
        if threads > len(cores):
            print(f"skipping {threads} threads: only {len(cores)} cores", file=sys.stderr)
            continue
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        cpus = set(cores[:threads])
        out = subprocess.run([sys.executable, __file__, args.corpus, "--mb", str(args.mb), "--runs", str(args.runs),
                              "--vocab-dir", args.vocab_dir, "--child", str(threads)],
                             env=env, check=True, stdout=subprocess.PIPE, text=True,
                             preexec_fn=lambda: os.sched_setaffinity(0, cpus)).stdout
        meta = json.loads(out.strip().splitlines()[-1])
        for name, mbs in meta["results"].items():
            table.setdefault(name, {})[threads] = mbs
        print(f"done: {threads} threads", file=sys.stderr, flush=True)
    assert meta is not None
    counts = [t for t in args.threads if t <= len(cores)]
    print(f"input: {meta['mb']:.1f} MB, {meta['docs']:,} documents ({args.corpus}); MB/s, best of {args.runs}\n")
    print("| kernel | " + " | ".join(f"{t} thr" for t in counts) + f" | {counts[-1]} / 1 |")
    print("|---|" + "---:|" * (len(counts) + 1))
    for name, row in table.items():
        cells = " | ".join(f"{row[t]:.1f}" for t in counts)
        print(f"| {name} | {cells} | {row[counts[-1]] / row[counts[0]]:.1f}x |")


if __name__ == "__main__":
    main()
