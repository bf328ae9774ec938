"""The ``train-*`` commands on corpora in object storage and with ``-o`` in a bucket, against a
real S3 protocol server on 127.0.0.1 (``tests/s3_server.py``), through the real console entry
point: the same corpus, uploaded, must give byte for byte the tokenizer (or model) trained on
the local copy, and messages name the URLs, never the temporary downloads."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA
from tests.s3_server import bucket_filesystem
from tokpipe import storage, train_bpe, train_unigram
from tokpipe import train as train_module
from tokpipe.errors import CorpusError


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    yield
    storage.configure({})


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", env=env)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small corpus of every kind a trainer reads, plus what a folder walk skips: text,
    gzip JSONL (one malformed record, set aside), Parquet, a subfolder, a hidden file and a
    file of an unknown kind."""
    root = tmp_path / "corpus"
    (root / "zh").mkdir(parents=True)
    lines = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").splitlines()
    (root / "botchan.txt").write_text("\n".join(lines[:1500]) + "\n", encoding="utf-8")
    for path in sorted((CORPORA / "text" / "zh_notes").glob("*.txt"))[:3]:
        (root / "zh" / path.name).write_bytes(path.read_bytes())
    with gzip.open(CORPORA / "web" / "cc_en_head-0091.jsonl.gz", "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f][:40]
    with gzip.open(root / "web.jsonl.gz", "wt", encoding="utf-8") as f:
        for n, record in enumerate(records):
            f.write(json.dumps({"text": record["text"]}) + "\n")
            if n == 3:
                f.write("{not json\n")
    shakespeare = (CORPORA / "text" / "tinyshakespeare.txt").read_text(encoding="utf-8").split("\n\n")[:300]
    pq.write_table(pa.table({"text": shakespeare}), root / "plays.parquet")
    (root / ".hidden.txt").write_text("never read\n" * 50, encoding="utf-8")
    (root / "notes.csv").write_text("a,b\n" * 50, encoding="utf-8")
    return root


def upload(bucket: str, folder: Path, prefix: str) -> str:
    fs = bucket_filesystem()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            fs.put_file(str(path), f"{bucket}/{prefix}/{path.relative_to(folder).as_posix()}")
    return f"s3://{bucket}/{prefix}/"


def test_train_bpe_on_a_bucket_gives_the_local_tokenizer(bucket: str, corpus: Path, tmp_path: Path) -> None:
    url = upload(bucket, corpus, "corpus")
    local = run("train-bpe", str(corpus), "--vocab-size", "600", "-o", str(tmp_path / "local.json"))
    assert local.returncode == 0, local.stderr
    out = f"s3://{bucket}/out/tokenizer.json"
    remote = run("train-bpe", url, "--vocab-size", "600", "-o", out, "--tiktoken", f"s3://{bucket}/out/t.tiktoken")
    assert remote.returncode == 0, remote.stderr
    fs = bucket_filesystem()
    assert fs.cat_file(out.removeprefix("s3://")) == (tmp_path / "local.json").read_bytes()
    # The same report, the set-aside record named by its URL, never by the download.
    assert f"{url}web.jsonl.gz:5" in remote.stderr
    assert "tokpipe-train-" not in remote.stderr
    assert [line for line in remote.stderr.splitlines() if line.startswith(("files", "documents", "bytes", "set aside"))] \
        == [line for line in local.stderr.splitlines() if line.startswith(("files", "documents", "bytes", "set aside"))]
    assert fs.exists(f"{bucket}/out/t.tiktoken")


def test_globs_and_files_by_url(bucket: str, corpus: Path) -> None:
    url = upload(bucket, corpus, "corpus")
    local = train_bpe([corpus / "botchan.txt", *sorted((corpus / "zh").glob("*.txt"))], vocab_size=400,
                      show_progress=False)
    assert train_bpe([f"{url}botchan.txt", f"{url}zh/*.txt"], vocab_size=400, show_progress=False).to_str() == \
        local.to_str()
    with pytest.raises(CorpusError, match=f"^{url}nothing-\\*: no such file or folder"):
        train_bpe([f"{url}nothing-*"], vocab_size=400, show_progress=False)


def test_downloaded_in_groups_gives_the_same_tokenizer(bucket: str, corpus: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # One file per group: every group its own download and its own feed_files call.
    url = upload(bucket, corpus, "corpus")
    local_report: list[train_module.CorpusReport] = []
    local = train_unigram(corpus, vocab_size=1200, show_progress=False, report=local_report)
    monkeypatch.setattr(train_module, "DOWNLOAD_GROUP_BYTES", 1)
    report: list[train_module.CorpusReport] = []
    remote = train_unigram(url, vocab_size=1200, show_progress=False, report=report)
    assert remote.sentencepiece_bytes() == local.sentencepiece_bytes()
    assert report[0].rows() == local_report[0].rows()
    assert [(path, line, why) for path, line, why in report[0].examples] == \
        [(path.replace(f"{corpus}/", url), line, why) for path, line, why in local_report[0].examples]


def test_train_unigram_lm_and_wordpiece_write_to_a_bucket(bucket: str, corpus: Path, tmp_path: Path) -> None:
    url = upload(bucket, corpus, "corpus")
    fs = bucket_filesystem()
    for args, files in (
        (["train-unigram", "--vocab-size", "1200"], ["t.model"]),
        (["train-lm", "--order", "3", "--discount-fallback", "0.5 1 1.5"], ["lm.arpa"]),
        (["train-wordpiece", "--vocab-size", "1200"], ["tokenizer.json"]),
    ):
        name = files[0]
        local = run(*args, str(corpus), "-o", str(tmp_path / name), *(
            ["--vocab-txt", str(tmp_path / "vocab.txt")] if args[0] == "train-wordpiece" else []))
        assert local.returncode == 0, local.stderr
        remote = run(*args, url, "-o", f"s3://{bucket}/out/{name}", *(
            ["--vocab-txt", f"s3://{bucket}/out/vocab.txt"] if args[0] == "train-wordpiece" else []))
        assert remote.returncode == 0, remote.stderr
        assert fs.cat_file(f"{bucket}/out/{name}") == (tmp_path / name).read_bytes(), args[0]
    assert fs.cat_file(f"{bucket}/out/vocab.txt") == (tmp_path / "vocab.txt").read_bytes()


def test_train_takes_storage_options(bucket: str, corpus: Path, s3_endpoint: str, tmp_path: Path) -> None:
    # Without AWS_ENDPOINT_URL, the bucket is reached only through --storage-option.
    url = upload(bucket, corpus, "corpus")
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    result = run("train", "--model", "bpe", url, "--vocab-size", "300", "-o", str(tmp_path / "t.json"),
                 "--storage-option", f"endpoint_url={s3_endpoint}", "-q", env=env)
    assert result.returncode == 0, result.stderr
    local = run("train", "--model", "bpe", str(corpus), "--vocab-size", "300", "-o", str(tmp_path / "local.json"), "-q")
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "t.json").read_bytes() == (tmp_path / "local.json").read_bytes()


def test_train_quality_classifier_reads_and_writes_a_bucket(bucket: str, tmp_path: Path) -> None:
    from tokpipe.quality import load_quality_classifier

    good = tmp_path / "good"
    bad = tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    text = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").split("\n\n")
    docs = [t for t in text if len(t) > 80][:200]
    (good / "good.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in docs), encoding="utf-8")
    (bad / "bad.jsonl").write_text("".join(json.dumps({"text": " ".join(sorted(t.split()))[::-1]}) + "\n"
                                           for t in docs), encoding="utf-8")
    good_url, bad_url = upload(bucket, good, "good"), upload(bucket, bad, "bad")
    settings = ["--epochs", "3", "--dim", "8", "--bucket", "10000", "-q"]
    local = run("train-quality-classifier", "--positive", str(good), "--negative", str(bad), "-o",
                str(tmp_path / "q.bin"), *settings)
    assert local.returncode == 0, local.stderr
    remote = run("train-quality-classifier", "--positive", good_url, "--negative", bad_url, "-o",
                 f"s3://{bucket}/models/q.bin", *settings)
    assert remote.returncode == 0, remote.stderr
    texts = docs[:20] + ["a short text"]
    assert list(load_quality_classifier(f"s3://{bucket}/models/q.bin").score(texts)) == \
        list(load_quality_classifier(tmp_path / "q.bin").score(texts))
    inspected = run("inspect", f"s3://{bucket}/models/q.bin", "a short text")
    assert inspected.returncode == 0, inspected.stderr
    assert inspected.stdout == run("inspect", str(tmp_path / "q.bin"), "a short text").stdout


def test_a_missing_corpus_url_is_one_line(bucket: str, tmp_path: Path) -> None:
    for url in (f"s3://{bucket}/no/such/corpus", "s3://no-such-bucket-here/corpus"):
        result = run("train-bpe", url, "-o", str(tmp_path / "t.json"))
        assert result.returncode == 2
        assert result.stderr == f"tokpipe: error: {url}: no such file or folder\n"
    assert not (tmp_path / "t.json").exists()
