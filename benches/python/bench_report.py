#!/usr/bin/env python3
"""Build time of ``tokpipe report`` on a ~1 GB ``tokpipe clean`` output.

The output is made in two steps. First, ``tokpipe clean`` runs once on the benchmark corpus
(``docs.jsonl``, 280 MB, built by ``../shared/bench/build_corpus.py``) with a pipeline that
rejects documents for several reasons and writes numeric columns: ``length_filter``,
``gopher_quality``, ``exact_dedup`` and ``text_stats`` (its ``stat_*`` columns). Second, its
shards (kept and rejected) are hard-linked under new names until the folder holds
``--target-gb`` of Parquet, and a manifest is written that lists them all, with the stage
counts multiplied to match. The report reads only what the manifest lists, so to it this is
a 1 GB output, and no 3 GB clean run is needed to make one.

The timed runs are the real command, in a fresh process each (wall time, peak RSS of the
child). Prints a markdown table and the machine facts.

    python benches/python/bench_report.py                    # 1 GB, 3 runs
    python benches/python/bench_report.py --target-gb 2 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import BUILD_HINT, DEFAULT_DOCS, SCRATCH, log, print_machine_facts  # noqa: E402

CONFIG = """stages:
  - type: length_filter
    min: 200
  - type: gopher_quality
  - type: exact_dedup
  - type: text_stats
    max_digit_ratio: 0.3
"""
TOKPIPE = [sys.executable, "-c", "from tokpipe.cli import main; main()"]


def base_output(docs: Path, work: Path) -> Path:
    """One clean run of the corpus (kept between runs of the bench)."""
    base = work / "base"
    if (base / "manifest.json").exists():
        return base
    if not docs.exists():
        raise SystemExit(f"no benchmark corpus at {docs}; build it with: {BUILD_HINT.format(dir=docs.parent)}")
    shutil.rmtree(base, ignore_errors=True)
    config = work / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    log(f"cleaning {docs} ({docs.stat().st_size / 1e6:.0f} MB) into {base}")
    started = time.perf_counter()
    subprocess.run([*TOKPIPE, "clean", str(docs), "-c", str(config), "-o", str(base), "-q"], check=True)
    log(f"  {time.perf_counter() - started:.0f} s")
    return base


def replicate(base: Path, big: Path, target_bytes: int) -> dict:
    """``big``: ``base``'s shards hard-linked ``k`` times (k copies reach ``target_bytes``)
    under a manifest listing them all."""
    manifest = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
    size = sum(e["bytes"] for e in manifest["shards"] + manifest["rejected"])
    copies = max(1, -(-target_bytes // size))
    shutil.rmtree(big, ignore_errors=True)
    big.mkdir(parents=True)
    for key in ("shards", "rejected"):
        entries = []
        for n in range(copies):
            for entry in manifest[key]:
                rel = Path(entry["path"])
                name = rel.with_name(f"copy{n:03d}-{rel.name}")
                (big / name).parent.mkdir(parents=True, exist_ok=True)
                os.link(base / rel, big / name)
                entries.append({**entry, "path": name.as_posix()})
        manifest[key] = entries
    for stage in manifest["stats"].values():
        for name, value in stage.items():
            if isinstance(value, int) and name != "seconds":
                stage[name] = value * copies
    manifest["totals"] = {key: value * copies for key, value in manifest["totals"].items()}
    manifest["errors"] = manifest.get("errors", 0) * copies if isinstance(manifest.get("errors"), int) else 0
    (big / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    if (base / "errors.jsonl").exists():
        shutil.copyfile(base / "errors.jsonl", big / "errors.jsonl")
    return {"copies": copies, "bytes": size * copies, "rows": manifest["totals"]["rows"],
            "rejected_rows": manifest["totals"]["rejected_rows"]}


def time_report(out: Path, page: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one ``tokpipe report`` process."""
    started = time.perf_counter()
    child = subprocess.Popen([*TOKPIPE, "report", str(out), "-o", str(page), "-q"])
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"tokpipe report failed (status {status})")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help="the corpus' docs.jsonl")
    parser.add_argument("--work", type=Path, default=SCRATCH / "report", help="where the outputs are built")
    parser.add_argument("--target-gb", type=float, default=1.0, help="size of the output the report reads")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    base = base_output(args.docs, args.work)
    facts = replicate(base, args.work / "big", int(args.target_gb * 1e9))
    log(f"output: {facts['bytes'] / 1e9:.2f} GB of Parquet ({facts['copies']} copies of the clean run), "
        f"{facts['rows']:,} kept and {facts['rejected_rows']:,} rejected rows")
    times = []
    for n in range(args.runs):
        wall, rss = time_report(args.work / "big", args.work / "report.html")
        log(f"run {n + 1}: {wall:.2f} s, peak RSS {rss:.0f} MB")
        times.append((wall, rss))
    walls = sorted(t for t, _ in times)
    page = (args.work / "report.html").stat().st_size
    print("\n| output | kept rows | rejected rows | report (median wall) | min | peak RSS | page |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {facts['bytes'] / 1e9:.2f} GB Parquet | {facts['rows']:,} | {facts['rejected_rows']:,} | "
          f"{walls[len(walls) // 2]:.2f} s | {walls[0]:.2f} s | {max(r for _, r in times):.0f} MB | "
          f"{page / 1e6:.2f} MB |\n")
    print_machine_facts(("pyarrow", "numpy"))


if __name__ == "__main__":
    main()
