#!/usr/bin/env python3
"""The filesystem layer for object storage: pyarrow.fs, fsspec (s3fs) and obstore, side by side.

(Over 500 lines because it is one self-contained harness: the S3 server child, its request
log, and five measurements that must share one server, one object and one timing helper.)

Starts moto's standalone S3 server (``ThreadedMotoServer``) in a child process on 127.0.0.1,
uploads the SAME data once, and measures each layer against it, with a local-disk
(``file://``) baseline on the same bytes:

1. sequential read of one large JSON Lines object (``--size-mb``, default 256), in 1 MiB and
   8 MiB ``read()`` calls as a line reader would make them (newlines are counted, so every
   byte is touched and checked);
2. a 64 MB byte range starting mid-file (how a work unit reads its split of a JSONL file);
3. listing 10,000 small keys under a prefix, recursively and one level with a delimiter
   (time, and whether every key came back once and in sorted order);
4. a ``--write-mb`` object written through each layer's streaming writer and uploaded from a
   local file (the ``fs.atomic`` pattern), with the requests that did it (PutObject or
   multipart, how many parts) and what a writer leaves behind when the block raises;
5. Parquet read through each (pyarrow.parquet on pyarrow.fs natively, on s3fs, and on
   obstore's bytes or its fsspec adapter), whole table and one column.

Every figure is the median of ``--runs`` (3), in MB/s with the ratio to the fastest S3 row
of its group; beside it the client's CPU seconds (all its threads) and the server's, and the
HTTP requests the server logged. The server is a Python process on the same machine: where it
is the bottleneck the server CPU column says so, and the local rows show the ceiling.

Two fixes are applied inside the server child (and printed): moto 5.2.1 names the root of
its CompleteMultipartUpload answer ``...Response`` instead of ``...Result``, which pyarrow
takes for an error (getmoto/moto#10055), so pyarrow could not write at all; and moto copies
the whole object on every ranged GET (its cost grows with the object, ~270 ms per GET of a
256 MB object), which real S3 does not do, so the child caches each key's bytes.
``--stock-moto`` keeps the second behaviour to show what it does to the ranking.
``--latency-ms N`` makes the server wait N ms before answering each request, as a stand-in for
S3's first-byte latency (tens of ms), which loopback does not have: it is what makes the number
of requests a layer sends matter.

    python benches/python/bench_storage.py                    # 256 MB, 3 runs, ~10 min on 2 cores
    python benches/python/bench_storage.py --size-mb 64 --runs 1 --only read,list
    python benches/python/bench_storage.py --latency-ms 30 --only read,range,parquet
    TOKPIPE_BENCH_CORPUS=/tmp/benchcorpus python benches/python/bench_storage.py --json out.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import DEFAULT_DOCS, SCRATCH, SHARED_CORPORA, log, print_machine_facts  # noqa: E402

MiB = 1 << 20
BUCKET = "bench"
PACKAGES = ("pyarrow", "fsspec", "s3fs", "aiobotocore", "botocore", "obstore", "moto", "werkzeug")
MEASUREMENTS = ("read", "range", "list", "write", "parquet")

# Runs in the server child. The two patches are described in the module docstring.
SERVER_CODE = r"""
import sys
from moto.core.serialize import S3Serializer
_body = S3Serializer._serialize_body
def _fixed_body(self, body):
    text = _body(self, body)
    if self.operation_model.name == "CompleteMultipartUpload":
        text = text.replace("CompleteMultipartUploadResponse", "CompleteMultipartUploadResult")
    return text
S3Serializer._serialize_body = _fixed_body
if "--cache-key-bytes" in sys.argv:
    from moto.s3.models import FakeKey
    _value = FakeKey.value
    def _get(self):
        cached = self.__dict__.get("_bench_bytes")
        if cached is None:
            cached = self.__dict__["_bench_bytes"] = _value.fget(self)
        return cached
    def _set(self, new):
        self.__dict__.pop("_bench_bytes", None)
        _value.fset(self, new)
    FakeKey.value = property(_get, _set)
