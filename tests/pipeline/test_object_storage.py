"""``tokpipe clean`` and ``tokpipe tokenize`` from bucket to bucket, against a real S3
protocol server on 127.0.0.1 (moto's, see ``tests/s3_server.py``): the same bytes as a local
run on the same documents, for any ``--workers``; resume after ``kill -9`` with the run's
staging on local disk or in the bucket; ``--overwrite`` and ``stats --verify`` on a bucket;
and a clear one-line error, with nothing lost, for missing credentials, a missing bucket, a
missing extra and an input that vanishes midway. No credential ever reaches an output or a
message."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tokpipe.pipeline as pipeline
from tests.conftest import CORPORA
from tests.pipeline.killed_runs import finish, start_cli
from tokpipe.pipeline.engines import LocalExecutor, RunOptions
from tokpipe.pipeline.engines.state import RunState, local_staging
from tokpipe.pipeline.readers import ReaderOptions
from tokpipe.storage import location

CONFIG = {"stages": [{"type": "normalize"}, {"type": "exact_dedup"}, {"type": "gopher_quality"}]}
SECRET = "sEcReT-kEy-4f2a9c"  # moto takes any secret: this one must never be written anywhere


def s3() -> Any:
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> None:
    """Local staging of remote runs under this test's folder (commands started by the test
    inherit it), and a secret key that must never show up anywhere."""
    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real documents with ids (web pages, book passages) in eight JSONL files, a few of them
    exact copies (so exact_dedup has work across files), and one gzip file."""
    docs = []
    for name in ("cc_en_head-0091.jsonl.gz", "cc_en_head-0174.jsonl.gz"):
        with gzip.open(CORPORA / "web" / name, "rt", encoding="utf-8") as f:
            docs += [{"id": d["id"], "text": d["text"]} for d in map(json.loads, f)]
    for name in ("botchan.txt", "tinyshakespeare.txt"):
        words = (CORPORA / "text" / name).read_text(encoding="utf-8").split()
        docs += [{"id": f"{name}:{i}", "text": " ".join(words[i:i + 300])} for i in range(0, 60_000, 1_500)]
    docs += [{"id": f"copy-{n}", "text": docs[n * 7]["text"]} for n in range(5)]
    root = tmp_path_factory.mktemp("s3corpus")
    for part in range(8):
        lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[part::8])
        (root / f"part{part}.jsonl").write_text(lines, encoding="utf-8")
    with gzip.open(root / "zipped.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"id": "zipped-1", "text": docs[3]["text"][::-1]}) + "\n")
    return root


def upload(local: Path, bucket: str, prefix: str) -> str:
    s3().put(str(local) + "/", f"{bucket}/{prefix}/", recursive=True)
    return f"s3://{bucket}/{prefix}"


def remote_files(url: str) -> dict[str, bytes]:
    """Every object under ``url`` but the run's state, the manifest (which records the
    inputs' names and its creation time) and the dataset card (which lists the inputs), by
    relative path."""
    fs = s3()
    root = url.removeprefix("s3://")
    return {key[len(root) + 1:]: fs.cat_file(key) for key in fs.find(root)
            if "/.tokpipe/" not in key and not key.endswith(("/manifest.json", "/README.md"))}


def local_files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and ".tokpipe" not in p.parts and p.name not in ("manifest.json", "README.md")}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, env=env)


def read_rows(url: str) -> list[dict[str, Any]]:
    return pipeline.open_dataset(url).to_table().to_pylist()


def shards_of(manifest: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(s["path"], s["rows"], s["sha256"]) for s in manifest["shards"] + manifest["rejected"]]


