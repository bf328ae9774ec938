"""``tokpipe stats URL`` and ``tokpipe stats URL --verify`` on output folders in a bucket of a
real S3 protocol server on 127.0.0.1 (``tests/s3_server.py``): a local ``clean`` and
``tokenize`` output, uploaded as it is, must give the local summary and verify; a changed
object must be named; a missing folder is one line naming the URL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import CORPORA, VOCAB
from tests.s3_server import bucket_filesystem


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def outputs(tmp_path: Path) -> tuple[Path, Path]:
    """A finished clean output and a finished tokenize output of a small corpus."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    lines = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").split("\n")
    records = ["\n".join(lines[i:i + 8]) for i in range(0, 2400, 8)] + ["short", "short"]
    (inputs / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in records), encoding="utf-8")
    clean, tokens = tmp_path / "clean", tmp_path / "tokens"
    assert run("clean", str(inputs), "-o", str(clean), "-q", "--workers", "1").returncode == 0
    assert run("tokenize", str(clean), "-t", str(VOCAB / "gpt2_encoder.json"), "-o", str(tokens), "-q", "--format",
               "both", "--val-fraction", "0.1", "--workers", "1").returncode == 0
    return clean, tokens


def upload(bucket: str, folder: Path, prefix: str) -> str:
    fs = bucket_filesystem()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            fs.put_file(str(path), f"{bucket}/{prefix}/{path.relative_to(folder).as_posix()}")
    return f"s3://{bucket}/{prefix}"


def test_stats_and_verify_of_folders_in_a_bucket(bucket: str, tmp_path: Path) -> None:
    fs = bucket_filesystem()
    for folder, shard_folder in zip(outputs(tmp_path), ("data/", "train/")):
        url = upload(bucket, folder, folder.name)
        for args in ([], ["--json"], ["--verify"]):
            local, remote = run("stats", str(folder), *args), run("stats", url, *args)
            assert local.returncode == 0, local.stderr
            assert remote.returncode == 0, remote.stderr
            assert remote.stdout == local.stdout, (folder.name, args)
        shard = sorted(fs.glob(f"{bucket}/{folder.name}/{shard_folder}part-*.parquet"))[0]
        fs.pipe_file(shard, fs.cat_file(shard)[:-1] + b"x")
        bad = run("stats", url, "--verify")
        assert bad.returncode == 1
        assert f"{shard.rsplit('/', 1)[-1]}: sha256" in bad.stderr, bad.stderr


def test_a_missing_folder_url_is_one_line_exit_2(bucket: str) -> None:
    # Exit 2 as for a local folder that is no output: the argument is not what stats takes.
    for url in (f"s3://{bucket}/no/such/output", "s3://no-such-bucket-here/out"):
        result = run("stats", url)
        assert result.returncode == 2
        assert result.stderr.startswith(f"tokpipe: error: {url}: no manifest.json here")
        assert result.stderr.count("\n") == 1