if "--latency-ms" in sys.argv:
    import time
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    _delay = float(sys.argv[sys.argv.index("--latency-ms") + 1]) / 1000
    _call = DomainDispatcherApplication.__call__
    def _late(self, environ, start_response):
        time.sleep(_delay)  # releases the GIL: concurrent requests wait side by side, as on S3
        return _call(self, environ, start_response)
    DomainDispatcherApplication.__call__ = _late
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=True)
server.start()
print("PORT", server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
"""
LOG_LINE = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/[\d.]+" (\d+)')


class MotoServer:
    """moto's S3 server in a child process, its request log in a file, its CPU time from /proc."""

    def __init__(self, log_path: Path, cache_key_bytes: bool, latency_ms: float = 0.0):
        self.log_path = log_path
        env = dict(os.environ)
        args = [sys.executable, "-c", SERVER_CODE] + (["--cache-key-bytes"] if cache_key_bytes else [])
        if latency_ms:
            args += ["--latency-ms", str(latency_ms)]
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(log_path, "w"), text=True)
        for line in self.proc.stdout:
            if line.startswith("PORT"):
                self.port = int(line.split()[1])
                break
        else:
            sys.exit(f"the moto server did not start; see {log_path}")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_offset(self) -> int:
        return self.log_path.stat().st_size

    def requests_since(self, offset: int) -> list[tuple[str, str, int]]:
        # werkzeug writes the line after the response went out: let the last ones land
        time.sleep(0.3)
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            return [(m[1], m[2], int(m[3])) for m in LOG_LINE.finditer(f.read())]

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def request_kind(method: str, target: str) -> str:
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    is_bucket = parts.path.strip("/").count("/") == 0
    if method == "POST" and "uploads" in query:
        return "create-mpu"
    if method == "PUT" and "partNumber" in query:
        return "part"
    if method == "POST" and "uploadId" in query:
        return "complete-mpu"
    if method == "DELETE" and "uploadId" in query:
        return "abort-mpu"
    if method == "GET" and is_bucket:
        return "list"
    return {"GET": "get", "PUT": "put", "HEAD": "head", "DELETE": "delete", "POST": "post"}[method]


def summarize(requests) -> str:
    counts: dict[str, int] = {}
    for method, target, status in requests:
        kind = request_kind(method, target)
        if status >= 400:
            kind += f" {status}"
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def measure(fn, runs: int, server: MotoServer | None, nbytes: int | None = None, before=None) -> dict:
    """Median wall, client CPU and server CPU of ``runs`` calls of ``fn``; requests of the first call.

    ``fn`` returns a check value, the same for every run (compared across layers by the caller).
    ``before`` runs untimed before each call (fresh handles, cleared caches).
    """
    walls, client_cpu, server_cpu, checks, reqs = [], [], [], [], None
    for i in range(runs):
        if before:
            before()
        offset = server.log_offset() if server else 0
        s0 = server.cpu_seconds() if server else 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        checks.append(fn())
        walls.append(time.perf_counter() - t0)
        client_cpu.append(time.process_time() - c0)
        server_cpu.append((server.cpu_seconds() - s0) if server else 0.0)
        if server and i == 0:
            reqs = server.requests_since(offset)
    if len({repr(c) for c in checks}) != 1:
        raise AssertionError(f"runs disagree: {checks}")
    row = {"wall_s": statistics.median(walls), "client_cpu_s": statistics.median(client_cpu),
           "server_cpu_s": statistics.median(server_cpu), "walls": walls, "check": checks[0],
           "requests": summarize(reqs) if reqs is not None else "-"}
    if nbytes:
        row["mb_s"] = nbytes / 1e6 / row["wall_s"]
    return row


# --- data ------------------------------------------------------------------------------------

def build_object(path: Path, size: int) -> None:
    """``size`` bytes of JSON Lines, cut at a line end: the benchmark corpus, repeated if short."""
    if path.exists() and path.stat().st_size == size:
        return
    source = DEFAULT_DOCS
    if source.exists():
        lines_file = source
    else:  # the tests' shared text corpora as {"text": ...} lines
        lines_file = path.with_suffix(".seed.jsonl")
        with open(lines_file, "w", encoding="utf-8") as out:
            for txt in sorted((SHARED_CORPORA / "text").glob("*.txt")):
                for para in txt.read_text(encoding="utf-8", errors="replace").split("\n\n"):
                    if para.strip():
                        out.write(json.dumps({"text": para}) + "\n")
    log(f"building {size / 1e6:.0f} MB of JSON Lines from {lines_file}")
    written = 0
    with open(path, "wb") as out:
        while written < size:
            with open(lines_file, "rb") as f:
                for line in f:
                    if written + len(line) > size:
                        out.write(b" " * (size - written - 1) + b"\n")  # pad the last line to size
                        written = size
                        break
                    out.write(line)
                    written += len(line)


# Seconds of simulated processing per byte read (``--consume-mbs``): a sleep, which releases the
# GIL as tokpipe's Rust kernels do, so a layer that fetches in the background can overlap it.
CONSUME_S_PER_BYTE = 0.0


