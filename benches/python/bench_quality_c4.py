"""C4 and FineWeb quality filters: tokpipe's stages vs datatrove's, side by side on the same
English documents of a bench corpus (sources linux-rst, python-txt, gcide).

    PYTHONPATH=python python3 benches/python/bench_quality_c4.py [/work/bench_corpus/docs.jsonl] [--limit N]

Prints MB/s per core for each (tokpipe uses all cores: its MB/s is divided by the core count;
datatrove runs on one core), the ratio and decision agreement.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import pyarrow as pa

from tokpipe.pipeline.stages.quality_c4 import C4Quality, FineWebQuality

SOURCES = ("linux-rst", "python-txt", "gcide")


def main() -> None:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/work/bench_corpus/docs.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="at most this many documents (0: all)")
    args = ap.parse_args()
    docs = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("source") in SOURCES:
                docs.append(d["text"])
                if args.limit and len(docs) >= args.limit:
                    break
    mb = sum(len(t.encode()) for t in docs) / 1e6
    cores = len(os.sched_getaffinity(0))
    print(f"{len(docs)} documents, {mb:.1f} MB, {cores} cores")

    from datatrove.data import Document
    from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter

    column = pa.array(docs, type=pa.string())
    batch = pa.record_batch([column], names=["text"])
    for name, ours, peer in (("c4_quality", C4Quality(), C4QualityFilter()),
                             ("fineweb_quality", FineWebQuality(), FineWebQualityFilter())):
        started = time.perf_counter()
        if name == "c4_quality":
            _, reasons, _ = ours.rewrite(column)
            keep = reasons == ""
        else:
            keep, _ = ours.keep(batch)
        ours_s = time.perf_counter() - started
        started = time.perf_counter()
        theirs = [peer.filter(Document(text=t, id=str(i))) is True for i, t in enumerate(docs)]
        peer_s = time.perf_counter() - started
        agree = sum(bool(a) == b for a, b in zip(keep, theirs)) / len(docs)
        ours_pc, peer_pc = mb / ours_s / cores, mb / peer_s
        print(f"{name:16s} tokpipe {ours_pc:8.1f} MB/s/core  datatrove {peer_pc:6.2f} MB/s/core  "
              f"ratio {ours_pc / peer_pc:6.1f}x  agreement {agree:.4%}  kept {int(sum(keep))}/{len(docs)}")


if __name__ == "__main__":
    main()