def test_clean_and_tokenize_bucket_to_bucket_give_the_local_bytes(corpus: Path, bucket: str, tmp_path: Path,
                                                                  vocab_dir: Path) -> None:
    cl100k_path = vocab_dir / "cl100k_base.tiktoken.gz"
    source = upload(corpus, bucket, "in")
    options = dict(config=CONFIG, shard_size=20_000, task_bytes=40_000)
    local = pipeline.run([corpus], tmp_path / "local", workers=2, **options)
    one = pipeline.run([source], f"s3://{bucket}/out1", workers=1, **options)
    two = pipeline.run([source], f"s3://{bucket}/out2", workers=2, **options)
    expected = local_files(tmp_path / "local")
    assert len([name for name in expected if name.startswith("data/part-")]) > 2  # several shards
    assert remote_files(f"s3://{bucket}/out2") == expected
    # One worker cuts the shards in one group; the documents, in order, are the same.
    assert read_rows(f"s3://{bucket}/out1") == read_rows(f"s3://{bucket}/out2")
    assert one.kept == two.kept == local.kept and one.rejected_rows == local.rejected_rows > 0
    manifest = json.loads(s3().cat_file(f"{bucket}/out2/manifest.json"))
    assert shards_of(manifest) == shards_of(json.loads((tmp_path / "local" / "manifest.json").read_text()))
    assert manifest["inputs"] == [source]
    # The staging stayed on local disk, and went once the run succeeded; the bucket holds the
    # output alone.
    assert not [k for k in s3().find(f"{bucket}/out2") if "/.tokpipe/" in k]
    assert not local_staging(location(f"s3://{bucket}/out2")).exists()

    tokens = cli("tokenize", f"s3://{bucket}/out2", "-t", str(cl100k_path), "-o", f"s3://{bucket}/tokens",
                 "--format", "both", "-w", "2", "-q")
    assert tokens.returncode == 0, tokens.stderr
    local_tokens = cli("tokenize", str(tmp_path / "local"), "-t", str(cl100k_path), "-o", str(tmp_path / "tokens"),
                       "--format", "both", "-w", "2", "-q")
    assert local_tokens.returncode == 0, local_tokens.stderr
    theirs = remote_files(f"s3://{bucket}/tokens")
    assert {"megatron/train.bin", "megatron/train.idx", "documents/train.parquet"} <= set(theirs)
    assert theirs == local_files(tmp_path / "tokens")
    verified = cli("stats", "--verify", f"s3://{bucket}/tokens")
    assert verified.returncode == 0 and "verified" in verified.stdout, verified.stdout + verified.stderr
    assert SECRET not in tokens.stderr + verified.stdout + verified.stderr


def test_a_staging_in_the_bucket_goes_once_the_run_succeeded(corpus: Path, bucket: str) -> None:
    """The Ray engine's default staging, ``OUT/.tokpipe`` in the bucket: removed from the
    bucket once the run succeeded (the lock given back with it). A ``--staging-dir`` prefix
    the user named loses only what tokpipe wrote under it (issue 22: it used to go whole,
    with everything else under that prefix)."""
    source = upload(corpus, bucket, "in-staging")
    default = pipeline.run([source], f"s3://{bucket}/out", config=CONFIG, staging_dir=f"s3://{bucket}/out/.tokpipe")
    assert default.kept > 0
    assert not [k for k in s3().find(f"{bucket}/out") if "/.tokpipe/" in k]
    named = pipeline.run([source], f"s3://{bucket}/out2", config=CONFIG, staging_dir=f"s3://{bucket}/theirs")
    assert named.kept == default.kept
    assert not s3().find(f"{bucket}/theirs")
    assert not [k for k in s3().find(f"{bucket}/out2") if "/.tokpipe/" in k]
    # (A staging folder that holds anything is refused at the start; something put there
    # during the run stays.)
    state = RunState(f"s3://{bucket}/out3", f"s3://{bucket}/theirs")
    state.begin({"config": {}}, [], segments=1)
    s3().pipe(f"{bucket}/theirs/mine.txt", b"the user's")
    state.remove_staging()
    assert s3().find(f"{bucket}/theirs") == [f"{bucket}/theirs/mine.txt"]


def test_mixed_local_and_remote_inputs(corpus: Path, bucket: str, tmp_path: Path) -> None:
    source = upload(corpus, bucket, "in")
    both = pipeline.run([f"{source}/part0.jsonl", corpus / "part1.jsonl"], tmp_path / "mixed", config=CONFIG)
    alone = pipeline.run([corpus / "part0.jsonl", corpus / "part1.jsonl"], tmp_path / "local", config=CONFIG)
    assert local_files(tmp_path / "mixed") == local_files(tmp_path / "local")
    assert both.documents_in == alone.documents_in > 0


def kill_when(proc: subprocess.Popen[str], count: Any, at_least: int) -> None:
    """Kills the run (its process group, ``kill -9``) once ``count()`` reaches ``at_least``."""
    import signal

    while proc.poll() is None and count() < at_least:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


