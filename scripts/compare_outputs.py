"""Compare `tokpipe clean` and `tokpipe tokenize` outputs of two checkouts, byte for byte.

A refactor must not change what tokpipe writes. This script runs the same jobs with two copies
of the package (each a folder holding `tokpipe/` with its compiled `_core`, put first on
PYTHONPATH) and compares every file the jobs write, after dropping the fields that are
expected to differ between two runs (wall-clock times and the tokpipe version).

    # the code before the change, in a worktree with its own built extension:
    git worktree add /tmp/before HEAD~1 && cp python/tokpipe/_core*.so /tmp/before/python/tokpipe/
    python scripts/compare_outputs.py --before /tmp/before/python --after python \\
        --corpus ../shared/bench/OUT/docs.jsonl --work /tmp/compare

Exit code 0 when every output is identical, 1 otherwise (each difference is listed).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"

# Fields whose values are times or versions: they differ between any two runs.
VOLATILE = {"elapsed_s", "seconds", "started", "finished", "created", "version", "tokpipe_version",
            "wall_s", "duration_s", "time", "started_at", "finished_at"}

CLEAN_CONFIG = """\
stages:
  - type: normalize
    form: NFKC
    clean_whitespace: true
  - type: length_filter
    min: 20
  - type: gopher_quality
  - type: gopher_repetition
  - type: c4_quality
  - type: fineweb_quality
  - type: text_stats
    max_hash_word_ratio: 0.1
  - type: pii
  - type: exact_dedup
  - type: paragraph_dedup
  - type: minhash_dedup
    threshold: 0.8
"""


def jobs(corpus: Path, work: Path) -> list[tuple[str, list[str]]]:
    """The commands to compare: (name, CLI arguments), OUTPUT written under work/name."""
    vocab = SHARED / "vocab"
    text = SHARED / "text"
    config = work / "pipeline.yaml"
    return [
        ("clean_corpus", ["clean", str(corpus), "-c", str(config), "-w", "2", "--task-size", "4MB"]),
        ("clean_web", ["clean", str(SHARED / "web"), "-c", str(config), "-w", "2"]),
        ("tok_cl100k_both", ["tokenize", str(corpus), "-t", str(vocab / "cl100k_base.tiktoken.gz"),
                             "--format", "both", "--val-fraction", "0.05", "-w", "2",
                             "--task-size", "4MB", "--shard-size", "8MB"]),
        ("tok_gpt2_packed", ["tokenize", str(text), "--split", "lines", "-t",
                             str(vocab / "gpt2_encoder.json"), "--seq-len", "512", "--pack", "-w", "2"]),
        ("tok_bert_noshuffle", ["tokenize", str(text), "--split", "paragraphs", "-t",
                                str(vocab / "bert_base_uncased_vocab.txt"), "--no-shuffle", "-w", "1"]),
        ("tok_neo_megatron", ["tokenize", str(corpus), "-t", str(vocab / "gpt-neo-tokenizer.json"),
                              "--format", "megatron", "--shuffle-buffer", "1MB", "-w", "2",
                              "--task-size", "4MB"]),
        ("tok_of_clean", ["tokenize", str(work / "{side}" / "clean_corpus"), "-t",
                          str(vocab / "o200k_base.tiktoken.gz"), "-w", "2"]),
    ]


def run_side(side: str, pythonpath: Path, corpus: Path, work: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(pythonpath.resolve()))
    for name, args in jobs(corpus, work):
        out = work / side / name
        shutil.rmtree(out, ignore_errors=True)
        args = [a.replace("{side}", side) for a in args]
        cmd = [sys.executable, "-c", "from tokpipe.cli import main; main()", *args, "-o", str(out), "-q"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{side}/{name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        print(f"{side}/{name}: done", flush=True)


def _scrub(value: object) -> object:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def same(a: Path, b: Path, work: Path) -> bool:
    if filecmp.cmp(a, b, shallow=False):
        return True
    if a.suffix == ".json":
        # A job reading another job's output records that input's path, which names its side.
        text_a = a.read_text().replace(str(work / "before"), "SIDE")
        text_b = b.read_text().replace(str(work / "after"), "SIDE")
        return _scrub(json.loads(text_a)) == _scrub(json.loads(text_b))
    return False


def compare(work: Path) -> list[str]:
    problems = []
    for name, _ in jobs(Path("."), work):
        before, after = work / "before" / name, work / "after" / name
        files_b = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
        files_a = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
        # The run's private state (locks, markers) may be laid out differently; outputs may not.
        visible = lambda files: {f for f in files if not str(f).startswith(".tokpipe")}
        files_b, files_a = visible(files_b), visible(files_a)
        for f in sorted(files_b ^ files_a):
            problems.append(f"{name}/{f}: only {'before' if f in files_b else 'after'}")
        for f in sorted(files_b & files_a):
            if not same(before / f, after / f, work):
                problems.append(f"{name}/{f}: differs")
        print(f"{name}: {len(files_b & files_a)} files compared", flush=True)
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="folder holding the old tokpipe package")
    parser.add_argument("--after", type=Path, help="folder holding the new tokpipe package")
    parser.add_argument("--corpus", type=Path, required=True, help="a JSONL corpus (tens of MB)")
    parser.add_argument("--work", type=Path, required=True, help="scratch folder for the outputs")
    parser.add_argument("--only", choices=["before", "after", "none"],
                        help="run one side (the other kept), or none (compare what is there)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "pipeline.yaml").write_text(CLEAN_CONFIG)
    for side in ("before", "after"):
        if args.only in (None, side):
            run_side(side, getattr(args, side), args.corpus, args.work)
    problems = compare(args.work)
    for p in problems:
        print(p)
    print("identical" if not problems else f"{len(problems)} differences")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