def consume(b) -> tuple[int, int]:
    if not isinstance(b, bytes):  # obstore.Bytes: a line reader needs bytes
        b = b.to_bytes()
    if CONSUME_S_PER_BYTE:
        time.sleep(len(b) * CONSUME_S_PER_BYTE)
    return len(b), b.count(b"\n")


def drain(f, chunk: int) -> tuple[int, int]:
    n = lines = 0
    while True:
        b = f.read(chunk)
        if not b:
            return n, lines
        dn, dl = consume(b)
        n += dn
        lines += dl


def drain_n(f, chunk: int, total: int) -> tuple[int, int]:
    n = lines = 0
    while n < total:
        b = f.read(min(chunk, total - n))
        if not b:
            break
        dn, dl = consume(b)
        n += dn
        lines += dl
    return n, lines


def drain_iter(chunks) -> tuple[int, int]:
    n = lines = 0
    for b in chunks:
        dn, dl = consume(b)
        n += dn
        lines += dl
    return n, lines


# --- the layers ------------------------------------------------------------------------------

class Layers:
    """One client of each layer, made the way tokpipe would make it."""

    def __init__(self, endpoint: str):
        import obstore
        import pyarrow.fs as pafs
        import s3fs
        from obstore.store import LocalStore, S3Store

        self.obstore = obstore
        self.pafs = pafs
        self.endpoint = endpoint
        self.pa = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", region="us-east-1")
        self.pa_local = pafs.LocalFileSystem()
        # One instance of each, reused as tokpipe would (an s3fs client costs ~0.2 s of CPU to make)
        self._s3fs = s3fs.S3FileSystem(skip_instance_cache=True, endpoint_url=endpoint)
        self.obs = S3Store(BUCKET, endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})
        self.obs_local = LocalStore
        import boto3
        self.boto = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")

        from obstore.fsspec import FsspecStore
        self._obs_fsspec = FsspecStore("s3", endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})

    def s3fs(self):
        """The s3fs instance with its listing cache emptied, so no run answers from an earlier one."""
        self._s3fs.invalidate_cache()
        return self._s3fs

    def obs_fsspec(self):
        self._obs_fsspec.invalidate_cache()
        return self._obs_fsspec


def read_file(opener, chunk: int):
    """``drain`` a file that ``opener()`` opens, closing it."""
    def run():
        f = opener()
        try:
            return drain(f, chunk)
        finally:
            f.close()  # obstore's ReadableFile has no context manager
    return run


def read_variants(L: Layers, key: str, local: Path, chunk: int):
    """(group, name, callable) for a whole-object sequential read."""
    obstore, pafs = L.obstore, L.pafs
    s3path = f"{BUCKET}/{key}"
    host = urlsplit(L.endpoint)

    def raw_http():
        conn = http.client.HTTPConnection(host.hostname, host.port)
        conn.request("GET", f"/{s3path}")
        resp = conn.getresponse()
        out = drain(resp, chunk)
        conn.close()
        return out

    def s3fs_open(block, cache, options=None):
        def run():
            with L.s3fs().open(s3path, "rb", block_size=block, cache_type=cache, cache_options=options) as f:
                return drain(f, chunk)
        return run

    import fsspec
    local_store = L.obs_local(str(local.parent))

    return [
        ("local", "open() builtin", read_file(lambda: open(local, "rb", buffering=0), chunk)),
        ("local", "pyarrow LocalFileSystem", read_file(lambda: L.pa_local.open_input_stream(str(local)), chunk)),
        ("local", "fsspec LocalFileSystem", read_file(lambda: fsspec.open(str(local), "rb").open(), chunk)),
        ("local", "obstore LocalStore open_reader",
         read_file(lambda: obstore.open_reader(local_store, local.name, buffer_size=chunk), chunk)),
        ("s3", "http.client, one GET, no SDK (server ceiling)", raw_http),
        ("s3", "pyarrow open_input_stream", read_file(lambda: L.pa.open_input_stream(s3path), chunk)),
        ("s3", "pyarrow open_input_stream(buffer_size=8 MiB)",
         read_file(lambda: L.pa.open_input_stream(s3path, buffer_size=8 * MiB), chunk)),
        ("s3", "pyarrow open_input_file (random access)", read_file(lambda: L.pa.open_input_file(s3path), chunk)),
        ("s3", "s3fs default (50 MiB, readahead)", s3fs_open(None, "readahead")),
        ("s3", "s3fs 5 MiB readahead", s3fs_open(5 * MiB, "readahead")),
        ("s3", "s3fs 8 MiB readahead", s3fs_open(8 * MiB, "readahead")),
        ("s3", "s3fs 16 MiB readahead", s3fs_open(16 * MiB, "readahead")),
        ("s3", "s3fs 32 MiB readahead", s3fs_open(32 * MiB, "readahead")),
        ("s3", "s3fs 64 MiB readahead", s3fs_open(64 * MiB, "readahead")),
        ("s3", "s3fs 8 MiB bytes", s3fs_open(8 * MiB, "bytes")),
        ("s3", "s3fs 8 MiB background", s3fs_open(8 * MiB, "background")),
        ("s3", "s3fs 16 MiB background", s3fs_open(16 * MiB, "background")),
        # the background cache keeps up to 32 blocks by default: 512 MiB per open file at 16 MiB
        ("s3", "s3fs 16 MiB background maxblocks=2", s3fs_open(16 * MiB, "background", {"maxblocks": 2})),
        ("s3", "s3fs cache none", s3fs_open(8 * MiB, "none")),
        ("s3", "obstore get().stream()",
         lambda: drain_iter(obstore.get(L.obs, key).stream(min_chunk_size=chunk))),
        ("s3", "obstore open_reader(buffer_size=chunk)",
         read_file(lambda: obstore.open_reader(L.obs, key, buffer_size=chunk), chunk)),
        ("s3", "obstore open_reader(buffer_size=8 MiB)",
         read_file(lambda: obstore.open_reader(L.obs, key, buffer_size=8 * MiB), chunk)),
    ]


