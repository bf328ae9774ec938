#!/usr/bin/env python3
"""``tokpipe clean`` against datatrove's same pipeline, and against tokpipe's own kernels alone:
CPU seconds on 40 MB of English documents, one worker each (issue 25, "A leaner clean").

    python3 benches/python/bench_clean_vs_datatrove.py [--mb 40] [--repeat 3]
        [--pipelines filters,minhash] [--skip-datatrove] [--json OUT.json]

Every measurement is a fresh process, and its CPU is ``getrusage(RUSAGE_CHILDREN)`` (user +
system, every thread) around it. The runs alternate, so load from other users of the
machine falls on each side alike; the best of ``--repeat`` is kept (datatrove: of
``--datatrove-repeat``, 1 by default: it takes minutes).

Input: the English documents of the shared Common Crawl samples (``corpora/web/cc_en_*``),
then the benchmark corpus' English ``linux-rst``, ``python-txt`` and ``linux-txt``
documents, in that order, until ``--mb`` MB of text, written once as JSON Lines
(``{"id", "text"}``) under SCRATCH.

Two pipelines, each run three ways:

``filters``: read JSON Lines -> gopher_repetition -> gopher_quality (min_doc_words 50,
max_doc_words 100000, as ``examples/web.yaml``) -> c4_quality -> fineweb_quality -> Parquet.

* tokpipe clean: ``tokpipe clean IN -o OUT -c CONFIG --workers 1 -q`` (kept and rejected
  documents written, the manifest and dataset card too).
* tokpipe kernels alone: in one process, the input read by tokpipe's reader into its
  Arrow batches (not counted), then each batch through the four stages' ``process``
  (what calls the Rust kernels; the CPU counted is ``time.process_time()`` around that loop
  only: no interpreter start, no import, no reading, no writing).
* datatrove (the record of its pipeline; datatrove's defaults elsewhere)::

      LocalPipelineExecutor(pipeline=[
          JsonlReader(IN_DIR),
          GopherRepetitionFilter(),
          GopherQualityFilter(min_doc_words=50, max_doc_words=100000),
          C4QualityFilter(),
          FineWebQualityFilter(),
          ParquetWriter(OUT),
      ], tasks=1, workers=1, logging_dir=LOGS).run()

``minhash``: MinHash near-duplicate removal only, word 5-grams, threshold 0.8.

* tokpipe clean with ``stages: [{type: minhash_dedup}]`` (its defaults: 128 permutations,
  threshold 0.8, verify exact).
* tokpipe kernels alone: the stage's ``keys`` (signatures and band keys) of every batch and
  its ``decide`` over them (the exact Jaccard check reading the texts from memory).
* datatrove's four steps (its defaults: 14 buckets x 8 hashes, word 5-grams), each its own
  executor, ``workers=1``::

      config = MinhashConfig()
      LocalPipelineExecutor([JsonlReader(IN_DIR), MinhashDedupSignature(SIGS, config=config)], tasks=1, workers=1)
      LocalPipelineExecutor([MinhashDedupBuckets(SIGS, BUCKETS, config=config)], tasks=config.num_buckets, workers=1)
      LocalPipelineExecutor([MinhashDedupCluster(BUCKETS, IDS, config=config)], tasks=1, workers=1)
      LocalPipelineExecutor([JsonlReader(IN_DIR), MinhashDedupFilter(IDS), ParquetWriter(OUT)], tasks=1, workers=1)

Prints a markdown table: CPU seconds, and the ratios clean / kernels and datatrove / clean.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

FILTERS_YAML = """stages:
  - type: gopher_repetition
  - type: gopher_quality
    min_doc_words: 50
    max_doc_words: 100000
  - type: c4_quality
  - type: fineweb_quality
"""
MINHASH_YAML = """stages:
  - type: minhash_dedup
    threshold: 0.8
"""
CONFIGS = {"filters": FILTERS_YAML, "minhash": MINHASH_YAML}
ENGLISH_SOURCES = ("linux-rst", "python-txt", "linux-txt")


def build_input(path: Path, mb: float) -> Path:
    """The English documents (see the module docstring) as JSON Lines, built once."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    limit, total = int(mb * 1e6), 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        def emit(doc_id: str, text: str) -> None:
            nonlocal total
            out.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
            total += len(text.encode())

        for sample in sorted((_corpus.SHARED_CORPORA / "web").glob("cc_en_*.jsonl.gz")):
            with gzip.open(sample, "rt", encoding="utf-8") as f:
                for line in f:
                    if total < limit:
                        doc = json.loads(line)
                        emit(doc["id"], doc["text"])
        docs = _corpus.check_corpus(_corpus.DEFAULT_CORPUS) / "docs.jsonl"
        for source in ENGLISH_SOURCES:
            with open(docs, encoding="utf-8") as f:
                for line in f:
                    if total >= limit:
                        break
                    doc = json.loads(line)
                    if doc["source"] == source and doc.get("lang") == "en":
                        emit(doc["id"], doc["text"])
    tmp.rename(path)
    return path


