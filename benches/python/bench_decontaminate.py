#!/usr/bin/env python3
"""``decontaminate`` against datatrove's ``NGramsDecontFilter``, per core, on the same
documents and the same evaluation records (13-grams on both sides).

Documents: the shared corpora's texts (English, Japanese, Chinese) in 40-line pieces and the
Common Crawl samples, repeated up to ``--mb`` MB, with a benchmark passage planted in one
document in 50. Benchmark: ``--records`` question/answer records (two consecutive lines each)
cut from one piece in ten, which the documents leave out, written as JSONL for tokpipe;
datatrove's index is built from the same record texts with its own indexer's hashing
(``compute_hashes`` without a query: its normalisation, spaCy word tokenizer and xxhash of the
joined n-gram), written where its filter loads it. Where the installed ``xxhash`` takes bytes
only (datatrove passes a str), both sides of datatrove's hashing encode the n-gram first. The
rules differ in their words (datatrove's tokenizer splits ``don't``), so the counts of
contaminated documents are printed side by side, not required to be equal.

Throughput per core is MB of text over CPU seconds (``time.process_time``), tokpipe on one
Rayon thread (``RAYON_NUM_THREADS=1``, set below before tokpipe is imported); datatrove runs
one document at a time in Python, as its pipeline does, on ``--datatrove-mb`` MB of the same
documents (it is slow). Index build times are printed apart.

    python3 benches/python/bench_decontaminate.py [--mb 40] [--datatrove-mb 4] [--records 2000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import SHARED_CORPORA, print_machine_facts  # noqa: E402


def corpus_pieces() -> list[str]:
    pieces = []
    for path in sorted((SHARED_CORPORA / "text").rglob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        pieces += ["\n".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    for path in sorted((SHARED_CORPORA / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            pieces += [json.loads(line)["text"] for line in f]
    return [p for p in pieces if p.strip()]


def records_of(pieces: list[str], count: int, rng: random.Random) -> list[dict[str, str]]:
    lines = [line.strip() for p in pieces for line in p.splitlines() if len(line.strip()) > 20]
    picks = rng.sample(range(len(lines) - 1), count)
    return [{"question": lines[i], "answer": lines[i + 1]} for i in picks]


def timed(fn) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=40.0, help="MB of documents for tokpipe (default 40)")
    parser.add_argument("--datatrove-mb", type=float, default=4.0, help="MB of the same documents for datatrove")
    parser.add_argument("--records", type=int, default=2000, help="benchmark records (default 2,000)")
    args = parser.parse_args()

    import numpy as np
    import pyarrow as pa

    from tokpipe.pipeline.stages.decontaminate import CONTAMINATED_BY, Decontaminate

    print_machine_facts(("datatrove", "spacy"))
    rng = random.Random(24)
    pieces = corpus_pieces()
    # Records from one piece in ten, documents from the others: most documents are clean, as
    # in a real corpus, and every 50th has a planted passage.
    records = records_of(pieces[::10], args.records, rng)
    pieces = [p for i, p in enumerate(pieces) if i % 10]
    docs, size, k = [], 0, 0
    while size < args.mb * 1e6:
        text = pieces[k % len(pieces)]
        if k % 50 == 0:
            r = records[rng.randrange(len(records))]
            middle = len(text) // 2
            text = text[:middle] + " " + r["question"] + " " + r["answer"] + " " + text[middle:]
        docs.append(text)
        size += len(text.encode())
        k += 1
    dt_docs, dt_size = [], 0
    for text in docs:
        if dt_size >= args.datatrove_mb * 1e6:
            break
        dt_docs.append(text)
        dt_size += len(text.encode())
    print(f"## decontaminate: {len(docs):,} documents, {size / 1e6:.1f} MB; {len(records):,} benchmark records, n=13\n")

    with tempfile.TemporaryDirectory() as tmp:
        bench = Path(tmp) / "bench.jsonl"
        bench.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        build_s, _, stage = timed(lambda: Decontaminate(benchmarks=[str(bench)], text_fields=["question", "answer"],
                                                        n=13, action="tag"))
        batches = [pa.RecordBatch.from_pydict({"id": [str(i) for i in range(j, min(j + 2000, len(docs)))],
                                               "text": docs[j:j + 2000]}) for j in range(0, len(docs), 2000)]

        def run_tokpipe() -> int:
            return sum(stage.apply(b).kept.column(CONTAMINATED_BY).null_count for b in batches)

        run_tokpipe()  # warm
        wall, cpu, clean = timed(run_tokpipe)
        threads = os.environ.get("RAYON_NUM_THREADS")
        tp_rate = size / 1e6 / cpu
        print(f"- tokpipe (RAYON_NUM_THREADS={threads}): index {build_s:.2f} s; {cpu:.2f} CPU s, {wall:.2f} s wall: "
              f"{tp_rate:.1f} MB per CPU second; {len(docs) - clean:,} documents contaminated")

        # -- datatrove --------------------------------------------------------------------------
        from datatrove.data import Document
        from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter
        from datatrove.utils.hashing import create_hash_func
        from datatrove.utils.text import ngrams, simplify_text
        from datatrove.utils.word_tokenizers import load_word_tokenizer

        config = NGramsDecontConfig(n_grams=13)
        xxh64 = create_hash_func(config.hash_config)
        try:
            xxh64("text")
            hash_func = xxh64
        except TypeError:
            # This xxhash takes bytes only, where datatrove hands it the n-gram's str: encode
            # it first (about 0.1 us an n-gram; spaCy's tokenizer costs far more).
            def hash_func(text: str) -> int:
                return xxh64(text.encode())
        index_dir = Path(tmp) / "index"
        index_dir.mkdir()

        def build_datatrove() -> None:
            # NGramsDecontIndexer.compute_hashes(label) without a query, as its run() does for
            # documents it is given (its run() then needs lighteval, so it is not called).
            tokenizer = load_word_tokenizer("en")
            hashes = set()
            for r in records:
                tokens = tokenizer.word_tokenize(simplify_text(r["question"] + "\n" + r["answer"], config.norm_config))
                hashes.update(map(hash_func, map(" ".join, ngrams(tokens, config.n_grams))))
            np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(index_dir / "bench.index.hashes")

        dt_build, _, _ = timed(build_datatrove)
        decont = NGramsDecontFilter(index_folder=str(index_dir), config=config)
        decont.hash_func = hash_func
        decont.filter(Document(text="warm up the index and the tokenizer", id="0"))

        def run_datatrove() -> int:
            return sum(decont.filter(Document(text=t, id=str(i))) is not True for i, t in enumerate(dt_docs))

        wall, cpu, hits = timed(run_datatrove)
        dt_rate = dt_size / 1e6 / cpu
        print(f"- datatrove NGramsDecontFilter: index {dt_build:.2f} s; {dt_size / 1e6:.1f} MB in {cpu:.2f} CPU s: "
              f"{dt_rate:.2f} MB per CPU second; {hits:,} of its {len(dt_docs):,} documents contaminated")
        tp_first = sum(stage.apply(b).kept.column(CONTAMINATED_BY).null_count for b in
                       [pa.RecordBatch.from_pydict({"id": [str(i) for i in range(len(dt_docs))], "text": dt_docs})])
        print(f"- tokpipe on the same {len(dt_docs):,} documents: {len(dt_docs) - tp_first:,} contaminated")
        print(f"- per core: tokpipe / datatrove = {tp_rate / dt_rate:.0f}x")


if __name__ == "__main__":
    main()
