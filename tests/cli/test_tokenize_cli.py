"""``tokpipe tokenize`` and ``tokpipe stats`` on its output, through the console entry point."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import VOCAB
from tests.parity.peers import tiktoken_encoding
from tests.pipeline.tokenize.helpers import corpus_records, expected_docs, expected_order, read_megatron

GPT2 = str(VOCAB / "gpt2_encoder.json")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def write_corpus(folder: Path) -> list[dict[str, str]]:
    folder.mkdir()
    records = corpus_records()
    with open(folder / "docs.jsonl", "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return records


def test_tokenize_both_formats_packed_with_validation(tmp_path: Path) -> None:
    records = write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    result = run("tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "--format", "both",
                 "--seq-len", "128", "--pack", "--shuffle-seed", "9", "--val-fraction", "0.05",
                 "--workers", "2", "--task-size", "16KB")
    assert result.returncode == 0, result.stderr
    assert "tokens in" in result.stderr and "train" in result.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    docs = expected_docs(records)
    order = [docs[p] for p in expected_order(len(docs), 9)]
    assert manifest["totals"]["tokens"] == sum(len(ids) for _, ids in docs)
    for split in ("train", "val"):
        ids_here = set(pq.read_table(out / "documents" / f"{split}.parquet").column("id").to_pylist())
        want = [ids for i, ids in order if i in ids_here]
        _, megatron = read_megatron(out / "megatron" / split)
        assert [m.tolist() for m in megatron] == want
        stream = [t for ids in want for t in ids]
        rows = pq.read_table(sorted((out / split).glob("part-*.parquet"))).column("input_ids").to_pylist() \
            if list((out / split).glob("part-*.parquet")) else []
        tail = manifest["splits"][split]["packed"]["dropped_tail_tokens"]
        assert [t for r in rows for t in r] == stream[: len(stream) - tail]
        assert tail == len(stream) % 129


def test_stats_shows_tokens_percentiles_and_saves_an_html_histogram(tmp_path: Path) -> None:
    records = write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    assert run("tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "-q", "--workers", "1").returncode == 0
    plot = tmp_path / "lengths.html"
    result = run("stats", str(out), "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    enc = tiktoken_encoding("gpt2")
    lengths = np.array([len(enc.encode_ordinary(r["text"])) + 1 for r in records if r["text"]])
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    assert f"tokens {int(lengths.sum()):,}, documents {len(lengths):,}" in result.stdout
    assert f"mean {lengths.mean():,.1f}, p50 {p50:,.0f}, p90 {p90:,.0f}, p99 {p99:,.0f}" in result.stdout
    # The text histogram's counts add up to the documents.
    counts = [int(line.split()[3].replace(",", "")) for line in result.stdout.splitlines()
              if line.strip() and line.split()[1:2] == ["-"]]
    assert sum(counts) == len(lengths)
    page = plot.read_text(encoding="utf-8")
    # Over the text histogram's bins: a bar per non-empty bin of documents, and of the tokens
    # those documents hold (the token-weighted view), with the percentiles marked.
    assert page.startswith("<!doctype html>") and page.count("<svg") == 2
    assert page.count("<rect") == 2 * sum(1 for c in counts if c)
    def bars(series: str) -> list[float]:
        titles = re.findall(rf"<title>{series}: ([^<]*)</title>", page)
        return [float(t.rsplit(": ", 1)[1].replace(",", "")) for t in titles]

    documents, tokens = bars("documents"), bars("tokens")
    assert documents == [c for c in counts if c] and sum(tokens) == int(lengths.sum())
    assert all(f">p{q} " in page for q in (50, 90, 99))


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    write_corpus(tmp_path / "in")
    for args, message in ((["--pack"], "--seq-len"), (["--truncate"], "--seq-len"),
                          (["--eos-token", "<nope>"], "no token '<nope>'")):
        result = run("tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(tmp_path / "o"), *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr
    assert run("tokenize", str(tmp_path / "in"), "-t", GPT2).returncode == 2
    assert run("tokenize", str(tmp_path / "missing"), "-t", GPT2, "-o", str(tmp_path / "o2")).returncode == 2


def test_no_shuffle_keeps_input_order_and_dtype_follows_the_vocabulary(tmp_path: Path) -> None:
    records = write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    result = run("tokenize", str(tmp_path / "in"), "-t", str(VOCAB / "cl100k_base.tiktoken.gz"), "-o", str(out),
                 "--no-shuffle", "--no-append-eos", "-q", "--format", "megatron")
    assert result.returncode == 0, result.stderr
    enc = tiktoken_encoding("cl100k")
    want = [enc.encode_ordinary(r["text"]) for r in records if r["text"]]
    dtype, megatron = read_megatron(out / "megatron" / "train")
    assert dtype == np.dtype("<i4")  # 100,277 ids: not under Megatron's 65,500
    assert [m.tolist() for m in megatron] == want
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["dtype"] == "uint32"


def test_stats_verify_finds_a_changed_shard(tmp_path: Path) -> None:
    write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    assert run("tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "-q", "--format", "both",
               "--val-fraction", "0.1").returncode == 0
    ok = run("stats", str(out), "--verify")
    assert ok.returncode == 0 and "verified" in ok.stdout, ok.stderr
    shard = next((out / "train").glob("part-*.parquet"))
    shard.write_bytes(shard.read_bytes()[:-1] + b"x")
    with open(out / "megatron" / "val.bin", "ab") as f:
        f.write(b"\0\0")
    bad = run("stats", str(out), "--verify")
    assert bad.returncode == 1
    assert f"train/{shard.name}: sha256" in bad.stderr
    assert "megatron/val.bin" in bad.stderr


def test_a_rerun_with_other_workers_and_threads_resumes_the_same_run(tmp_path: Path) -> None:
    write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    base = ["tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "-q", "--task-size", "16KB"]
    assert run(*base, "--workers", "1", "--keep-staging").returncode == 0  # the staging, to cut as a kill would
    first = (out / "documents" / "train.parquet").read_bytes()
    (out / "manifest.json").unlink()
    for marker in sorted((out / ".tokpipe" / "seg0").glob("*.json"))[::2]:
        marker.unlink()
    again = run(*base, "--workers", "2", "--threads", "1")
    assert again.returncode == 0, again.stderr
    assert (out / "documents" / "train.parquet").read_bytes() == first


@pytest.fixture(scope="module")
def packed_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tokenize output for the corruption cases below: packed Parquet and the Megatron
    pair, one worker and no validation split, so the train .bin is the staging file linked
    (its digest taken by reading it back, not while writing it). The staging is kept, as an
    older tokpipe kept it, for the rerun of the case without digests."""
    root = tmp_path_factory.mktemp("verify")
    write_corpus(root / "in")
    out = root / "out"
    result = run("tokenize", str(root / "in"), "-t", GPT2, "-o", str(out), "-q", "--format", "both", "--pack",
                 "--seq-len", "64", "--workers", "1", "--keep-staging")
    assert result.returncode == 0, result.stderr
    assert (out / "megatron" / "train.bin").stat().st_nlink == 2  # the staged ids file and the .bin
    return out