@pytest.mark.parametrize("staging", ["local", "bucket"])
def test_killed_remote_run_resumes_to_the_same_bytes(corpus: Path, bucket: str, tmp_path: Path, staging: str) -> None:
    source = upload(corpus, bucket, "in")
    args = [source, "-c", str(write_config(tmp_path)), "--task-size", "8KB", "--shard-size", "20KB", "-w", "1", "-q"]
    reference = cli("clean", *args, "-o", f"s3://{bucket}/whole")
    assert reference.returncode == 0, reference.stderr
    stage = str(tmp_path / "staging") if staging == "local" else f"s3://{bucket}/staging"
    out = f"s3://{bucket}/resumed"
    proc = start_cli("clean", *args, "-o", out, "--staging-dir", stage)
    if staging == "local":
        kill_when(proc, lambda: len(list((tmp_path / "staging" / "seg0").glob("*.json"))), 3)
    else:
        kill_when(proc, lambda: len(s3().glob(f"{bucket}/staging/seg0/*.json")), 3)
    assert not s3().exists(f"{bucket}/resumed/manifest.json")
    finish(start_cli("clean", *args, "-o", out, "--staging-dir", stage))
    assert remote_files(out) == remote_files(f"s3://{bucket}/whole")
    verified = cli("stats", "--verify", out)
    assert verified.returncode == 0 and "verified" in verified.stdout, verified.stdout + verified.stderr


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(CONFIG), encoding="utf-8")
    return path


