#!/usr/bin/env python3
"""Peak memory of ``tokpipe clean`` and ``tokpipe tokenize`` on inputs built to strain it:
one 200 MB JSON line, a gzip bomb and a zstd bomb (a few MB holding one 3 GiB record, which
must be set aside as ``document_too_large``), and 2 GiB of 1 MiB documents.

Each command runs with one worker (the work runs in the command's own process) under
``/usr/bin/time``, whose maximum resident set size is the figure. Inputs are generated into
``--work`` (about 2.3 GiB of disk) and reused when present.

    python3 benches/python/bench_memory.py --work WORK
    # an older checkout, side by side: its python/ folder (with the extension built in it)
    python3 benches/python/bench_memory.py --work WORK --pythonpath BEFORE/python
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import VOCAB_DIR, print_machine_facts  # noqa: E402

MIB = 1 << 20
WORDS = ("the quick brown fox jumps over a lazy dog while seven bold wizards quietly pack "
         "boxes of liquor jugs and mix them ").split()


def _text(size: int, seed: int) -> str:
    """``size`` bytes of word-like text, different for each seed (no two documents equal)."""
    head = f"document {seed} "
    words = []
    n = len(head)
    i = seed
    while n < size:
        word = WORDS[(i * 7 + i // 13) % len(WORDS)]
        words.append(word)
        n += len(word) + 1
        i += 1
    return (head + " ".join(words))[:size]


def build(work: Path) -> dict[str, Path]:
    work.mkdir(parents=True, exist_ok=True)
    inputs = {
        "200 MB line": work / "line200.jsonl",
        "gzip bomb (3 GiB record)": work / "bomb.jsonl.gz",
        "zstd bomb (3 GiB record)": work / "bomb.jsonl.zst",
        "2 GiB of 1 MiB documents": work / "docs_1mib.jsonl",
    }
    if not inputs["200 MB line"].exists():
        with open(inputs["200 MB line"], "w", encoding="utf-8") as f:
            f.write(json.dumps({"id": "small-1", "text": _text(2000, 1)}) + "\n")
            f.write(json.dumps({"id": "huge", "text": _text(200 * MIB, 2)}) + "\n")
            f.write(json.dumps({"id": "small-2", "text": _text(2000, 3)}) + "\n")
    record_head, record_tail = b'{"id": "bomb", "text": "', b'"}\n'
    chunk = b"a" * (64 * MIB)
    if not inputs["gzip bomb (3 GiB record)"].exists():
        with gzip.open(inputs["gzip bomb (3 GiB record)"], "wb", compresslevel=9) as f:
            f.write(b'{"id": "before", "text": "a document before the bomb"}\n' + record_head)
            for _ in range(48):
                f.write(chunk)
            f.write(record_tail + b'{"id": "after", "text": "a document after the bomb"}\n')
    if not inputs["zstd bomb (3 GiB record)"].exists():
        import zstandard

        with zstandard.open(inputs["zstd bomb (3 GiB record)"], "wb", cctx=zstandard.ZstdCompressor(level=19)) as f:
            f.write(b'{"id": "before", "text": "a document before the bomb"}\n' + record_head)
            for _ in range(48):
                f.write(chunk)
            f.write(record_tail + b'{"id": "after", "text": "a document after the bomb"}\n')
    if not inputs["2 GiB of 1 MiB documents"].exists():
        with open(inputs["2 GiB of 1 MiB documents"], "w", encoding="utf-8") as f:
            base = _text(MIB - 64, 0)
            for n in range(2048):
                # Distinct documents (no duplicates for exact_dedup to drop) at no cost to build.
                f.write(json.dumps({"id": f"d{n}", "text": f"{n:08d} " + base[9:]}) + "\n")
    return inputs


def peak_rss(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(peak RSS in MiB, wall seconds, exit code) of ``command``."""
    result = subprocess.run(["/usr/bin/time", "-f", "%M %e", *command], capture_output=True, text=True, env=env)
    last = result.stderr.strip().splitlines()[-1].split()
    return int(last[0]) / 1024, float(last[1]), result.returncode


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="Folder for the generated inputs and the outputs.")
    p.add_argument("--pythonpath", default=None, help="Run the tokpipe found here (an older checkout's python/).")
    p.add_argument("--vocab", default=str(VOCAB_DIR / "cl100k_base.tiktoken.gz"))
    p.add_argument("--only", default=None, help="Run only the inputs whose label contains this text.")
    args = p.parse_args()
    print_machine_facts()
    inputs = build(args.work)
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    tokpipe = [sys.executable, "-c", "from tokpipe.cli import main; main()"]
    print(f"\n| input | command | peak RSS (MiB) | wall (s) | exit |\n| --- | --- | ---: | ---: | ---: |")
    for label, path in inputs.items():
        if args.only and args.only not in label:
            continue
        for command in ("clean", "tokenize"):
            out = args.work / f"out-{command}"
            shutil.rmtree(out, ignore_errors=True)
            extra = ["-t", args.vocab, "--format", "both"] if command == "tokenize" else []
            rss, wall, code = peak_rss([*tokpipe, command, str(path), "-o", str(out), "-w", "1", "-q", *extra], env)
            print(f"| {label} | {command} | {rss:,.0f} | {wall:.1f} | {code} |", flush=True)
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
