#!/usr/bin/env python3
"""Where a command's CPU time goes, by kind of work: ``perf record`` (user and kernel, every
thread and child process) over the command, samples bucketed by symbol.

    python3 benches/python/perf_breakdown.py -- python3 -c "from tokpipe.cli import main; main()" \\
        tokenize BENCH_CORPUS/docs.jsonl -t ../shared/corpora/vocab/cl100k_base.tiktoken.gz -o OUT --format both \\
        --pack --seq-len 2048 -q

Buckets (first match wins, by symbol or library): token encoding (tokpipe's BPE, its
pre-tokenizer and the byte comparisons of its vocabulary lookups), JSON parsing (the JSONL fast
path), the shuffle's reads and gathers, tokpipe's writer of packed rows, zstd, the rest of
Parquet, kernel time copying written data into the page cache, kernel time reading files, page
faults (and zeroing fresh pages), memcpy/memset, the Python interpreter, numpy, the rest. CPU-s = share of samples x the command's CPU time (getrusage).
Needs ``perf`` with access to kernel symbols (run as root, or perf_event_paranoid <= 1).
"""
from __future__ import annotations

import re
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

BUCKETS = [
    ("token encoding", r"tokpipe_core::models|tokpipe_core::pre_tokenizers|tokpipe_core::tokenizer|"
                       r"tokpipe_core::text::encode|__memcmp"),
    ("JSON parsing (Rust)", r"serde_json|tokpipe_core::jsonl|core::str::converts::from_utf8|memchr::"),
    ("shuffle gathers (Rust)", r"tokpipe_core::tokens"),
    ("Parquet packed rows (Rust)", r"tokpipe_core::packed_parquet"),
    ("zstd", r"ZSTD|HUF_|FSE_|HIST_"),
    ("Parquet encoding", r"libparquet"),
    ("Arrow (other)", r"libarrow"),
    ("kernel: writing files (page cache)", r"copy_folio_from_iter|ext4|generic_perform_write|block_commit|"
                                           r"block_write|folio_alloc_buffers|balance_dirty|create_empty_buffers|"
                                           r"alloc_buffer_head|mark_buffer_dirty|block_invalidate"),
    ("kernel: reading files", r"_copy_to_iter|filemap_read|filemap_get"),
    ("kernel: page faults, zeroing", r"clear_page|exc_page_fault|handle_mm_fault|do_huge|folio_zero|__pte|"
                                     r"filemap_map|unmap_page|do_anonymous|do_fault|next_uptodate|set_pte|zap_|"
                                     r"free_pages|release_pages|free_unref|memcg"),
    ("memcpy/memset", r"__memmove|__memset|__memcpy"),
    ("Python interpreter", r"libpython|_PyEval|gc_collect"),
    ("numpy", r"_multiarray|numpy"),
]


def main() -> None:
    if "--" not in sys.argv:
        raise SystemExit(__doc__)
    command = sys.argv[sys.argv.index("--") + 1:]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["perf", "record", "-q", "-F", "999", "-o", str(data), "--", *command], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "dso,symbol",
                                 "--stdio"], capture_output=True, text=True, check=True).stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shares: Counter[str] = Counter()
    for line in report.splitlines():
        match = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
        if not match:
            continue
        share, library, kind, symbol = float(match.group(1)), match.group(2), match.group(3), match.group(4)
        for name, pattern in BUCKETS:
            if re.search(pattern, symbol) or re.search(pattern, library):
                shares[name] += share
                break
        else:
            shares["other (kernel)" if kind == "k" else "other"] += share
    print(f"CPU time of the command (user + system, perf's own overhead included): {cpu:.2f} s\n")
    print("| work | share | CPU-s |")
    print("|---|---:|---:|")
    for name, share in shares.most_common():
        print(f"| {name} | {share:.1f}% | {share / 100 * cpu:.2f} |")


if __name__ == "__main__":
    main()