def child_env(work: Path) -> dict[str, str]:
    """The children's environment: compiled modules cached (under ``work``, not in the
    source tree), as an installed package has them. With ``PYTHONDONTWRITEBYTECODE`` set, as
    on the machine these numbers first came from, every run compiled tokpipe's sources
    again: 0.5 to 1.4 s of CPU that no user pays."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


ENV: dict[str, str] = {}


def measured(cmd: list[str]) -> tuple[float, float, str]:
    """(CPU seconds of the child process and its threads, wall seconds, its stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=ENV or None)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, done.stdout


def run_clean(inputs: Path, config: Path, out: Path) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    cpu, wall, _ = measured([sys.executable, "-c", "from tokpipe.cli import main; main()", "clean", str(inputs),
                             "-o", str(out), "-c", str(config), "--workers", "1", "-q"])
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return {"cpu_s": cpu, "wall_s": wall, "kept": manifest["totals"]["rows"],
            "rejected": manifest["totals"]["rejected_rows"]}


def run_child(kind: str, pipeline: str, inputs: Path, work: Path) -> dict[str, float]:
    cpu, wall, stdout = measured([sys.executable, __file__, "--child", kind, "--pipelines", pipeline,
                                  "--input", str(inputs), "--work-dir", str(work)])
    return {"cpu_s": cpu, "wall_s": wall, **json.loads(stdout.strip().splitlines()[-1])}


# -- The children (a fresh process each).


def child_kernels(pipeline: str, inputs: Path, config: Path) -> dict[str, float]:
    """tokpipe's stages on the reader's batches, CPU of the stage loop only."""
    from tokpipe.pipeline.config import load_config
    from tokpipe.pipeline.readers import ReaderOptions, plan_tasks, read_task

    options = ReaderOptions()
    batches = [b for t in plan_tasks([str(inputs)], options) for b in read_task(t, options, lambda e: None)]
    stages = [spec.build() for spec in load_config(str(config)).stages]
    kept = 0
    if pipeline == "filters":
        for stage in stages:  # the rules' tables are built outside the timing, as datatrove's are at import
            stage.process(batches[0].slice(0, 2))
        started = time.process_time()
        for batch in batches:
            for stage in stages:
                batch = stage.process(batch).kept
                if not batch.num_rows:
                    break
            kept += batch.num_rows
        cpu = time.process_time() - started
    else:
        import pyarrow as pa

        from tokpipe.pipeline.base import DecideContext
        from tokpipe.pipeline.kernels import arrow_of

        (stage,) = stages
        started = time.process_time()
        texts = pa.chunked_array([b.column("text") for b in batches]).combine_chunks()  # for exact verification
        keys = [stage.keys(batch) for batch in batches]
        decisions = stage.decide(keys, DecideContext(scratch=config.parent / "scratch",
                                                     column=lambda name, positions: texts.take(arrow_of(positions))))
        cpu = time.process_time() - started
        kept = sum(len(d) for d in decisions)  # documents decided (the kept count is clean's)
    return {"kernel_cpu_s": cpu, "kept": kept}


def _encode_strings_for_xxhash() -> None:
    """datatrove 0.10 hands its shingles to ``xxhash`` as ``str``, which xxhash 4 refuses
    ("Strings must be encoded before hashing"); earlier versions hashed their UTF-8 bytes.
    So do its hash functions here, leaving its default (64-bit xxhash) in place."""
    import xxhash
    from datatrove.utils.hashes import xxhash as hashes

    hashes.xxhash32 = lambda data: xxhash.xxh32_intdigest(data.encode() if isinstance(data, str) else data)
    hashes.xxhash64 = lambda data: xxhash.xxh64_intdigest(data.encode() if isinstance(data, str) else data)


