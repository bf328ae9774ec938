#!/usr/bin/env python3
"""The 10-million-document proof (issue 25, item 5): ``tokpipe clean`` with the default web
pipeline plus ``minhash_dedup``, then ``tokpipe tokenize``, at growing corpus sizes, with wall
time, CPU, peak memory of the whole process tree, disk, documents and the recall of planted
near-duplicates.

    python3 benches/python/bench_scale.py --work /work/scale                   # 1M, 3M, 10M
    python3 benches/python/bench_scale.py --work /work/scale --sizes 100k,300k  # a quick look

The corpus comes from ``gen_scale_corpus.py`` (in ``WORK/corpus-SEED-SHARDDOCS``, generated
once for the largest size when missing: a size's input is the first shards of it, so every size
reads the same documents' prefix). Each size runs, one after the other:

1. ``tokpipe clean SHARDS -c WORK/web_scale.yaml -o WORK/run-N/clean --workers W
   --rejected-by-stage``: examples/web.yaml's stages (language, Gopher, C4, FineWeb,
   ``minhash_dedup`` with ``memory_mb`` set explicitly, PII masking);
2. ``tokpipe tokenize WORK/run-N/clean -t VOCAB -o WORK/run-N/tokens -w 1`` (its threads:
   the cores).

Measured per command: wall time, CPU (user + system of the finished children, from
``getrusage``), peak RSS of the process tree (``/proc`` sampled every 0.25 s: the sum over the
tree, which counts pages shared between forked workers once per process, the largest
single process, and the largest anonymous RSS: a process's own memory without the file pages it
maps, such as ``minhash_dedup``'s memory-mapped signatures, which are page cache), and the peak disk of its output folder (staging included, sampled every
second). Then the output folders' disk, the documents in and kept, and the recall of the planted
pairs (``planted.tsv``): of the ``near`` pairs whose two documents both reached
``minhash_dedup`` (neither is in another stage's ``rejected/STAGE`` folder) and are still
near-duplicates there (5-gram Jaccard >= the threshold on the texts the run wrote: C4's rules
drop lines before the dedup, so an edit can move a pair under it), the share where
``minhash_dedup`` dropped one of them; ``near`` in the JSON counts every reached pair. The
``control`` pairs (Jaccard 0.3 to 0.7) give the same share, which should stay near 0. The run folder is removed after each
size unless ``--keep``. Prints a markdown table; ``--json`` (default ``WORK/bench_scale.json``)
keeps everything.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import REPO, SCRATCH, VOCAB_DIR, log, print_machine_facts  # noqa: E402
from gen_scale_corpus import jaccard  # noqa: E402

MIB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_SHARD_DOCS = 500_000


def parse_size(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def shard_docs_for(sizes: list[int]) -> int:
    """The largest shard that divides every size, at most 500k documents and a quarter of the
    smallest size (compressed shards are one task each: 4 or more keep 2 workers busy)."""
    g = 0
    for s in sizes:
        g = math.gcd(g, s)
    cap = min(MAX_SHARD_DOCS, max(1, min(sizes) // 4))
    for k in range(1, g + 1):
        if g % k == 0 and g // k <= cap:
            return g // k
    return 1


# --- sampling the process tree and the disk ---------------------------------------------------

def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields start after the last ')'
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def _anon_bytes(pid: int) -> int:
    """The process's anonymous resident memory (``RssAnon``): its own heap, without the
    file-backed pages it maps (a memory-mapped scratch file is page cache the kernel can drop,
    yet ``statm``'s RSS counts it)."""
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def _tree_rss(root: int) -> tuple[int, int, int, int]:
    """(sum of RSS, largest RSS, processes, largest anonymous RSS) over ``root`` and its
    descendants, in bytes."""
    kids = _children_map()
    todo, total, largest, count, anon = [root], 0, 0, 0, 0
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, ()))
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                rss = int(f.read().split()[1]) * PAGE
            anon = max(anon, _anon_bytes(pid))
        except (OSError, IndexError, ValueError):
            continue
        total += rss
        largest = max(largest, rss)
        count += 1
    return total, largest, count, anon


def disk_bytes(path: Path) -> int:
    """Bytes allocated under ``path`` (blocks, as ``du`` counts them); 0 when missing."""
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
        except OSError:
            pass
    return total


