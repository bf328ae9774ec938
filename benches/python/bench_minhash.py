"""MinHash: tokpipe's signatures vs datasketch's and rensa's on the same word 5-gram shingles,
and near-duplicate recall of ``minhash_dedup`` on the bench corpus.

    PYTHONPATH=python python3 benches/python/bench_minhash.py [/work/bench_corpus/docs.jsonl]
        [--sample-every 50] [--skip-recall] [--end-to-end OUT_DIR]

Throughput is measured on one sample of the corpus (every Nth document) for all three, with
num_perm 128. datasketch and rensa get their shingles from Python (``" ".join(text.lower()
.split())`` cut into windows of 5 words, what tokpipe does in Rust); datasketch's time includes
that shingling (as its users run it), rensa's is given with and without it. tokpipe runs on
every core (MB/s/core divides by the cores) and once more on one thread (``RAYON_NUM_THREADS=1``),
with datasketch's SHA-1 shingle hash and with ``hashfunc="xxh3"``.

Recall: every ``linux-rst`` document ``Documentation/X.rst.gz`` has an exact copy
``html/_sources/X.rst.txt`` among the ``linux-txt`` documents; both must end in one cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

NUM_PERM = 128


def load(path: str, every: int = 1) -> list[dict[str, str]]:
    docs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n % every == 0:
                docs.append(json.loads(line))
    return docs


def shingles(text: str) -> list[str]:
    words = " ".join(text.lower().split()).split(" ")
    if words == [""]:
        return []
    if len(words) <= 5:
        return [" ".join(words)]
    return [" ".join(words[i:i + 5]) for i in range(len(words) - 4)]


def best_of(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def tokpipe_seconds(texts: list[str], hashfunc: str = "sha1") -> float:
    from tokpipe.pipeline.kernels import minhash_signatures

    column = pa.array(texts, type=pa.string())
    return best_of(lambda: minhash_signatures(column, NUM_PERM, 1, "affine32", "word", 5, hashfunc=hashfunc), 5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/work/bench_corpus/docs.jsonl")
    ap.add_argument("--sample-every", type=int, default=50)
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--end-to-end", metavar="OUT_DIR", help="also run the pipeline (2 workers) into OUT_DIR")
    ap.add_argument("--tokpipe-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    sample = [d["text"] for d in load(args.corpus, args.sample_every)]
    mb = sum(len(t.encode()) for t in sample) / 1e6
    if args.tokpipe_only:
        print(json.dumps({"sha1": tokpipe_seconds(sample), "xxh3": tokpipe_seconds(sample, "xxh3")}))
        return
    cores = len(os.sched_getaffinity(0))
    print(f"sample: every {args.sample_every}th document: {len(sample)} documents, {mb:.1f} MB; {cores} cores")

    ours_s = tokpipe_seconds(sample)
    ours_xxh3 = tokpipe_seconds(sample, "xxh3")
    one = subprocess.run([sys.executable, __file__, args.corpus, "--sample-every", str(args.sample_every),
                          "--tokpipe-only"], env={**os.environ, "RAYON_NUM_THREADS": "1"},
                         capture_output=True, text=True, check=True)
    single = json.loads(one.stdout)

    from datasketch import MinHash

    def run_datasketch() -> None:
        for t in sample:
            m = MinHash(num_perm=NUM_PERM, seed=1)
            m.update_batch([s.encode() for s in shingles(t)])

    ds_s = best_of(run_datasketch, 1)

    from rensa import RMinHash

    started = time.perf_counter()
    sets = [shingles(t) for t in sample]
    shingle_s = time.perf_counter() - started
    rensa_s = best_of(lambda: RMinHash.digest_matrix_from_token_sets(sets, NUM_PERM, 1))

    rows = [("tokpipe sha1 (all cores)", ours_s, cores), ("tokpipe sha1 (1 thread)", single["sha1"], 1),
            ("tokpipe xxh3 (all cores)", ours_xxh3, cores), ("tokpipe xxh3 (1 thread)", single["xxh3"], 1),
            ("datasketch 2.0 (shingling included)", ds_s, 1),
            ("rensa RMinHash bulk (shingling included)", rensa_s + shingle_s, 1),
            ("rensa RMinHash bulk (hashing only)", rensa_s, 1)]
    print("| implementation | seconds | MB/s | MB/s/core | tokpipe sha1 1-thread MB/s vs this MB/s/core |")
    print("|---|---:|---:|---:|---:|")
    ours_core = mb / single["sha1"]
    for name, seconds, used in rows:
        per_core = mb / seconds / used
        print(f"| {name} | {seconds:.3f} | {mb / seconds:.1f} | {per_core:.1f} | {ours_core / per_core:.1f}x |")

    if not args.skip_recall:
        recall(args.corpus)
    if args.end_to_end:
        end_to_end(args.corpus, args.end_to_end)


def recall(path: str) -> None:
    from tokpipe.pipeline.stages import MinhashDedup

    docs = load(path)
    mb = sum(len(d["text"].encode()) for d in docs) / 1e6
    stage = MinhashDedup()
    started = time.perf_counter()
    keys = []
    for start in range(0, len(docs), 4096):
        chunk = docs[start:start + 4096]
        keys.append(stage.keys(pa.record_batch({"text": pa.array([d["text"] for d in chunk], pa.string())})))
    signed = time.perf_counter() - started
    started = time.perf_counter()
    keeper = np.concatenate(stage.decide(keys))
    decided = time.perf_counter() - started
    position = {d["id"]: i for i, d in enumerate(docs)}
    pairs = found = 0
    for d in docs:
        if d["source"] == "linux-rst":
            copy = "html/_sources/" + d["id"].removeprefix("Documentation/").removesuffix(".gz") + ".txt"
            pairs += 1
            found += keeper[position[d["id"]]] == keeper[position[copy]]
    by_source: dict[str, int] = {}
    for d, k, i in zip(docs, keeper, range(len(docs))):
        if k != i:
            by_source[d["source"]] = by_source.get(d["source"], 0) + 1
    print(f"\nwhole corpus: {len(docs)} documents, {mb:.1f} MB; minhash_dedup defaults "
          f"(threshold 0.8, {stage.lsh_params()[0]} bands x {stage.lsh_params()[1]} rows, verify)")
    print(f"signatures {signed:.1f} s ({mb / signed:.1f} MB/s), banding + union-find {decided:.2f} s; "
          f"stats {dict(stage.stats.extra)}")
    print(f"linux-rst / linux-txt exact copies in one cluster: {found}/{pairs} ({100 * found / pairs:.1f}%)")
    print(f"dropped as near-duplicates, by source: {dict(sorted(by_source.items()))}")
    print(f"peak RSS of this process (corpus held as Python objects): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def end_to_end(path: str, out: str) -> None:
    import tokpipe.pipeline as pipeline

    started = time.perf_counter()
    result = pipeline.run([path], out, config={"stages": [{"type": "minhash_dedup"}]}, workers=2, overwrite=True)
    seconds = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nend to end (pipeline.run, 2 workers, minhash_dedup only): {seconds:.1f} s; "
          f"peak RSS: workers {children:.0f} MB, main process {own:.0f} MB; "
          f"stats {result.stats['minhash_dedup'].as_dict()}")


if __name__ == "__main__":
    main()