def test_overwrite_verify_and_a_damaged_shard_on_a_bucket(corpus: Path, bucket: str, tmp_path: Path) -> None:
    source = upload(corpus, bucket, "in")
    out = f"s3://{bucket}/out"
    first = cli("clean", source, "-o", out, "-q")
    assert first.returncode == 0, first.stderr
    again = cli("clean", f"{source}/part0.jsonl", "-o", out, "-q")  # another run's folder
    assert again.returncode == 2 and "--overwrite" in again.stderr  # usage: the folder holds another run
    # Another machine (another cache) finds the run finished, from its manifest: nothing to redo.
    other_cache = {**os.environ, "TOKPIPE_CACHE": str(tmp_path / "other")}
    done = cli("clean", source, "-o", out, "-q", env=other_cache)
    assert done.returncode == 0, done.stderr
    # An unfinished run (no manifest yet) there finds the output but not the run's local staging.
    s3().rm_file(f"{bucket}/out/manifest.json")
    elsewhere = cli("clean", source, "-o", out, "-q", env=other_cache)
    assert elsewhere.returncode == 2 and "--staging-dir" in elsewhere.stderr, elsewhere.stderr
    fresh = cli("clean", f"{source}/part0.jsonl", "-o", out, "-q", "--overwrite")
    assert fresh.returncode == 0, fresh.stderr
    manifest = json.loads(s3().cat_file(f"{bucket}/out/manifest.json"))
    assert manifest["inputs"] == [f"{source}/part0.jsonl"]
    listed = {s["path"] for s in manifest["shards"] + manifest["rejected"]}
    assert {k.split("/out/", 1)[1] for k in s3().find(f"{bucket}/out") if k.endswith(".parquet")} == listed
    shard = f"{bucket}/out/{manifest['shards'][0]['path']}"
    data = bytearray(s3().cat_file(shard))
    data[len(data) // 2] ^= 0xFF
    s3().pipe_file(shard, bytes(data))
    verified = cli("stats", "--verify", out)
    assert verified.returncode == 1 and manifest["shards"][0]["path"] in verified.stdout + verified.stderr


def test_missing_credentials_missing_bucket_and_missing_extra(corpus: Path, bucket: str, tmp_path: Path) -> None:
    source = upload(corpus, bucket, "in")
    bare = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    bare.update(AWS_ENDPOINT_URL=os.environ["AWS_ENDPOINT_URL"], AWS_CONFIG_FILE=str(tmp_path / "none"),
                AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    no_credentials = cli("clean", source, "-o", str(tmp_path / "out"), env=bare)
    assert no_credentials.returncode == 1, no_credentials.stderr
    assert no_credentials.stderr.count("\n") == 1 and "credentials" in no_credentials.stderr
    assert "Traceback" not in no_credentials.stderr

    no_bucket = cli("clean", "s3://no-such-bucket-here/in", "-o", str(tmp_path / "out2"))
    assert no_bucket.returncode == 2 and "s3://no-such-bucket-here/in" in no_bucket.stderr
    assert no_bucket.stderr.count("\n") == 1
    no_output_bucket = cli("clean", source, "-o", "s3://no-such-bucket-here/out")
    assert no_output_bucket.returncode == 1 and no_output_bucket.stderr.count("\n") == 1, no_output_bucket.stderr
    assert "no-such-bucket-here" in no_output_bucket.stderr and "Traceback" not in no_output_bucket.stderr

    # Without s3fs (the [s3] extra), the error names the extra to install.
    missing = subprocess.run([sys.executable, "-c", "import sys; sys.modules['s3fs'] = None\n"
                              "from tokpipe.cli import main; main()", "clean", source, "-o", str(tmp_path / "o3")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "pip install 'tokpipe[s3]'" in missing.stderr, missing.stderr
    for result in (no_credentials, no_bucket, no_output_bucket, missing):
        assert SECRET not in result.stderr


def test_an_input_that_vanishes_midway_is_recorded_not_lost(corpus: Path, bucket: str, tmp_path: Path) -> None:
    """An object deleted after the run planned its tasks: its task records it in errors.jsonl
    (unreadable_file), the other files' documents are all there, and a rerun refuses to
    resume over the changed input."""
    source = upload(corpus, bucket, "in")
    gone = f"{source}/part3.jsonl"

    class DeletingAfterPlanning(LocalExecutor):
        def plan(self) -> Any:
            tasks = super().plan()
            s3().rm_file(gone.removeprefix("s3://"))
            return tasks

    out = f"s3://{bucket}/out"
    result = DeletingAfterPlanning(pipeline.parse_config(CONFIG), [source], out,
                                   RunOptions(workers=1, reader=ReaderOptions())).run()
    errors = [json.loads(line) for line in s3().cat_file(f"{bucket}/out/errors.jsonl").decode().splitlines()]
    assert [(e["path"], e["reason"]) for e in errors] == [(gone, "unreadable_file")]
    expected = sum(lines_in(p) for p in sorted(corpus.glob("*.jsonl*")) if p.name != "part3.jsonl")
    assert result.documents_in == expected + 1  # the unreadable file counts as input set aside
    rerun = cli("clean", source, "-o", out, "-c", str(write_config(tmp_path)), "-q")
    assert rerun.returncode == 1 and "part3.jsonl" in rerun.stderr and "changed" in rerun.stderr or \
        "gone" in rerun.stderr, rerun.stderr


def lines_in(path: Path) -> int:
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
        return sum(1 for _ in f)


def test_storage_options_never_reach_outputs_or_messages(corpus: Path, bucket: str, tmp_path: Path) -> None:
    source = upload(corpus, bucket, "in")
    out = f"s3://{bucket}/out"
    run = cli("clean", source, "-o", out, "--storage-option", "key=testing", "--storage-option", f"secret={SECRET}",
              "--storage-option", f"endpoint_url={os.environ['AWS_ENDPOINT_URL']}", "--keep-staging")  # to look in
    assert run.returncode == 0, run.stderr
    written = b"".join(s3().cat_file(k) for k in s3().find(bucket) if not k.endswith(".parquet"))
    staged = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file()
                      and p.suffix in (".json", ".jsonl"))
    assert SECRET.encode() not in written + staged
    assert SECRET not in run.stderr + run.stdout
    bad = cli("clean", source, "-o", str(tmp_path / "x"), "--storage-option", "no-equals-sign")
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr


def test_json_lines_shards_in_a_bucket_are_the_local_bytes(corpus: Path, bucket: str, tmp_path: Path) -> None:
    source = upload(corpus, bucket, "in")
    for out in (f"s3://{bucket}/out", str(tmp_path / "local")):
        done = cli("clean", source, "-o", out, "--output-format", "jsonl.gz", "--shard-size", "20KB", "-q")
        assert done.returncode == 0, done.stderr
    theirs = remote_files(f"s3://{bucket}/out")
    assert any(name.endswith(".jsonl.gz") for name in theirs)
    assert theirs == local_files(tmp_path / "local")
    verified = cli("stats", "--verify", f"s3://{bucket}/out")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_per_stage_rejected_folders_in_a_bucket_are_the_local_bytes(corpus: Path, bucket: str,
                                                                    tmp_path: Path) -> None:
    source = upload(corpus, bucket, "in")
    for out in (f"s3://{bucket}/by-stage", str(tmp_path / "local")):
        done = cli("clean", source, "-o", out, "--rejected-by-stage", "--shard-size", "20KB", "-q")
        assert done.returncode == 0, done.stderr
    theirs = remote_files(f"s3://{bucket}/by-stage")
    assert {name.split("/")[1] for name in theirs if name.startswith("rejected/")} == {"length_filter", "exact_dedup"}
    assert theirs == local_files(tmp_path / "local")
    verified = cli("stats", "--verify", f"s3://{bucket}/by-stage")
    assert verified.returncode == 0, verified.stdout + verified.stderr