def measure(command: list[str], disk_path: Path) -> dict:
    """Runs ``command``; wall, CPU, peak tree RSS and peak disk under ``disk_path``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command)
    peak = {"rss_sum": 0, "rss_max": 0, "procs": 0, "disk": 0, "anon_max": 0}
    timeline = []  # one sample a second: when the memory peaks, which phase it is
    stop = threading.Event()

    def sample() -> None:
        last_disk = 0.0
        while not stop.is_set():
            total, largest, count, anon = _tree_rss(proc.pid)
            peak["anon_max"] = max(peak["anon_max"], anon)
            peak["rss_sum"] = max(peak["rss_sum"], total)
            peak["rss_max"] = max(peak["rss_max"], largest)
            peak["procs"] = max(peak["procs"], count)
            now = time.perf_counter()
            if now - last_disk >= 1.0:
                disk = disk_bytes(disk_path)
                # The staging (OUT/.tokpipe) apart from the outputs: it grows while the
                # streaming stages run, the outputs while the final shards are cut, neither
                # during a global decide, so the timeline tells the phases apart.
                staging = disk_bytes(disk_path / ".tokpipe")
                peak["disk"] = max(peak["disk"], disk)
                last_disk = now
                timeline.append([round(now - start, 1), round(total / MIB), round(largest / MIB), count,
                                 round(disk / MIB), round(anon / MIB), round(staging / MIB)])
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rc = proc.wait()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        sys.exit(f"command failed (exit {rc}): {' '.join(command)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_tree_mib": round(peak["rss_sum"] / MIB, 1),
            "peak_rss_largest_mib": round(peak["rss_max"] / MIB, 1), "max_processes": peak["procs"],
            "peak_anon_largest_mib": round(peak["anon_max"] / MIB, 1),
            "peak_disk_mib": round(peak["disk"] / MIB, 1),
            "timeline": {"columns": ["s", "rss_tree_mib", "rss_largest_mib", "processes", "disk_mib", "anon_largest_mib",
                                     "staging_mib"],
                         "rows": timeline}}


# --- recall of the planted pairs --------------------------------------------------------------

def recall(clean: Path, planted: list[dict], threshold: float, dedup_stage: str = "minhash_dedup") -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    ids = pa.array(sorted({p["copy_id"] for p in planted} | {p["original_id"] for p in planted}), type=pa.string())
    dropped_elsewhere: set[str] = set()
    dropped_by_dedup: dict[str, str] = {}
    for folder in sorted((clean / "rejected").iterdir()):
        if not folder.is_dir():
            continue
        columns = ["id", "duplicate_of"] if folder.name == dedup_stage else ["id"]
        for batch in ds.dataset(folder).to_batches(columns=columns):
            hit = batch.filter(pc.is_in(batch.column("id"), value_set=ids))
            if folder.name == dedup_stage:
                dropped_by_dedup.update(zip(hit.column("id").to_pylist(), hit.column("duplicate_of").to_pylist()))
            else:
                dropped_elsewhere.update(hit.column("id").to_pylist())
    # The text minhash_dedup saw is not the generated one: C4's rules drop lines first (and PII
    # masking, after it, changes the kept text a little). A pair counts as a duplicate to find
    # when the Jaccard of the two texts as they left the pipeline is still >= the threshold.
    reached_ids = pa.array(sorted(
        {i for p in planted if p["copy_id"] not in dropped_elsewhere and p["original_id"] not in dropped_elsewhere
         for i in (p["copy_id"], p["original_id"])}))
    texts: dict[str, str] = {}
    for folder in (clean / "data", clean / "rejected" / dedup_stage):
        if folder.is_dir():
            for batch in ds.dataset(folder).to_batches(columns=["id", "text"]):
                hit = batch.filter(pc.is_in(batch.column("id"), value_set=reached_ids))
                texts.update(zip(hit.column("id").to_pylist(), hit.column("text").to_pylist()))
    out = {}
    for kind in ("near", "near_at_dedup", "control"):
        pairs = [p for p in planted if p["kind"] == ("near" if kind == "near_at_dedup" else kind)]
        reached = [p for p in pairs if p["copy_id"] not in dropped_elsewhere and p["original_id"] not in dropped_elsewhere]
        if kind == "near_at_dedup":
            reached = [p for p in reached if p["copy_id"] in texts and p["original_id"] in texts
                       and jaccard(texts[p["copy_id"]], texts[p["original_id"]]) >= threshold]
        found = [p for p in reached if p["copy_id"] in dropped_by_dedup or p["original_id"] in dropped_by_dedup]
        # a find "to its original": the copy names its original (or the original its copy)
        direct = [p for p in found if dropped_by_dedup.get(p["copy_id"]) == p["original_id"]
                  or dropped_by_dedup.get(p["original_id"]) == p["copy_id"]]
        out[kind] = {"planted": len(pairs), "reached_dedup": len(reached), "dropped_one": len(found),
                     "dropped_to_its_pair": len(direct),
                     "recall": round(len(found) / len(reached), 4) if reached else None}
    return out


def read_planted(corpus: Path, size: int, threshold: float) -> list[dict]:
    with open(corpus / "planted.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    planted = []
    for r in rows:
        if int(r["copy_id"][1:]) >= size:
            continue
        kind = r["kind"]
        if kind == "near" and float(r["jaccard"]) < threshold:
            kind = "near_below_threshold"  # too edited to be a duplicate at this threshold
        planted.append({"copy_id": r["copy_id"], "original_id": r["original_id"], "kind": kind})
    return planted


# --- the runs ---------------------------------------------------------------------------------

def ensure_corpus(work: Path, docs: int, shard_docs: int, seed: int) -> Path:
    corpus = work / f"corpus-{seed}-{shard_docs}"
    manifest = corpus / "MANIFEST.json"
    if manifest.exists() and json.loads(manifest.read_text())["docs"] >= docs:
        return corpus
    log(f"generating {docs} documents into {corpus}")
    subprocess.run([sys.executable, str(Path(__file__).with_name("gen_scale_corpus.py")), str(corpus),
                    "--docs", str(docs), "--shard-docs", str(shard_docs), "--seed", str(seed)], check=True)
    return corpus


def write_config(work: Path, memory_mb: int) -> tuple[Path, float]:
    import yaml

    config = yaml.safe_load((REPO / "examples" / "web.yaml").read_text())
    threshold = 0.8
    for stage in config["stages"]:
        if stage["type"] == "minhash_dedup":
            stage["memory_mb"] = memory_mb
            threshold = stage.get("threshold", threshold)
    path = work / "web_scale.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, threshold


def run_size(args, corpus: Path, size: int, config: Path, threshold: float) -> dict:
    shard_docs = json.loads((corpus / "MANIFEST.json").read_text())["shard_docs"]
    manifest = json.loads((corpus / "MANIFEST.json").read_text())
    shards = manifest["shards"][: size // shard_docs]
    inputs = [str(corpus / "docs" / s["shard"]) for s in shards]
    run = args.work / f"run-{size}"
    clean, tokens = run / "clean", run / "tokens"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    tokpipe = [sys.executable, "-m", "tokpipe"] if args.python_module else ["tokpipe"]
    log(f"[{size}] clean: {len(inputs)} shards, {sum(s['bytes'] for s in shards) / 1e9:.2f} GB of JSON Lines")
    clean_m = measure(tokpipe + ["clean", *inputs, "-c", str(config), "-o", str(clean), "--workers",
                                 str(args.workers), "--rejected-by-stage", "-q"], clean)
    log(f"[{size}] clean: { {k: v for k, v in clean_m.items() if k != 'timeline'} }")
    log(f"[{size}] tokenize with {args.tokenizer.name}")
    tok_m = measure(tokpipe + ["tokenize", str(clean), "-t", str(args.tokenizer), "-o", str(tokens), "-w",
                               str(args.tokenize_workers), "-q"], tokens)
    log(f"[{size}] tokenize: { {k: v for k, v in tok_m.items() if k != 'timeline'} }")
    cm = json.loads((clean / "manifest.json").read_text())
    tm = json.loads((tokens / "manifest.json").read_text())
    stats = cm.get("stats", {})
    row = {
        "docs": size,
        "input_bytes": sum(s["bytes"] for s in shards),
        "input_compressed_bytes": sum(s["compressed_bytes"] for s in shards),
        "clean": clean_m, "tokenize": tok_m,
        "kept": _kept(cm),
        "per_stage": {name: {k: v for k, v in s.items() if k in ("in", "kept", "dropped", "seconds")}
                      for name, s in stats.items()} if isinstance(stats, dict) else stats,
        "tokens": sum(split.get("tokens", 0) for split in tm.get("splits", {}).values()),
        "disk_mib": {"clean_data": round(disk_bytes(clean / "data") / MIB, 1),
                     "clean_rejected": round(disk_bytes(clean / "rejected") / MIB, 1),
                     "tokens": round(disk_bytes(tokens) / MIB, 1)},
        "recall": recall(clean, read_planted(corpus, size, threshold), threshold),
        "load_average": os.getloadavg(),
    }
    if not args.keep:
        shutil.rmtree(run)
    return row


def _kept(manifest: dict) -> int:
    shards = [s for s in manifest.get("shards", manifest.get("data", [])) if isinstance(s, dict)]
    data = [s for s in shards if str(s.get("path", "")).startswith("data/")]
    return sum(int(s.get("rows", 0)) for s in data) if data else -1


def print_table(rows: list[dict]) -> None:
    print("| docs | input GB | kept | clean wall s | clean CPU s | clean peak RSS tree / largest / largest anonymous MiB | "
          "clean peak disk MiB | tokenize wall s | tokenize CPU s | tokenize peak RSS tree / largest MiB | "
          "tokens | output disk MiB (data + rejected + tokens) | recall | control dropped |")
    print("|" + "---|" * 14)
    for r in rows:
        c, t, d = r["clean"], r["tokenize"], r["disk_mib"]
        near, control = r["recall"]["near_at_dedup"], r["recall"]["control"]
        print(f"| {r['docs']:,} | {r['input_bytes'] / 1e9:.2f} | {r['kept']:,} | {c['wall_s']:.0f} | {c['cpu_s']:.0f} | "
              f"{c['peak_rss_tree_mib']:.0f} / {c['peak_rss_largest_mib']:.0f} / {c['peak_anon_largest_mib']:.0f} | "
              f"{c['peak_disk_mib']:.0f} | "
              f"{t['wall_s']:.0f} | {t['cpu_s']:.0f} | {t['peak_rss_tree_mib']:.0f} / {t['peak_rss_largest_mib']:.0f} | "
              f"{r['tokens']:,} | {d['clean_data']:.0f} + {d['clean_rejected']:.0f} + {d['tokens']:.0f} | "
              f"{near['recall']} ({near['dropped_one']}/{near['reached_dedup']}) | "
              f"{control['dropped_one']}/{control['reached_dedup']} |")
    if len(rows) > 1:
        base = rows[0]
        print()
        print("| docs | x docs | x clean wall | x clean CPU | x tokenize wall | clean docs/s | clean input MB/s |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            f = r["docs"] / base["docs"]
            print(f"| {r['docs']:,} | {f:.1f} | {r['clean']['wall_s'] / base['clean']['wall_s']:.2f} | "
                  f"{r['clean']['cpu_s'] / base['clean']['cpu_s']:.2f} | "
                  f"{r['tokenize']['wall_s'] / base['tokenize']['wall_s']:.2f} | "
                  f"{r['docs'] / r['clean']['wall_s']:,.0f} | {r['input_bytes'] / 1e6 / r['clean']['wall_s']:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TOKPIPE_SCALE_WORK") or SCRATCH / "scale"),
                    help="folder for the corpus and the runs (tens of GB at 10M; default $TOKPIPE_SCALE_WORK, "
                         "else SCRATCH/scale)")
    ap.add_argument("--sizes", default="1M,3M,10M", help="comma-separated sizes in documents (default 1M,3M,10M)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard-docs", type=int,
                    help="documents a corpus shard (default: the largest that divides every size, at most "
                         "500k and a quarter of the smallest): pass the one an existing corpus has to reuse it "
                         "for a single size")
    ap.add_argument("--workers", type=int, default=2, help="clean's --workers (2)")
    ap.add_argument("--tokenize-workers", type=int, default=1, help="tokenize's -w (1; its threads use the cores)")
    ap.add_argument("--memory-mb", type=int, default=256, help="minhash_dedup's memory_mb (256)")
    ap.add_argument("--tokenizer", type=Path, default=VOCAB_DIR / "cl100k_base.tiktoken.gz")
    ap.add_argument("--keep", action="store_true", help="keep each size's outputs (WORK/run-N)")
    ap.add_argument("--python-module", action="store_true", help="run `python -m tokpipe` instead of `tokpipe`")
    ap.add_argument("--json", type=Path, help="where to save the numbers (default WORK/bench_scale.json)")
    args = ap.parse_args()

    sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(args.work, max(sizes), args.shard_docs or shard_docs_for(sizes), args.seed)
    config, threshold = write_config(args.work, args.memory_mb)
    print_machine_facts()
    rows = []
    for size in sizes:
        rows.append(run_size(args, corpus, size, config, threshold))
        print_table(rows[-1:])  # as it goes: a 10M run takes a while
        print()
    print("## All sizes\n")
    print_table(rows)
    out = args.json or args.work / "bench_scale.json"
    out.write_text(json.dumps({"sizes": sizes, "corpus": str(corpus), "config": str(config),
                               "tokenizer": str(args.tokenizer), "workers": args.workers, "rows": rows}, indent=1) + "\n")
    log(f"saved {out}")


if __name__ == "__main__":
    main()