def range_variants(L: Layers, key: str, local: Path, start: int, length: int, chunk: int):
    obstore = L.obstore
    s3path = f"{BUCKET}/{key}"

    def local_read():
        with open(local, "rb", buffering=0) as f:
            f.seek(start)
            return drain_n(f, chunk, length)

    def pa_file():
        with L.pa.open_input_file(s3path) as f:
            f.seek(start)
            return drain_n(f, chunk, length)

    def s3fs_seek(block, cache):
        def run():
            with L.s3fs().open(s3path, "rb", block_size=block, cache_type=cache) as f:
                f.seek(start)
                return drain_n(f, chunk, length)
        return run

    def obs_reader(buffer):
        def run():
            f = obstore.open_reader(L.obs, key, buffer_size=buffer)
            try:
                f.seek(start)
                return drain_n(f, chunk, length)
            finally:
                f.close()
        return run

    count = consume  # the one-call reads hand back the whole range at once

    return [
        ("local", "open() seek + read", local_read),
        ("s3", "pyarrow open_input_file seek + read", pa_file),
        ("s3", "pyarrow read_at(start, 64 MB), one call",
         lambda: count(L.pa.open_input_file(s3path).read_at(length, start))),
        ("s3", "s3fs default (50 MiB, readahead) seek + read", s3fs_seek(None, "readahead")),
        ("s3", "s3fs 8 MiB readahead seek + read", s3fs_seek(8 * MiB, "readahead")),
        ("s3", "s3fs 8 MiB background seek + read", s3fs_seek(8 * MiB, "background")),
        ("s3", "s3fs cat_file(start, end), one call",
         lambda: count(L.s3fs().cat_file(s3path, start=start, end=start + length))),
        ("s3", "obstore get(range).stream()",
         lambda: drain_iter(obstore.get(L.obs, key, options={"range": (start, start + length)})
                            .stream(min_chunk_size=chunk))),
        ("s3", "obstore get_range(), one call",
         lambda: count(obstore.get_range(L.obs, key, start=start, length=length))),
        ("s3", "obstore open_reader(8 MiB) seek + read", obs_reader(8 * MiB)),
    ]


# --- the measurements ------------------------------------------------------------------------

