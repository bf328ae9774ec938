#!/usr/bin/env python3
"""The cost of ``language: auto`` (per-document language rules) against fixed-language stages,
on the same mixed input.

The input is the shared corpora cut into documents: the Common Crawl samples, the Chinese
notes (1,500-character chunks), the Japanese novel (800-character chunks), Botchan and Tiny
Shakespeare (2,000-character chunks), repeated ``--repeat`` times, shuffled with a fixed seed
and labelled once by the ``language`` stage (not timed). Each stage then runs over the same
labelled batches of 1,024 documents (the readers' batch size) three ways:

- ``fixed en``: ``language: en`` for every document (today's single-language config);
- ``by hand``: the documents split by language beforehand (not timed), each language's part
  run through the stage fixed to that language (others through ``en``): the least the
  per-language rules can cost;
- ``auto``: ``language: auto`` with ``languages: {zh: {}, ja: {}}`` (``c4_quality``: ``{en:
  {}}``, every language by C4's English rules, so the grouping is all that differs), which
  gives the same verdicts as ``by hand``.

Throughput per core is MB over CPU seconds (``time.process_time``, all threads; run with
``RAYON_NUM_THREADS=1`` for one core), best of ``--runs`` rounds in which the three take turns.

    RAYON_NUM_THREADS=1 python3 benches/python/bench_per_language.py
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import SHARED_CORPORA, print_machine_facts  # noqa: E402

BATCH_ROWS = 1024


def chunks(text: str, size: int) -> list[str]:
    out, current = [], ""
    for paragraph in text.split("\n\n"):
        current = f"{current}\n\n{paragraph}" if current else paragraph
        if len(current) >= size:
            out.append(current)
            current = ""
    return out


def mixed_documents(repeat: int) -> list[str]:
    text = SHARED_CORPORA / "text"
    docs = []
    for path in sorted((SHARED_CORPORA / "web").glob("cc_en_head-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line)["text"] for line in f if line.strip()]
    for path in sorted((text / "zh_notes").glob("*.txt")):
        docs += chunks(path.read_text(encoding="utf-8"), 1500)
    docs += chunks((text / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").replace("\n", "\n\n"), 800)
    for name in ("botchan.txt", "tinyshakespeare.txt"):
        docs += chunks((text / name).read_text(encoding="utf-8"), 2000)
    docs = docs * repeat
    random.Random(0).shuffle(docs)
    return docs


def cpu_seconds(variants: list[Any], runs: int) -> list[float]:
    """The best CPU seconds of each variant over ``runs`` rounds; the variants take turns in
    each round, so a change in the machine's load hits them alike."""
    best = [float("inf")] * len(variants)
    for _ in range(runs):
        for n, run in enumerate(variants):
            started = time.process_time()
            run()
            best[n] = min(best[n], time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="copies of the corpus (default 3)")
    parser.add_argument("--runs", type=int, default=5, help="rounds, the best of each is kept (default 5)")
    args = parser.parse_args()

    from tokpipe.pipeline.stages import (C4Quality, FineWebQuality, GopherQuality, GopherRepetition, LanguageFilter,
                                         TextStats)

    docs = mixed_documents(args.repeat)
    labeller = LanguageFilter(min_score=None)
    batches = []
    for start in range(0, len(docs), BATCH_ROWS):
        part = docs[start:start + BATCH_ROWS]
        batch = pa.record_batch([pa.array([f"d{start + i}" for i in range(len(part))]), pa.array(part)],
                                names=["id", "text"])
        batches.append(labeller.process(batch).kept)
    languages = [code for b in batches for code in b.column("language").to_pylist()]
    mb = sum(len(d.encode()) for d in docs) / 1e6
    counts = {code: languages.count(code) for code in sorted(set(languages))}
    # The documents split by language, for "by hand".
    split: dict[str, list[pa.RecordBatch]] = {}
    for batch in batches:
        for code in ("zh", "ja"):
            rows = [i for i, c in enumerate(batch.column("language").to_pylist()) if c == code]
            split.setdefault(code, []).append(batch.take(pa.array(rows, pa.int64())))
        rows = [i for i, c in enumerate(batch.column("language").to_pylist()) if c not in ("zh", "ja")]
        split.setdefault("en", []).append(batch.take(pa.array(rows, pa.int64())))

    stages: dict[str, tuple[type, dict[str, Any], dict[str, Any]]] = {
        "gopher_quality": (GopherQuality, {}, {"zh": {}, "ja": {}}),
        "gopher_repetition": (GopherRepetition, {}, {"zh": {}, "ja": {}}),
        "fineweb_quality": (FineWebQuality, {}, {"zh": {}, "ja": {}}),
        "c4_quality": (C4Quality, {}, {"en": {}}),
        "text_stats": (TextStats, {"max_hash_word_ratio": 0.1}, {"zh": {"min_words": 50}, "ja": {"min_words": 50}}),
    }
    print_machine_facts()
    print(f"{len(docs):,} documents, {mb:.1f} MB, batches of {BATCH_ROWS}; languages: "
          + ", ".join(f"{k} {v:,}" for k, v in counts.items()) + "\n")
    print("| stage | fixed en MB/s/core | by hand MB/s/core | auto MB/s/core | auto / by hand | auto / fixed en |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (cls, common, tables) in stages.items():
        plain = {} if cls is TextStats else {"language": "en"}
        fixed = cls(**common, **plain)
        auto = cls(**common, language="auto", languages=tables)
        per_language = {code: (cls(**tables[code]) if cls is TextStats else cls(**tables[code], language=code))
                        if code in tables and cls is not C4Quality else fixed for code in split}

        def run_fixed() -> None:
            for batch in batches:
                fixed.process(batch)

        def run_by_hand() -> None:
            for code, parts in split.items():
                for part in parts:
                    per_language[code].process(part)

        def run_auto() -> None:
            for batch in batches:
                auto.process(batch)

        t_fixed, t_hand, t_auto = cpu_seconds([run_fixed, run_by_hand, run_auto], args.runs)
        print(f"| {name} | {mb / t_fixed:.1f} | {mb / t_hand:.1f} | {mb / t_auto:.1f} | {t_hand / t_auto:.2f} | "
              f"{t_fixed / t_auto:.2f} |", flush=True)


if __name__ == "__main__":
    main()