def zero_4kb(path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    assert len(data) >= at + 4096 and any(data[at:at + 4096]), "the .bin should hold ids there"
    data[at:at + 4096] = bytes(4096)
    path.write_bytes(data)


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(data)


@pytest.mark.parametrize(("target", "damage"), [
    ("megatron/train.bin", zero_4kb),
    ("megatron/train.idx", flip_a_byte),
    ("documents/train.parquet", flip_a_byte),
    ("train/part-00000-00000.parquet", flip_a_byte),
], ids=["bin-4kb-zeroed", "idx-byte", "documents-byte", "packed-shard-byte"])
def test_stats_verify_finds_changed_bytes_of_every_output_file(packed_output: Path, tmp_path: Path, target: str,
                                                              damage: Callable[[Path], None]) -> None:
    """The same size, other bytes (what a crash or a bad disk can leave): each file's sha256
    in the manifest catches it, and the problem names that file alone."""
    out = tmp_path / "out"
    shutil.copytree(packed_output, out)  # a copy: the .bin is no longer linked to the staging
    ok = run("stats", str(out), "--verify")
    assert ok.returncode == 0 and "verified:" in ok.stdout, ok.stderr
    size = (out / target).stat().st_size
    damage(out / target)
    assert (out / target).stat().st_size == size
    bad = run("stats", str(out), "--verify")
    assert bad.returncode == 1, bad.stdout
    assert "verified:" not in bad.stdout
    problems = [line for line in bad.stderr.splitlines() if line.startswith("tokpipe: problem: ")]
    assert problems and all(f"problem: {target}: " in line for line in problems), bad.stderr
    assert any(f"{target}: sha256 " in line for line in problems), bad.stderr


def test_stats_verify_says_not_verified_for_a_manifest_without_digests(packed_output: Path, tmp_path: Path) -> None:
    """A manifest from a tokpipe that recorded only the shards' digests: verify does not say
    "verified" over files it cannot check, it names each one; a rerun of the same command
    records the digests."""
    out = tmp_path / "out"
    shutil.copytree(packed_output, out)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest.pop("files", None)
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    old = run("stats", str(out), "--verify")
    assert old.returncode == 1 and "verified:" not in old.stdout
    unchecked = sorted(line.split(": ")[2] for line in old.stderr.splitlines() if "not verified" in line)
    assert unchecked == ["documents/train.parquet", "documents/val.parquet", "errors.jsonl", "megatron/train.bin",
                         "megatron/train.idx", "megatron/val.bin", "megatron/val.idx"], old.stderr
    assert "part-00000-00000.parquet" not in old.stderr  # its digest was recorded, and matches
    again = run("tokenize", str(packed_output.parent / "in"), "-t", GPT2, "-o", str(out), "-q", "--format", "both",
                "--pack", "--seq-len", "64", "--workers", "1")
    assert again.returncode == 0, again.stderr
    ok = run("stats", str(out), "--verify")
    assert ok.returncode == 0 and "verified:" in ok.stdout, ok.stderr


def test_stats_verify_finds_a_file_the_manifest_does_not_list(packed_output: Path, tmp_path: Path) -> None:
    """A stray shard in a split's folder would be read by a loader that globs part-*.parquet."""
    out = tmp_path / "out"
    shutil.copytree(packed_output, out)
    shutil.copy(out / "train" / "part-00000-00000.parquet", out / "train" / "part-00000-00099.parquet")
    bad = run("stats", str(out), "--verify")
    assert bad.returncode == 1
    assert "train/part-00000-00099.parquet: on disk but not listed in the manifest" in bad.stderr


def test_a_run_that_reads_no_document_exits_1_and_another_run_in_its_folder_exits_2(tmp_path: Path) -> None:
    """A typo in --text-field used to exit 0 (issue 22); the corrected command then replaces
    the failed output without --overwrite. Another run into a folder that holds one is a
    usage error (exit 2), as --help says."""
    write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    typo = run("tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "--text-field", "txt", "-q",
               "--workers", "1")
    assert typo.returncode == 1
    lines = typo.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tokpipe: error: {out}: no document was read")
    assert lines[0].endswith("did you mean 'text'? (--text-field, or text_field= in Python)")
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["totals"]["documents"] == 0
    fixed = run("tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "-q", "--workers", "1")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["totals"]["documents"] > 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "o.jsonl").write_text('{"text": "another corpus"}\n', encoding="utf-8")
    other = run("tokenize", str(tmp_path / "other"), "-t", GPT2, "-o", str(out), "-q", "--workers", "1")
    assert other.returncode == 2
    assert "different config" in other.stderr and len(other.stderr.strip().splitlines()) == 1


def test_keep_staging_then_a_rewrite_with_other_options(tmp_path: Path) -> None:
    """--keep-staging keeps the tokenized staging: a rerun with other write options rewrites
    the output from it, and (without the flag) removes it."""
    write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    base = ["tokenize", str(tmp_path / "in"), "-t", GPT2, "-o", str(out), "-q", "--workers", "1"]
    assert run(*base, "--keep-staging").returncode == 0
    assert (out / ".tokpipe" / "run.json").is_file()
    packed = run(*base, "--seq-len", "32", "--pack", "--format", "both")
    assert packed.returncode == 0, packed.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "documents", "errors.jsonl", "manifest.json",
                                                     "megatron", "train", "val"]
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["seq_len"] == 32
    assert run("stats", str(out), "--verify").returncode == 0
    other = run(*base, "--seq-len", "64", "--pack")  # the staging is gone now: refused, not redone silently
    assert other.returncode != 0 and "--keep-staging" in other.stderr, other.stderr