def table(title: str, rows: list[dict], unit: str = "MB/s") -> None:
    print(f"### {title}\n")
    s3 = [r for r in rows if r["group"] == "s3" and "mb_s" in r]
    best = max((r["mb_s"] for r in s3), default=None)
    print(f"| layer | {unit} | x fastest S3 | wall s | client CPU s | server CPU s | requests (first run) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ratio = f"{r['mb_s'] / best:.2f}" if best and r["group"] == "s3" and "mb_s" in r else "-"
        speed = f"{r['mb_s']:,.0f}" if "mb_s" in r else "-"
        name = r["name"] if r["group"] == "s3" else f"*local:* {r['name']}"
        print(f"| {name} | {speed} | {ratio} | {r['wall_s']:.2f} | {r['client_cpu_s']:.2f} | "
              f"{r['server_cpu_s']:.2f} | {r['requests']} |")
    print()


def run_group(variants, runs, server, nbytes, expect, results, title, pick=()):
    rows = []
    for group, name, fn in variants:
        if pick and group == "s3" and not any(p in name for p in pick):
            continue
        log(f"  {title}: {name}")
        try:
            row = measure(fn, runs, server if group == "s3" else None, nbytes)
        except Exception as e:  # one layer failing must not hide the others
            log(f"    FAILED: {type(e).__name__}: {str(e)[:200]}")
            rows.append({"group": group, "name": f"{name} (FAILED: {type(e).__name__})", "wall_s": float("nan"),
                         "client_cpu_s": float("nan"), "server_cpu_s": float("nan"), "requests": "-"})
            continue
        wrong = "" if row["check"] == expect else f" (WRONG: {row['check']} != {expect})"
        row.update(group=group, name=name + wrong)
        rows.append(row)
    results[title] = rows
    table(title, rows)


def probe_server(L: Layers, server: MotoServer, key: str, size: int) -> None:
    """What one 1 MiB ranged GET costs this server, on a 1 MiB object and on the big one."""
    L.boto.put_object(Bucket=BUCKET, Key="probe-1mib", Body=b"p" * MiB)
    print("### What one 1 MiB ranged GET costs this server (boto3, median of 7)\n")
    print("| object | ms per GET |\n|---|---:|")
    for name, obj in (("1 MiB", "probe-1mib"), (f"{size / 1e6:.0f} MB", key)):
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            L.boto.get_object(Bucket=BUCKET, Key=obj, Range=f"bytes=0-{MiB - 1}")["Body"].read()
            times.append(time.perf_counter() - t0)
        print(f"| {name} | {statistics.median(times) * 1000:.1f} |")
    print()


def bench_list(L: Layers, server: MotoServer, runs: int, n_keys: int, results: dict) -> None:
    dirs = 4
    expected = sorted(f"list/d{i % dirs}/part-{i}.txt" for i in range(n_keys))
    have = {o["Key"] for page in L.boto.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="list/")
            for o in page.get("Contents", [])}
    if have != set(expected):
        log(f"putting {n_keys:,} small keys")
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: L.boto.put_object(Bucket=BUCKET, Key=k, Body=b"x\n"), expected))
    one_dir = [k for k in expected if k.startswith("list/d1/")]
    obstore, pafs = L.obstore, L.pafs

    def check(names, want):
        names = [n[len(BUCKET) + 1:] if n.startswith(BUCKET + "/") else n for n in names]
        return {"count": len(names), "all once": sorted(names) == want, "sorted": names == sorted(names)}

    def pa_list(base, recursive):
        infos = L.pa.get_file_info(pafs.FileSelector(f"{BUCKET}/{base}", recursive=recursive))
        return [i.path for i in infos if i.type == pafs.FileType.File]

    def obs_list(prefix):
        return [m["path"] for batch in obstore.list(L.obs, prefix, chunk_size=1000) for m in batch]

    variants = {
        f"recursive, {n_keys:,} keys": (expected, [
            ("pyarrow get_file_info(FileSelector(recursive=True))", lambda: pa_list("list", True)),
            ("s3fs find()", lambda: L.s3fs().find(f"{BUCKET}/list")),
            ("obstore list()", lambda: obs_list("list")),
        ]),
        f"one level with delimiter, {len(one_dir):,} keys": (one_dir, [
            ("pyarrow get_file_info(FileSelector(recursive=False))", lambda: pa_list("list/d1", False)),
            ("s3fs ls()", lambda: L.s3fs().ls(f"{BUCKET}/list/d1")),
            ("obstore list_with_delimiter()",
             lambda: [m["path"] for m in obstore.list_with_delimiter(L.obs, "list/d1")["objects"]]),
        ]),
    }
    for title, (want, vs) in variants.items():
        rows = []
        print(f"### Listing: {title}\n")
        print("| layer | keys/s | x fastest | wall s | client CPU s | server CPU s | every key once | in sorted order | requests |")
        print("|---|---:|---:|---:|---:|---:|---|---|---|")
        for name, fn in vs:
            log(f"  list {title}: {name}")
            row = measure(lambda fn=fn, want=want: check(fn(), want), runs, server)
            row.update(name=name, keys_s=row["check"]["count"] / row["wall_s"])
            rows.append(row)
        best = max(r["keys_s"] for r in rows)
        for r in rows:
            c = r["check"]
            print(f"| {r['name']} | {r['keys_s']:,.0f} | {r['keys_s'] / best:.2f} | {r['wall_s']:.2f} | "
                  f"{r['client_cpu_s']:.2f} | {r['server_cpu_s']:.2f} | "
                  f"{'yes' if c['all once'] else 'NO'} ({c['count']:,}) | {'yes' if c['sorted'] else 'no'} | "
                  f"{r['requests']} |")
        print()
        results[f"list {title}"] = rows


