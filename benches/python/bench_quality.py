#!/usr/bin/env python3
"""The heuristic quality filters, tokpipe's stages against datatrove's filters side by side:
``gopher_quality``, ``gopher_repetition``, ``c4_quality`` and ``fineweb_quality`` against
``GopherQualityFilter``, ``GopherRepetitionFilter``, ``C4QualityFilter`` and
``FineWebQualityFilter``, on the same English documents of the benchmark corpus (sources
linux-rst, python-txt and gcide of ``../shared/bench/build_corpus.py``).

For each filter it prints throughput per core for both, the ratio, and the share of documents
on which the keep/drop decision (and the reason) agrees, with every kind of disagreement
counted. Throughput per core is MB over CPU seconds (``time.process_time``, all threads): on a
shared machine this is what a core does, whatever else runs; tokpipe's wall-clock MB/s on all
cores is printed too. datatrove runs on one core.

datatrove needs about 3 s a MB for the Gopher filters, so by default the first ``--mb`` MB of
each source is used; ``--mb 0`` takes them whole.

    python3 benches/python/bench_quality.py             # 5 MB per source
    python3 benches/python/bench_quality.py --mb 0      # all 75 MB
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import DEFAULT_CORPUS, check_corpus, print_machine_facts  # noqa: E402

SOURCES = ("linux-rst", "python-txt", "gcide")


def load(corpus: Path, mb: float) -> list[tuple[str, str, str]]:
    budget = {s: (mb * 1e6 if mb > 0 else float("inf")) for s in SOURCES}
    docs = []
    with open(corpus / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if budget.get(d["source"], 0) > 0:
                budget[d["source"]] -= len(d["text"].encode())
                docs.append((d["id"], d["source"], d["text"]))
            if all(v <= 0 for v in budget.values()):
                break
    return docs


def main() -> None:
    warnings.filterwarnings("ignore")  # datatrove's np.mean of an empty list
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--mb", type=float, default=5.0, help="MB of each source (default 5; 0: all)")
    parser.add_argument("--show", type=int, default=3, help="disagreements to print per filter")
    args = parser.parse_args()

    from datatrove.data import Document
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)

    from tokpipe.pipeline.stages import C4Quality, FineWebQuality, GopherQuality, GopherRepetition

    docs = load(check_corpus(args.corpus), args.mb)
    total_mb = sum(len(t.encode()) for _, _, t in docs) / 1e6
    cores = len(os.sched_getaffinity(0))
    print_machine_facts()
    print(f"{len(docs)} documents, {total_mb:.1f} MB ({', '.join(SOURCES)}); tokpipe on {cores} cores\n")
    batch = pa.record_batch({"id": [str(i) for i in range(len(docs))],
                             "text": pa.array([t for _, _, t in docs], type=pa.large_string())})

    rows = []
    pairs = [(GopherQuality(), GopherQualityFilter()), (GopherRepetition(), GopherRepetitionFilter()),
             (C4Quality(), C4QualityFilter()), (FineWebQuality(), FineWebQualityFilter())]
    for ours, theirs in pairs:
        ours.process(batch.slice(0, 10))  # build the rules' tables outside the timing
        theirs.filter(Document(text=docs[0][2], id="warm-up"))
        wall, cpu = time.perf_counter(), time.process_time()
        result = ours.process(batch)
        ours_wall, ours_cpu = time.perf_counter() - wall, time.process_time() - cpu
        dropped = {} if result.rejected is None else dict(zip(result.rejected.column("id").to_pylist(),
                                                               result.rejected.column("reason").to_pylist()))
        cpu = time.process_time()
        verdicts = []
        for id_, _, text in docs:
            r = theirs.filter(Document(text=text, id=id_))
            verdicts.append((True, None) if r is True else (bool(r[0]), r[1]))
        theirs_cpu = time.process_time() - cpu
        same_decision = same_reason = 0
        kinds: Counter[tuple] = Counter()
        shown = 0
        for i, (id_, source, _) in enumerate(docs):
            o = (True, None) if str(i) not in dropped else (False, dropped[str(i)])
            same_decision += o[0] == verdicts[i][0]
            same_reason += o == verdicts[i]
            if o != verdicts[i]:
                kinds[(source, o[1], verdicts[i][1])] += 1
                if shown < args.show:
                    print(f"  {ours.name} differs on {id_} ({source}): tokpipe {o}, datatrove {verdicts[i]}")
                    shown += 1
        rows.append((ours.name, total_mb / ours_cpu, total_mb / ours_wall, total_mb / theirs_cpu,
                     same_decision / len(docs), same_reason / len(docs), len(dropped),
                     sum(not v[0] for v in verdicts)))
        for (source, a, b), n in kinds.most_common():
            print(f"  {ours.name}: {n} x {source}: tokpipe {a}, datatrove {b}")

    print("\n| filter | tokpipe MB/s/core | tokpipe MB/s wall | datatrove MB/s/core | ratio per core | "
          "same decision | same reason | dropped (tokpipe / datatrove) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, cpu_rate, wall_rate, theirs_rate, d, r, od, td in rows:
        print(f"| {name} | {cpu_rate:.1f} | {wall_rate:.1f} | {theirs_rate:.2f} | {cpu_rate / theirs_rate:.0f}x | "
              f"{d:.2%} | {r:.2%} | {od} / {td} |")


if __name__ == "__main__":
    main()
