"""MinHash: tokpipe's signatures vs datasketch's and rensa's on the same word 5-gram shingles,
and near-duplicate recall of ``minhash_dedup`` on the bench corpus.

    PYTHONPATH=python python3 benches/python/bench_minhash.py [BENCH_CORPUS/docs.jsonl]
        [--sample-every 50] [--skip-recall] [--end-to-end OUT_DIR]

Throughput is measured on one sample of the corpus (every Nth document) for all three, with
num_perm 128. datasketch and rensa get their shingles from Python (``" ".join(text.lower()
.split())`` cut into windows of 5 words, what tokpipe does in Rust); datasketch's time includes
that shingling (as its users run it), rensa's is given with and without it. tokpipe runs on
every core (MB/s/core divides by the cores) and once more on one thread (``RAYON_NUM_THREADS=1``),
with datasketch's SHA-1 shingle hash and with ``hashfunc="xxh3"``.

Recall: every ``linux-rst`` document ``Documentation/X.rst.gz`` has an exact copy
``html/_sources/X.rst.txt`` among the ``linux-txt`` documents; both must end in one cluster.

``--planted N``: precision and recall against exact Jaccard on N planted near-duplicate pairs
(see ``planted``), tokpipe's three verification modes and datasketch's ``MinHashLSH``.
``--end-to-end OUT``: the pipeline on 2 workers over 1 and 4 copies of the corpus, time and
peak memory (``--copies``). ``--only planted|end-to-end`` runs just that part (the latter into
``SCRATCH/minhash-e2e`` without ``--end-to-end``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

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
    ap.add_argument("corpus", nargs="?", default=str(_corpus.DEFAULT_DOCS))
    ap.add_argument("--sample-every", type=int, default=50)
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--end-to-end", metavar="OUT_DIR", help="also run the pipeline (2 workers) into OUT_DIR")
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4],
                    help="end to end over these numbers of copies of the corpus (memory against corpus size)")
    ap.add_argument("--memory-mb", type=int, default=512, help="minhash_dedup's memory_mb in the end-to-end runs")
    ap.add_argument("--planted", type=int, default=0, metavar="N",
                    help="also measure precision/recall on N planted near-duplicate pairs (and N distractors)")
    ap.add_argument("--only", choices=["planted", "end-to-end"], help="run only this part")
    ap.add_argument("--tokpipe-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.only == "planted":
        planted(args.corpus, args.planted or 2000, args.planted or 2000, seed=7, threshold=0.8)
        return
    if args.only == "end-to-end":
        for copies in args.copies:
            end_to_end(args.corpus, args.end_to_end or str(_corpus.SCRATCH / "minhash-e2e"), copies, args.memory_mb)
        return
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
    if args.planted:
        planted(args.corpus, args.planted, args.planted, seed=7, threshold=0.8)
    if args.end_to_end:
        for copies in args.copies:
            end_to_end(args.corpus, args.end_to_end, copies, args.memory_mb)


def recall(path: str) -> None:
    from tokpipe.pipeline.base import DecideContext
    from tokpipe.pipeline.stages import MinhashDedup

    docs = load(path)
    mb = sum(len(d["text"].encode()) for d in docs) / 1e6
    stage = MinhashDedup()
    started = time.perf_counter()
    batches = [pa.record_batch({"text": pa.array([d["text"] for d in docs[start:start + 4096]], pa.string())})
               for start in range(0, len(docs), 4096)]
    keys = [stage.keys(b) for b in batches]
    signed = time.perf_counter() - started
    started = time.perf_counter()
    keeper = np.concatenate(stage.decide(keys, DecideContext.of_batches(batches)))
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
          f"(threshold 0.8, {stage.lsh_params()[0]} bands x {stage.lsh_params()[1]} rows, verify {stage.verify})")
    print(f"signatures {signed:.1f} s ({mb / signed:.1f} MB/s), banding + exact check + union-find {decided:.2f} s; "
          f"stats {dict(stage.stats.extra)}")
    print(f"linux-rst / linux-txt exact copies in one cluster: {found}/{pairs} ({100 * found / pairs:.1f}%)")
    print(f"dropped as near-duplicates, by source: {dict(sorted(by_source.items()))}")
    print(f"peak RSS of this process (corpus held as Python objects): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


class PeakRss:
    """Samples this process's resident memory every 50 ms: all of it (``VmRSS``) and the
    heap-like part (``RssAnon``; the rest is file pages, such as the memory-mapped signatures,
    that the kernel can drop and read back)."""

    def __init__(self) -> None:
        self.peak = {"VmRSS": 0, "RssAnon": 0}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            with open("/proc/self/status", encoding="ascii") as f:
                for line in f:
                    name, _, value = line.partition(":")
                    if name in self.peak:
                        self.peak[name] = max(self.peak[name], int(value.split()[0]) // 1024)

    def __enter__(self) -> PeakRss:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def end_to_end(path: str, out: str, copies: int, memory_mb: int) -> None:
    """``pipeline.run`` with ``minhash_dedup`` alone on 2 workers, over ``copies`` hard links
    of the corpus (so every document has ``copies - 1`` exact duplicates)."""
    import tempfile

    import tokpipe.pipeline as pipeline

    # The default OUT sits in SCRATCH, which may not exist yet; the hard links go beside OUT.
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp:
        inputs = []
        for n in range(copies):
            link = os.path.join(tmp, f"copy{n}.jsonl")
            os.link(path, link)
            inputs.append(link)
        started = time.perf_counter()
        with PeakRss() as main_rss:
            result = pipeline.run(inputs, out, config={"stages": [{"type": "minhash_dedup", "memory_mb": memory_mb}]},
                                  workers=2, overwrite=True)
        seconds = time.perf_counter() - started
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    stats = result.stats["minhash_dedup"].as_dict()
    print(f"\nend to end, {copies} cop{'y' if copies == 1 else 'ies'} of the corpus (pipeline.run, 2 workers, "
          f"minhash_dedup only, memory_mb {memory_mb}): {stats['in']} documents, {seconds:.1f} s; peak RSS: a worker {workers:.0f} MB, "
          f"main process {main_rss.peak['VmRSS']} MB (of it anonymous {main_rss.peak['RssAnon']} MB); stats {stats}")


def edit(words: list[str], fraction: float, vocabulary: list[str], rng: random.Random) -> list[str]:
    """``words`` with about ``fraction`` of them edited at random places: each edit replaces
    a word, deletes one or inserts one (a vocabulary word), with equal odds."""
    words = list(words)
    for _ in range(round(fraction * len(words))):
        at = rng.randrange(len(words))
        op = rng.randrange(3)
        if op == 0:
            words[at] = rng.choice(vocabulary)
        elif op == 1 and len(words) > 1:
            del words[at]
        else:
            words.insert(at, rng.choice(vocabulary))
    return words


def planted(path: str, originals: int, distractors: int, seed: int, threshold: float) -> None:
    """Precision and recall of ``minhash_dedup`` against exact Jaccard on planted
    near-duplicates of real documents, side by side with datasketch's ``MinHashLSH``.

    ``originals`` real documents (100 to 3,000 words, from ``linux-rst``, ``python-txt`` and ``gcide``)
    each get one copy with 0 to 6% of their words edited, so the pairs' exact Jaccard
    similarities (word 5-gram sets) spread across the threshold; ``distractors`` more real
    documents get none. Both tokpipe and datasketch use word 5-grams (``shingle="word"``; the
    ``auto`` default would take characters for the Chinese translations among ``linux-rst``),
    the sets the exact Jaccard is computed on. A pair is a true near-duplicate when its exact
    Jaccard is at least ``threshold``. Recall: true planted pairs put in one cluster. Precision: of every pair of
    documents put in one cluster (all pairs within each cluster), the share that are true.
    """
    from datasketch import MinHash, MinHashLSH

    from tokpipe.pipeline.base import DecideContext
    from tokpipe.pipeline.stages import MinhashDedup

    rng = random.Random(seed)
    pool = [d["text"] for d in load(path) if d["source"] in ("linux-rst", "python-txt", "gcide")
            and 100 <= len(d["text"].split()) <= 3000]
    chosen = rng.sample(pool, originals + distractors)
    vocabulary = [w for t in chosen[:200] for w in t.split()]
    texts = list(chosen)
    fractions = [rng.uniform(0.0, 0.06) for _ in range(originals)]
    texts += [" ".join(edit(chosen[i].split(), fractions[i], vocabulary, rng)) for i in range(originals)]
    sets = [set(shingles(t)) for t in texts]

    def exact(i: int, j: int) -> float:
        return len(sets[i] & sets[j]) / len(sets[i] | sets[j])

    planted_pairs = [(i, len(chosen) + i) for i in range(originals)]
    truth = {p for p in planted_pairs if exact(*p) >= threshold}

    def score(name: str, clusters: list[list[int]], seconds: float) -> None:
        pairs = [(a, b) for c in clusters for x, a in enumerate(c) for b in c[x + 1:]]
        true = sum(exact(a, b) >= threshold for a, b in pairs)
        near = sum(exact(a, b) >= threshold - 0.05 for a, b in pairs)
        member = {d: k for k, c in enumerate(clusters) for d in c}
        found = sum(member.get(p, -1) == member.get(q, -2) for p, q in truth)
        print(f"| {name} | {found}/{len(truth)} = {found / len(truth):.3f} | {true}/{len(pairs)} = "
              f"{true / max(1, len(pairs)):.3f} | {near / max(1, len(pairs)):.3f} | {seconds:.1f} |")

    print(f"\nplanted near-duplicates: {originals} real documents with an edited copy (0-6% of words), "
          f"{distractors} without; {len(truth)} planted pairs at exact Jaccard >= {threshold} "
          f"(word 5-grams); {sum(exact(*p) >= threshold - 0.05 for p in planted_pairs) - len(truth)} more "
          f"within 0.05 below it")
    print("| method | recall (true planted pairs clustered) | precision (clustered pairs that are true) | "
          f"precision at Jaccard >= {threshold - 0.05:.2f} | seconds |")
    print("|---|---:|---:|---:|---:|")
    batches = [pa.record_batch({"text": pa.array(texts[i:i + 1000], pa.string())}) for i in range(0, len(texts), 1000)]
    for verify in ("exact", "signature", "none"):
        stage = MinhashDedup(threshold=threshold, verify=verify, shingle="word")
        started = time.perf_counter()
        keys = [stage.keys(b) for b in batches]
        keeper = np.concatenate(stage.decide(keys, DecideContext.of_batches(batches)))
        seconds = time.perf_counter() - started
        groups: dict[int, list[int]] = {}
        for i, k in enumerate(keeper.tolist()):
            groups.setdefault(k, []).append(i)
        bands, rows = stage.lsh_params()
        score(f"tokpipe minhash_dedup, verify={verify} ({bands} x {rows})", [g for g in groups.values() if len(g) > 1],
              seconds)
    started = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    hashes = []
    for i, t in enumerate(texts):
        m = MinHash(num_perm=NUM_PERM, seed=1)
        m.update_batch([s.encode() for s in shingles(t)])
        hashes.append(m)
        lsh.insert(i, m)
    # datasketch gives candidates; the usual script joins each document with its candidates
    # (union-find, lowest index as root), as tokpipe's verify=False does.
    parent = list(range(len(texts)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, m in enumerate(hashes):
        for j in lsh.query(m):
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    seconds = time.perf_counter() - started
    groups = {}
    for i in range(len(texts)):
        groups.setdefault(find(i), []).append(i)
    score(f"datasketch MinHashLSH + union-find ({lsh.b} x {lsh.r})", [g for g in groups.values() if len(g) > 1], seconds)


if __name__ == "__main__":
    main()