def bench_write(L: Layers, server: MotoServer, runs: int, local: Path, write_bytes: int, results: dict) -> None:
    obstore = L.obstore
    block = MiB
    with open(local, "rb") as f:
        payload = f.read(write_bytes)
    src = local.with_name("upload-src.bin")
    src.write_bytes(payload)
    chunks = [payload[i:i + block] for i in range(0, len(payload), block)]

    def stream(open_writer):
        def run():
            with open_writer() as f:
                for c in chunks:
                    f.write(c)
            return None
        return run

    def parts_of(key):
        head = L.boto.head_object(Bucket=BUCKET, Key=key, PartNumber=1)
        parts = head.get("PartsCount")
        size = L.boto.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
        return size, parts, head["ContentLength"]

    variants = [
        ("pyarrow open_output_stream", "w-pa", lambda: stream(lambda: L.pa.open_output_stream(f"{BUCKET}/w-pa"))),
        ("s3fs open('wb'), default 50 MiB blocks", "w-s3fs",
         lambda: stream(lambda: L.s3fs().open(f"{BUCKET}/w-s3fs", "wb"))),
        ("s3fs open('wb', block_size=8 MiB)", "w-s3fs8",
         lambda: stream(lambda: L.s3fs().open(f"{BUCKET}/w-s3fs8", "wb", block_size=8 * MiB))),
        ("obstore open_writer (10 MiB buffer)", "w-obs", lambda: stream(lambda: obstore.open_writer(L.obs, "w-obs"))),
        ("upload a local file: pyarrow copy_files", "u-pa",
         lambda: lambda: L.pafs.copy_files(str(src), f"{BUCKET}/u-pa", source_filesystem=L.pa_local,
                                           destination_filesystem=L.pa)),
        ("upload a local file: s3fs put_file", "u-s3fs", lambda: lambda: L.s3fs().put_file(str(src), f"{BUCKET}/u-s3fs")),
        ("upload a local file: obstore put(Path)", "u-obs", lambda: lambda: obstore.put(L.obs, "u-obs", src)),
    ]
    rows = []
    for name, key, make in variants:
        log(f"  write: {name}")
        try:
            row = measure(make(), runs, server, len(payload))
            size, parts, first = parts_of(key)
            got = L.boto.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            ok = got == payload
            row["shape"] = (f"{parts} parts, first {first / MiB:.1f} MiB" if parts else "one PutObject")
            row["name"] = name if ok else f"{name} (WRONG BYTES, {size:,})"
        except Exception as e:
            log(f"    FAILED: {type(e).__name__}: {str(e)[:300]}")
            row = {"name": f"{name} (FAILED: {type(e).__name__})", "wall_s": float("nan"), "mb_s": float("nan"),
                   "client_cpu_s": float("nan"), "server_cpu_s": float("nan"), "requests": "-", "shape": "-"}
        row["group"] = "s3"
        rows.append(row)
    best = max(r["mb_s"] for r in rows if r["mb_s"] == r["mb_s"])
    print(f"### Writing {len(payload) / 1e6:.0f} MB (1 MiB write() calls, or one upload of a local file)\n")
    print("| layer | MB/s | x fastest | wall s | client CPU s | server CPU s | object as stored | requests (first run) |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['mb_s']:,.0f} | {r['mb_s'] / best:.2f} | {r['wall_s']:.2f} | {r['client_cpu_s']:.2f} | "
              f"{r['server_cpu_s']:.2f} | {r['shape']} | {r['requests']} |")
    print()
    results["write"] = rows
    src.unlink()

    # What a streaming writer leaves when the code inside its `with` block raises midway.
    print("### A writer whose `with` block raises after 24 MiB\n")
    print("| layer | object at the key afterwards | multipart uploads left open |")
    print("|---|---|---|")
    piece = payload[:MiB]
    failing = [
        ("pyarrow open_output_stream", "f-pa", lambda: L.pa.open_output_stream(f"{BUCKET}/f-pa")),
        ("s3fs open('wb', block_size=8 MiB)", "f-s3fs", lambda: L.s3fs().open(f"{BUCKET}/f-s3fs", "wb", block_size=8 * MiB)),
        ("obstore open_writer", "f-obs", lambda: obstore.open_writer(L.obs, "f-obs")),
    ]
    fail_rows = []
    for name, key, opener in failing:
        try:
            with opener() as f:
                for _ in range(24):
                    f.write(piece)
                raise RuntimeError("the producer failed")
        except RuntimeError:
            pass
        try:
            left = f"{L.boto.head_object(Bucket=BUCKET, Key=key)['ContentLength'] / MiB:.0f} MiB (partial, visible)"
        except Exception:
            left = "none"
        open_uploads = [u for u in L.boto.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) if u["Key"] == key]
        for u in open_uploads:
            L.boto.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=u["UploadId"])
        print(f"| {name} | {left} | {len(open_uploads)} |")
        fail_rows.append({"name": name, "left": left, "open_uploads": len(open_uploads)})
    print()
    results["write failure"] = fail_rows


