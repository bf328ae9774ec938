#!/usr/bin/env python3
"""End-to-end ``tokpipe tokenize`` against raw encoding of the same texts.

What is measured
----------------
A slice of the benchmark corpus (the first --mb MB of docs.jsonl, whole lines) is written to
a scratch folder. Then, with the same tokenizer (cl100k by default):

  encode_batch   ``Tokenizer.encode_batch(texts)`` over all the slice's texts, held in
                 memory (JSON parsing not timed): ids as Python lists.
  encode_arrow   ``Tokenizer.encode_arrow(column)`` over the same texts as one Arrow
                 column: flat ids, no Python object per document.
  tokenize       ``tokpipe tokenize SLICE -o OUT --format both --pack --seq-len 2048
                 --workers 2``, a subprocess, timed wall clock from start to exit: reading
                 the JSONL, encoding, staging, the shuffle, packed Parquet, Megatron
                 .bin/.idx and the manifest. Its peak memory is the largest sum of the RSS
                 of the process tree, sampled every 50 ms from /proc.

MB/s counts the UTF-8 bytes of the texts. "vs encode_batch" is tokenize's MB/s over
encode_batch's (the issue's target is >= 0.8). MB/CPU-s divides by the CPU time (user +
system, all threads and processes) instead: on a machine shared with other jobs the wall
figures swing with their load, the CPU figures much less. The end-to-end run is repeated at 2x the
input (--scale) to show its peak memory stays bounded (the shuffle holds at most
--shuffle-buffer of ids; the rest spills to sorted buckets on disk).

    python3 benches/python/bench_tokenize.py --mb 64 --scale 2
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
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from _corpus import DEFAULT_CORPUS, log, print_machine_facts  # noqa: E402

VOCAB = Path("/work/shared/corpora/vocab")


def write_slice(src: Path, dst: Path, mb: float) -> tuple[int, int]:
    """The first ``mb`` MB of ``src`` (whole lines) to ``dst``; (documents, text bytes)."""
    limit = int(mb * 1e6)
    size = docs = text_bytes = 0
    with open(src, "rb") as f, open(dst, "wb") as out:
        for line in f:
            if size + len(line) > limit and docs:
                break
            out.write(line)
            size += len(line)
            docs += 1
            text_bytes += len(json.loads(line)["text"].encode("utf-8"))
    return docs, text_bytes


def tree_rss(root: int) -> int:
    """Sum of VmRSS (bytes) of ``root`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run_tokenize(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the whole process tree) and peak tree RSS of one
    ``tokpipe tokenize`` run."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    cpu = cpu_seconds(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "from tokpipe.cli import main; main()", "tokenize", *args],
                            env=env, stderr=subprocess.PIPE, text=True)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"tokpipe tokenize failed: {err}")
    return seconds, cpu_seconds(resource.RUSAGE_CHILDREN) - cpu, peak


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    p.add_argument("--mb", type=float, default=64.0, help="JSONL MB in the 1x slice")
    p.add_argument("--scale", type=float, default=2.0, help="also run end to end on this multiple of the slice")
    p.add_argument("--vocab", default="cl100k_base.tiktoken.gz")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="tokenize's --threads per worker")
    p.add_argument("--shuffle-buffer", default="64MB")
    p.add_argument("--runs", type=int, default=2, help="best of this many raw-encode runs")
    p.add_argument("--scratch", type=Path, default=None)
    args = p.parse_args()

    import pyarrow as pa

    from tokpipe.pipeline.stages.tokenize import load_tokenizer

    print_machine_facts()
    scratch = Path(tempfile.mkdtemp(prefix="bench-tokenize-", dir=args.scratch))
    tokenizer_path = str(VOCAB / args.vocab)
    try:
        rows = []
        for scale in (1.0, args.scale) if args.scale and args.scale != 1.0 else (1.0,):
            folder = scratch / f"in{scale:g}"
            folder.mkdir()
            docs, text_bytes = write_slice(args.corpus / "docs.jsonl", folder / "docs.jsonl", args.mb * scale)
            mb = text_bytes / 1e6
            log(f"{scale:g}x: {docs:,} documents, {mb:,.1f} MB of text")
            if scale == 1.0:
                with open(folder / "docs.jsonl", encoding="utf-8") as f:
                    texts = [json.loads(line)["text"] for line in f]
                tok = load_tokenizer(tokenizer_path)
                tok.encode("warm up")
                best_batch = best_arrow = float("inf")
                cpu_batch = cpu_arrow = 0.0
                column = pa.array(texts, type=pa.large_string())
                for _ in range(args.runs):
                    c, t = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
                    tok.encode_batch(texts)
                    if time.perf_counter() - t < best_batch:
                        best_batch, cpu_batch = time.perf_counter() - t, cpu_seconds(resource.RUSAGE_SELF) - c
                    c, t = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
                    tok.encode_arrow(column)
                    if time.perf_counter() - t < best_arrow:
                        best_arrow, cpu_arrow = time.perf_counter() - t, cpu_seconds(resource.RUSAGE_SELF) - c
                del texts, column
                rows.append(("encode_batch", "1x", mb, best_batch, cpu_batch, None))
                rows.append(("encode_arrow", "1x", mb, best_arrow, cpu_arrow, None))
            out = scratch / f"out{scale:g}"
            cmd = [str(folder), "-t", tokenizer_path, "-o", str(out), "--format", "both", "--pack",
                   "--seq-len", "2048", "--workers", str(args.workers), "--shuffle-buffer", args.shuffle_buffer,
                   "-q"]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            seconds, cpu, peak = run_tokenize(cmd)
            manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
            log(f"  tokenize: {manifest['totals']['tokens']:,} tokens, {seconds:.1f}s, peak RSS {peak / 2**20:,.0f} MiB")
            rows.append(("tokenize (both, pack 2048)", f"{scale:g}x", mb, seconds, cpu, peak))
            shutil.rmtree(out)
        base, base_cpu = rows[0][2] / rows[0][3], rows[0][2] / rows[0][4]
        print(f"\nload average during the runs (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("\n| run | input | MB/s | seconds | vs encode_batch | MB/CPU-s | vs encode_batch (CPU) | peak RSS |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for name, scale, mb, seconds, cpu, peak in rows:
            rss = f"{peak / 2**20:,.0f} MiB" if peak else ""
            print(f"| {name} | {scale} | {mb / seconds:.2f} | {seconds:.1f} | {mb / seconds / base:.2f} | "
                  f"{mb / cpu:.2f} | {mb / cpu / base_cpu:.2f} | {rss} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
