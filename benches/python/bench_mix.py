#!/usr/bin/env python3
"""``tokpipe mix`` throughput: tokens written per second (wall and CPU), and peak memory.

Sources: three ``tokpipe tokenize`` outputs (cl100k, ``--format both``, 10% val) of the
shared corpora's English (tinyshakespeare, botchan), Japanese (wagahaiwa_nekodearu) and
Chinese (zh_notes) text, cut in 20-line documents and repeated with distinct ids to
``--mb`` MB of JSON Lines each. Tokenizing them is not timed.

Timed, each as the whole command in a subprocess (Python start included), best of
``--runs``:

  mix 1 epoch      ``tokpipe mix en=2 ja=1 zh=1`` with the defaults: the most tokens one
                   pass allows (no upsampling); Parquet and Megatron written.
  spilled          the same with ``--shuffle-buffer 8MB``: the output scattered to key-range
                   files in the staging and written range by range.
  upsampled        ``--tokens`` 3x the one-epoch budget, ``--max-epochs 8``: sources repeated.
  read only        not mix: ``pyarrow.parquet.read_table`` of every source shard's
                   ``input_ids`` (in process), the floor of reading the inputs.

Tokens/s counts the output's tokens (train and val). Peak RSS is the largest resident size
of the child (``ru_maxrss``).

    python3 benches/python/bench_mix.py --mb 40 --runs 3
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import print_machine_facts  # noqa: E402

CORPORA = REPO.parent / "shared" / "corpora"
CL100K = str(CORPORA / "vocab" / "cl100k_base.tiktoken.gz")


def tokpipe(*args: str) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                            capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode:
        sys.exit(f"tokpipe {' '.join(args)} failed:\n{result.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, after.ru_maxrss // 1024


def write_source(path: Path, texts: list[str], mb: float) -> None:
    lines = [line for text in texts for line in text.splitlines()]
    docs = ["\n".join(lines[i:i + 20]) for i in range(0, len(lines), 20)]
    written, n = 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < mb * 1e6:
            line = json.dumps({"id": f"d{n}", "text": docs[n % len(docs)]}, ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))
            n += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=40.0, help="JSON Lines per source")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print_machine_facts()
    text = CORPORA / "text"
    corpora = {"en": [(text / "tinyshakespeare.txt").read_text(encoding="utf-8"),
                      (text / "botchan.txt").read_text(encoding="utf-8")],
               "ja": [(text / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8")],
               "zh": [p.read_text(encoding="utf-8") for p in sorted((text / "zh_notes").iterdir())]}
    with tempfile.TemporaryDirectory(prefix="bench-mix-") as tmp:
        root = Path(tmp)
        for name, texts in corpora.items():
            write_source(root / f"{name}.jsonl", texts, args.mb)
            tokpipe("tokenize", str(root / f"{name}.jsonl"), "-t", CL100K, "-o", str(root / name), "--format", "both",
                    "--val-fraction", "0.1", "-q")
        sizes = {name: json.loads((root / name / "manifest.json").read_text())["totals"]["tokens"] for name in corpora}
        print("source tokens (train + val): " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
        sources = [f"{root / 'en'}=2", f"{root / 'ja'}=1", f"{root / 'zh'}=1"]
        one_epoch = None
        rows = []
        cases = [("mix 1 epoch", []), ("spilled (--shuffle-buffer 8MB)", ["--shuffle-buffer", "8MB"]),
                 ("upsampled (3x, --max-epochs 8)", None)]
        for label, extra in cases:
            if extra is None:
                extra = ["--tokens", str(3 * one_epoch), "--max-epochs", "8"]
            best = None
            for _ in range(args.runs):
                out = root / "out"
                wall, cpu, rss = tokpipe("mix", *sources, "-o", str(out), "-q", "--overwrite", *extra)
                manifest = json.loads((out / "manifest.json").read_text())
                tokens = manifest["totals"]["tokens"]
                if one_epoch is None:
                    one_epoch = manifest["splits"]["train"]["tokens"]
                best = (wall, cpu, rss, tokens) if best is None or wall < best[0] else best
            wall, cpu, rss, tokens = best
            rows.append((label, tokens, wall, cpu, rss))
        import pyarrow.parquet as pq

        best_read = None
        for _ in range(args.runs):
            started, cpu0 = time.perf_counter(), time.process_time()
            tokens = 0
            for name in corpora:
                for split in ("train", "val"):
                    for shard in sorted((root / name / split).glob("part-*.parquet")):
                        tokens += len(pq.read_table(shard, columns=["input_ids"]).column("input_ids").combine_chunks()
                                      .flatten())
            took = (time.perf_counter() - started, time.process_time() - cpu0)
            best_read = took if best_read is None or took[0] < best_read[0] else best_read
        rows.append(("read only (pyarrow, every source shard)", tokens, best_read[0], best_read[1], 0))
    print()
    print("| run | tokens | seconds | CPU-s | M tokens/s | M tokens/CPU-s | peak RSS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, tokens, wall, cpu, rss in rows:
        print(f"| {label} | {tokens:,} | {wall:.2f} | {cpu:.2f} | {tokens / wall / 1e6:.1f} | "
              f"{tokens / cpu / 1e6:.1f} | {f'{rss} MiB' if rss else ''} |")


if __name__ == "__main__":
    main()