def bench_parquet(L: Layers, server: MotoServer, runs: int, local: Path, mb: int, results: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    obstore = L.obstore
    path = local.with_name(f"docs-{mb}mb.parquet")
    if not path.exists():
        log(f"writing {path.name}")
        texts, ids, total = [], [], 0
        with open(local, "rb") as f:
            for n, line in enumerate(f):
                texts.append(line.decode("utf-8", "replace"))
                ids.append(n)
                total += len(line)
                if total >= mb * 1e6:
                    break
        pq.write_table(pa.table({"id": ids, "text": texts}), path, compression="zstd", row_group_size=2_000)
    key = path.name
    if not any(o["Key"] == key for o in L.boto.list_objects_v2(Bucket=BUCKET, Prefix=key).get("Contents", [])):
        L.boto.upload_file(str(path), BUCKET, key)
    s3path = f"{BUCKET}/{key}"
    size = path.stat().st_size
    meta = pq.ParquetFile(path).metadata
    print(f"Parquet file: {size / 1e6:.1f} MB (zstd), {meta.num_rows:,} rows, {meta.num_row_groups} row groups, "
          "columns id (int64) and text.\n")

    def shape(t):
        return (t.num_rows, t.num_columns)

    def obs_bytes(columns=None):
        return shape(pq.read_table(pa.BufferReader(obstore.get(L.obs, key).bytes()), columns=columns))

    for columns, label in ((None, "whole table"), (["id"], "one column (id)")):
        variants = [
            ("local", "pq.read_table(local path)", lambda c=columns: shape(pq.read_table(path, columns=c))),
            ("s3", "pyarrow.fs.S3FileSystem, native", lambda c=columns: shape(pq.read_table(s3path, filesystem=L.pa, columns=c))),
            ("s3", "s3fs as filesystem= (PyFileSystem(FSSpecHandler))",
             lambda c=columns: shape(pq.read_table(s3path, filesystem=L.s3fs(), columns=c))),
            ("s3", "s3fs file object, 8 MiB readahead",
             lambda c=columns: shape(pq.read_table(L.s3fs().open(s3path, "rb", block_size=8 * MiB), columns=c))),
            ("s3", "s3fs file object, cache none",
             lambda c=columns: shape(pq.read_table(L.s3fs().open(s3path, "rb", cache_type="none"), columns=c))),
            ("s3", "obstore get().bytes() + BufferReader", lambda c=columns: obs_bytes(c)),
            ("s3", "obstore.fsspec.FsspecStore as filesystem=",
             lambda c=columns: shape(pq.read_table(s3path, filesystem=L.obs_fsspec(), columns=c))),
        ]
        rows = []
        for group, name, fn in variants:
            log(f"  parquet {label}: {name}")
            try:
                row = measure(fn, runs, server if group == "s3" else None, size)
                row.update(group=group, name=name)
            except Exception as e:
                log(f"    FAILED: {type(e).__name__}: {str(e)[:300]}")
                row = {"group": group, "name": f"{name} (FAILED: {type(e).__name__})", "wall_s": float("nan"),
                       "client_cpu_s": float("nan"), "server_cpu_s": float("nan"), "requests": "-"}
            rows.append(row)
        results[f"parquet {label}"] = rows
        table(f"Parquet, {label} (MB/s of the file)", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=256, help="the large object, MB (default 256)")
    parser.add_argument("--range-mb", type=int, default=64, help="the byte range read mid-file, MB (default 64)")
    parser.add_argument("--write-mb", type=int, default=128, help="the object written, MB (default 128)")
    parser.add_argument("--parquet-mb", type=int, default=128, help="text put into the Parquet file, MB (default 128)")
    parser.add_argument("--keys", type=int, default=10_000, help="small keys to list (default 10,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported (default 3)")
    parser.add_argument("--chunks", default="1,8", help="read() sizes in MiB (default 1,8)")
    parser.add_argument("--only", default=",".join(MEASUREMENTS), help=f"any of {','.join(MEASUREMENTS)}")
    parser.add_argument("--variants", default="",
                        help="comma-separated substrings: run only the S3 read and range rows whose name has one")
    parser.add_argument("--consume-mbs", type=float, default=0.0,
                        help="after each read, sleep as if processing the bytes at this many MB/s (default: no)")
    parser.add_argument("--stock-moto", action="store_true",
                        help="keep moto's whole-object copy on every ranged GET (see the module docstring)")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="delay every request by this much in the server, as S3's first-byte latency (default 0)")
    parser.add_argument("--work-dir", type=Path, default=SCRATCH / "storage", help="local files (default SCRATCH/storage)")
    parser.add_argument("--json", type=Path, default=None, help="save the raw numbers")
    a = parser.parse_args()
    only = set(a.only.split(","))
    pick = tuple(v for v in a.variants.split(",") if v)
    global CONSUME_S_PER_BYTE
    CONSUME_S_PER_BYTE = 1 / (a.consume_mbs * 1e6) if a.consume_mbs else 0.0
    unknown = only - set(MEASUREMENTS)
    if unknown:
        sys.exit(f"unknown measurement(s) {sorted(unknown)}; choose from {','.join(MEASUREMENTS)}")

    # Credentials and endpoint the way a user would give them: the standard variables.
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_EC2_METADATA_DISABLED="true")
    os.environ.pop("AWS_PROFILE", None)
    a.work_dir.mkdir(parents=True, exist_ok=True)
    size = a.size_mb * 1_000_000
    local = a.work_dir / f"big-{a.size_mb}mb.jsonl"
    build_object(local, size)
    server = MotoServer(a.work_dir / "moto-server.log", cache_key_bytes=not a.stock_moto, latency_ms=a.latency_ms)
    os.environ["AWS_ENDPOINT_URL"] = server.endpoint
    results: dict = {}
    try:
        L = Layers(server.endpoint)
        L.boto.create_bucket(Bucket=BUCKET)
        key = local.name
        log(f"uploading {size / 1e6:.0f} MB to {server.endpoint}/{BUCKET}/{key}")
        L.boto.upload_file(str(local), BUCKET, key)
        with open(local, "rb") as f:
            expect_lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(8 * MiB), b""))

        print("# The filesystem layer for object storage\n")
        print_machine_facts(packages=PACKAGES)
        print(f"Server: moto {server.endpoint} in a child process; CompleteMultipartUpload root fixed; "
              f"ranged GET {'as shipped (copies the whole object)' if a.stock_moto else 'served from cached key bytes'}; "
              f"{f'{a.latency_ms:g} ms added to every request' if a.latency_ms else 'no added latency'}; "
              f"{f'reads processed at {a.consume_mbs:g} MB/s (a sleep)' if a.consume_mbs else 'reads not processed'}. "
              f"Median of {a.runs} runs. Object: {size / 1e6:.0f} MB of JSON Lines, {expect_lines:,} lines.\n")
        probe_server(L, server, key, size)

        if "read" in only:
            for chunk in [int(c) * MiB for c in a.chunks.split(",")]:
                run_group(read_variants(L, key, local, chunk), a.runs, server, size, (size, expect_lines), results,
                          f"Sequential read of {size / 1e6:.0f} MB in {chunk // MiB} MiB read() calls", pick)
        if "range" in only:
            start, length = size // 2 + 12_345, a.range_mb * 1_000_000
            with open(local, "rb") as f:
                f.seek(start)
                want = (length, f.read(length).count(b"\n"))
            run_group(range_variants(L, key, local, start, length, MiB), a.runs, server, length, want, results,
                      f"A {a.range_mb} MB range from byte {start:,}, in 1 MiB read() calls", pick)
        if "list" in only:
            bench_list(L, server, a.runs, a.keys, results)
        if "write" in only:
            bench_write(L, server, a.runs, local, a.write_mb * 1_000_000, results)
        if "parquet" in only:
            bench_parquet(L, server, a.runs, local, a.parquet_mb, results)
        print(f"Load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        server.stop()
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
