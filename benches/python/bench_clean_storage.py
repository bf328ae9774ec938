#!/usr/bin/env python3
"""``tokpipe clean`` with its input and output in object storage against the same run on
local disk: a local S3 server (moto's standalone server, in a process of its own on
127.0.0.1) and the same documents, the same config, the same workers.

The first ``--mb`` MB of the benchmark corpus (``docs.jsonl``, built by
``../shared/bench/build_corpus.py``) are cut into four JSONL files. Each layout runs
``--repeat`` times in a fresh process into a fresh output; the median wall time is reported,
as MB/s of input and as the ratio to local disk. Layouts:

- ``local -> local``: files on disk, output folder on disk (the baseline);
- ``s3 -> s3``: input and output in the bucket, the run's staging on local disk (the default);
- ``s3 -> s3, staging in the bucket``: ``--staging-dir s3://...`` (what Ray without a shared
  filesystem uses);
- ``s3 -> local``: input in the bucket, output on disk.

The S3 server is a Python process on the same machine: its CPU is taken from the run's, so
the ratios are a pessimistic bound on what a real bucket costs (there, latency matters more
and CPU less).

    python benches/python/bench_clean_storage.py [--mb 64] [--workers 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import BUILD_HINT, DEFAULT_CORPUS, log, print_machine_facts  # noqa: E402

CONFIG = "stages:\n  - type: normalize\n  - type: gopher_quality\n  - type: exact_dedup\n"
SERVER = ("from moto.server import ThreadedMotoServer\nimport sys, time\n"
          "s = ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False)\n"
          "s.start()\nprint('ready', flush=True)\ntime.sleep(1e9)\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cut_corpus(source: Path, folder: Path, megabytes: float) -> int:
    """The first ``megabytes`` MB of ``source``'s lines, dealt into four files; returns bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [open(folder / f"part{n}.jsonl", "wb") for n in range(4)]
    taken = 0
    with open(source, "rb") as f:
        for n, line in enumerate(f):
            if taken >= megabytes * 1e6:
                break
            files[n % 4].write(line)
            taken += len(line)
    for handle in files:
        handle.close()
    return taken


def clean(inputs: str, out: str, config: Path, workers: int, env: dict[str, str], extra: list[str]) -> float:
    cmd = [sys.executable, "-c", "from tokpipe.cli import main; main()", "clean", inputs, "-o", out,
           "-c", str(config), "-w", str(workers), "-q", "--overwrite", *extra]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--mb", type=float, default=64.0, help="MB of input (default 64)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    source = args.corpus / "docs.jsonl"
    if not source.exists():
        sys.exit(f"no {source}: {BUILD_HINT}")
    print_machine_facts(["tokpipe", "fsspec", "s3fs", "moto", "pyarrow"])
    work = Path(tempfile.mkdtemp(prefix="tokpipe-bench-storage-"))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
               "TOKPIPE_CACHE": str(work / "cache")}
        os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                               "AWS_ENDPOINT_URL")})
        import s3fs

        size = cut_corpus(source, work / "in", args.mb)
        fs = s3fs.S3FileSystem()
        fs.mkdir("bench")
        fs.put(str(work / "in") + "/", "bench/in/", recursive=True)
        config = work / "pipeline.yaml"
        config.write_text(CONFIG, encoding="utf-8")
        layouts = [
            ("local -> local", str(work / "in"), str(work / "out"), []),
            ("s3 -> s3 (staging on local disk)", "s3://bench/in", "s3://bench/out", []),
            ("s3 -> s3 (staging in the bucket)", "s3://bench/in", "s3://bench/out2",
             ["--staging-dir", "s3://bench/staging"]),
            ("s3 -> local", "s3://bench/in", str(work / "out3"), []),
        ]
        rows = []
        for name, inputs, out, extra in layouts:
            times = []
            for _ in range(args.repeat):
                if extra:
                    fs.rm("bench/staging", recursive=True) if fs.exists("bench/staging") else None
                times.append(clean(inputs, out, config, args.workers, env, extra))
                log(f"{name}: {times[-1]:.1f} s")
            rows.append((name, statistics.median(times)))
        base = rows[0][1]
        print(f"\n{size / 1e6:.0f} MB of JSONL in 4 files, {args.workers} workers, normalize + gopher_quality + "
              f"exact_dedup, median of {args.repeat}\n")
        print("| layout | wall s | MB/s | vs local disk |\n|---|---:|---:|---:|")
        for name, wall in rows:
            print(f"| {name} | {wall:.1f} | {size / 1e6 / wall:.1f} | {base / wall:.2f}x |")
    finally:
        server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
