#!/usr/bin/env python3
"""Throughput of ``tokpipe clean`` (read -> normalize -> exact_dedup -> write) against worker count.

Runs the real command, in a fresh process per run, on the whole benchmark corpus
(``docs.jsonl``, 280 MB, 144k documents built by ``../shared/bench/build_corpus.py``;
its ``linux-rst`` and ``linux-txt`` sources hold natural exact duplicates), once per worker
count, into a fresh output folder each time. Reports documents/s and MB/s of input, the
kept and rejected counts (the same for every worker count, or the run says so), and the
speed-up over one worker. Prints a markdown table; ``--json`` also saves the numbers.

    python benches/python/bench_clean.py                      # workers 1 and 2
    python benches/python/bench_clean.py --workers 1,2,4,8,16 # on a bigger machine
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import BUILD_HINT, DEFAULT_CORPUS, log, print_machine_facts  # noqa: E402

CONFIG = "stages:\n  - type: normalize\n  - type: exact_dedup\n"


def run_once(inputs: Path, out: Path, config: Path, workers: int) -> dict[str, float]:
    cmd = [sys.executable, "-c", "from tokpipe.cli import main; main()", "clean", str(inputs), "-o", str(out),
           "-c", str(config), "--workers", str(workers), "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    stats = manifest["stats"]
    return {
        "workers": workers,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "documents": stats["read"]["in"],
        "kept": manifest["totals"]["rows"],
        "rejected": manifest["totals"]["rejected_rows"],
        "duplicates": stats["exact_dedup"].get("dropped_duplicate", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--workers", default="1,2", help="worker counts to run (default: 1,2)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where the outputs go (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None)
    a = parser.parse_args()

    inputs = a.corpus / "docs.jsonl"
    if not inputs.exists():
        sys.exit(f"{inputs} is missing: build it with {BUILD_HINT.format(dir=a.corpus)}")
    mb = inputs.stat().st_size / 1e6
    print("# tokpipe clean benchmark\n\n## Machine\n")
    print_machine_facts(packages=("pyarrow",))
    print(f"\nInput: {inputs} ({mb:.1f} MB). Pipeline: read -> normalize -> exact_dedup -> write (zstd Parquet).\n")
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="tokpipe-bench-clean-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "pipeline.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    rows = []
    for workers in [int(w) for w in a.workers.split(",")]:
        out = work / f"out-{workers}"
        shutil.rmtree(out, ignore_errors=True)
        log(f"workers {workers} ...")
        row = run_once(inputs, out, config, workers)
        log(f"   {row['wall_s']:.1f} s, {row['documents'] / row['wall_s']:,.0f} docs/s")
        rows.append(row)
        shutil.rmtree(out, ignore_errors=True)
    base = rows[0]["wall_s"]
    print("| workers | wall s | CPU s | docs/s | MB/s | speed-up | documents | kept | duplicates | rejected |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workers']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['documents'] / r['wall_s']:,.0f} | "
              f"{mb / r['wall_s']:.1f} | {base / r['wall_s']:.2f} | {r['documents']:,} | {r['kept']:,} | "
              f"{r['duplicates']:,} | {r['rejected']:,} |")
    same = len({(r["kept"], r["rejected"]) for r in rows}) == 1
    print(f"\nKept and rejected counts equal for every worker count: {'yes' if same else 'NO'}")
    print(f"Load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