def child_datatrove(pipeline: str, inputs: Path, work: Path) -> dict[str, float]:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import ParquetWriter

    shutil.rmtree(work / "dt", ignore_errors=True)
    dt = work / "dt"
    in_dir = str(inputs.parent)
    reader = lambda: JsonlReader(in_dir, glob_pattern=inputs.name)  # noqa: E731
    if pipeline == "filters":
        from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                                GopherRepetitionFilter)
        LocalPipelineExecutor(pipeline=[
            reader(),
            GopherRepetitionFilter(),
            GopherQualityFilter(min_doc_words=50, max_doc_words=100000),
            C4QualityFilter(),
            FineWebQualityFilter(),
            ParquetWriter(str(dt / "out")),
        ], tasks=1, workers=1, logging_dir=str(dt / "logs")).run()
    else:
        from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                                      MinhashDedupFilter, MinhashDedupSignature)
        _encode_strings_for_xxhash()
        config = MinhashConfig()
        sigs, buckets, ids = str(dt / "sigs"), str(dt / "buckets"), str(dt / "ids")
        LocalPipelineExecutor([reader(), MinhashDedupSignature(sigs, config=config)], tasks=1, workers=1,
                              logging_dir=str(dt / "logs1")).run()
        LocalPipelineExecutor([MinhashDedupBuckets(sigs, buckets, config=config)], tasks=config.num_buckets,
                              workers=1, logging_dir=str(dt / "logs2")).run()
        LocalPipelineExecutor([MinhashDedupCluster(buckets, ids, config=config)], tasks=1, workers=1,
                              logging_dir=str(dt / "logs3")).run()
        LocalPipelineExecutor([reader(), MinhashDedupFilter(ids), ParquetWriter(str(dt / "out"))], tasks=1,
                              workers=1, logging_dir=str(dt / "logs4")).run()
    import pyarrow.parquet as pq

    kept = sum(pq.ParquetFile(p).metadata.num_rows for p in (dt / "out").rglob("*.parquet"))
    return {"kept": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tokpipe measurement (best kept)")
    parser.add_argument("--datatrove-repeat", type=int, default=1)
    parser.add_argument("--pipelines", default="filters,minhash")
    parser.add_argument("--skip-datatrove", action="store_true")
    parser.add_argument("--work-dir", type=Path, default=_corpus.SCRATCH / "clean-vs-datatrove")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", choices=("kernels", "datatrove"), help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    a = parser.parse_args()
    work: Path = a.work_dir
    work.mkdir(parents=True, exist_ok=True)
    if a.child:
        config = work / f"{a.pipelines}.yaml"
        result = (child_kernels(a.pipelines, a.input, config) if a.child == "kernels"
                  else child_datatrove(a.pipelines, a.input, work))
        print(json.dumps(result))
        return

    inputs = build_input(work / f"english-{a.mb:g}mb" / "docs.jsonl", a.mb)
    ENV.update(child_env(work))
    # Untimed: fills the compiled-module cache of the children.
    warm = "import tokpipe.cli, tokpipe.pipeline.engines.local, tokpipe.pipeline.stages"
    if not a.skip_datatrove:
        warm += "; import datatrove.executor, datatrove.pipeline.filters, datatrove.pipeline.dedup"
    subprocess.run([sys.executable, "-c", warm], check=True, env=ENV)
    mb = sum(len(json.loads(line)["text"].encode()) for line in open(inputs, encoding="utf-8")) / 1e6
    print("# tokpipe clean vs its kernels and datatrove\n")
    _corpus.print_machine_facts(packages=("pyarrow", "datatrove"))
    print(f"Input: {inputs} ({mb:.1f} MB of text, {sum(1 for _ in open(inputs, encoding='utf-8')):,} documents); "
          "1 worker each.\n")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for pipeline in a.pipelines.split(","):
        config = work / f"{pipeline}.yaml"
        config.write_text(CONFIGS[pipeline], encoding="utf-8")
        best: dict[str, dict[str, float]] = {}

        def keep(name: str, row: dict[str, float], key: str = "cpu_s") -> None:
            _corpus.log(f"  {pipeline} {name}: {row}")
            if name not in best or row[key] < best[name][key]:
                best[name] = row

        dt_runs = 0 if a.skip_datatrove else a.datatrove_repeat
        for i in range(max(a.repeat, dt_runs)):
            if i < a.repeat:
                keep("clean", run_clean(inputs, config, work / f"out-{pipeline}"))
                keep("kernels", run_child("kernels", pipeline, inputs, work), "kernel_cpu_s")
            if i < dt_runs:
                keep("datatrove", run_child("datatrove", pipeline, inputs, work))
        results[pipeline] = best
        clean, kernels = best["clean"]["cpu_s"], best["kernels"]["kernel_cpu_s"]
        print(f"## {pipeline}\n")
        print("| run | CPU s | wall s | MB per CPU s |\n| --- | --- | --- | --- |")
        print(f"| tokpipe clean | {clean:.2f} | {best['clean']['wall_s']:.2f} | {mb / clean:.1f} |")
        print(f"| tokpipe kernels alone (stage loop) | {kernels:.2f} | - | {mb / kernels:.1f} |")
        if "datatrove" in best:
            d = best["datatrove"]["cpu_s"]
            print(f"| datatrove | {d:.2f} | {best['datatrove']['wall_s']:.2f} | {mb / d:.2f} |")
        print(f"\nclean / kernels alone: {clean / kernels:.2f}x")
        if "datatrove" in best:
            print(f"datatrove / clean: {best['datatrove']['cpu_s'] / clean:.1f}x less CPU for tokpipe; "
                  f"datatrove / kernels alone: {best['datatrove']['cpu_s'] / kernels:.1f}x")
        print(f"kept: tokpipe {best['clean']['kept']:,}"
              + (f", datatrove {best['datatrove']['kept']:,}" if "datatrove" in best else "") + "\n")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
