"""Stage model files given by URL, from a real S3 protocol server on 127.0.0.1
(``tests/s3_server.py``): ``perplexity`` (the ARPA model, its tokenizer, the cutoff sample),
``quality_classifier`` (the model), ``language`` (the fastText model) and ``tokenize`` (the
tokenizer). Each must give what the same file gives locally, in the stage and in a run on two
worker processes (which fetch the files themselves), and a missing object must be the stage's
own one-line error naming the URL."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA, VOCAB
from tests.s3_server import bucket_filesystem
from tokpipe import storage, train_lm
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline import run
from tokpipe.pipeline.stages import LanguageFilter, QualityClassifierFilter, Tokenize
from tokpipe.pipeline.stages.perplexity import Perplexity


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    yield
    storage.configure({})


def upload(bucket: str, local: Path, key: str) -> str:
    bucket_filesystem().put_file(str(local), f"{bucket}/{key}")
    return f"s3://{bucket}/{key}"


def texts() -> list[str]:
    lines = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").split("\n")
    docs = ["\n".join(lines[i:i + 1 + i % 5]) for i in range(0, 1200, 6)]
    return docs + (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").split("\n")[:40] + ["", "x"]


def batch() -> pa.RecordBatch:
    docs = texts()
    return pa.record_batch({"id": [f"d{i}" for i in range(len(docs))], "text": docs})


def same_result(a: object, b: object) -> None:
    ra, rb = a.process(batch()), b.process(batch())  # type: ignore[attr-defined]
    assert ra.kept.equals(rb.kept)
    assert (ra.rejected is None) == (rb.rejected is None)
    if ra.rejected is not None:
        assert ra.rejected.equals(rb.rejected)


@pytest.fixture
def arpa(tmp_path: Path) -> Path:
    text = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")
    path = tmp_path / "lm.arpa"
    train_lm(texts=[text], order=3, tokenizer=VOCAB / "gpt2_encoder.json", show_progress=False).save(path)
    return path


def test_perplexity_model_tokenizer_and_sample_by_url(bucket: str, arpa: Path, tmp_path: Path) -> None:
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts()[:100]), encoding="utf-8")
    model_url = upload(bucket, arpa, "models/lm.arpa")
    sample_url = upload(bucket, sample, "models/sample.jsonl")
    for name in ("gpt2_encoder.json", "gpt2_vocab.bpe"):
        upload(bucket, VOCAB / name, f"tok/{name}")
    tokenizer_url = f"s3://{bucket}/tok/gpt2_encoder.json"
    local = Perplexity(model=str(arpa), tokenizer=str(VOCAB / "gpt2_encoder.json"), sample=str(sample), max_perplexity=2000)
    remote = Perplexity(model=model_url, tokenizer=tokenizer_url, sample=sample_url, max_perplexity=2000)
    assert remote.bucket_cutoffs == local.bucket_cutoffs
    assert remote.params() == {**local.params(), "model": model_url, "tokenizer": tokenizer_url, "sample": sample_url}
    same_result(remote, local)
    for params, what in (({"model": f"s3://{bucket}/none.arpa"}, "model"),
                         ({"model": model_url, "tokenizer": f"s3://{bucket}/none.json"}, "tokenizer"),
                         ({"model": model_url, "sample": f"s3://{bucket}/none.jsonl"}, "sample")):
        with pytest.raises(InvalidArgumentError) as error:
            Perplexity(**params)  # type: ignore[arg-type]
        missing = next(v for v in params.values() if "none" in v)
        assert str(error.value) == f"perplexity: no {what} file at {missing}"


def test_a_broken_remote_model_names_its_url(bucket: str) -> None:
    bucket_filesystem().pipe_file(f"{bucket}/bad.arpa", b"\\data\\\nngram 1=zero\n")
    with pytest.raises(Exception) as error:
        Perplexity(model=f"s3://{bucket}/bad.arpa")
    assert f"s3://{bucket}/bad.arpa" in str(error.value)
    assert "tokpipe/objects" not in str(error.value) and "cache" not in str(error.value)


@pytest.fixture
def quality_model(tmp_path: Path) -> Path:
    from tokpipe.quality import train_quality_classifier

    good = [t for t in texts() if len(t) > 40]
    bad = [" ".join(sorted(t.split()))[::-1] for t in good]
    path = tmp_path / "quality.bin"
    train_quality_classifier(positive_texts=good, negative_texts=bad, epochs=3, dim=8, bucket=10_000,
                             val_fraction=0.0).save(path)
    return path


def test_quality_classifier_model_by_url(bucket: str, quality_model: Path) -> None:
    url = upload(bucket, quality_model, "models/quality.bin")
    local = QualityClassifierFilter(model=str(quality_model), threshold=0.5)
    remote = QualityClassifierFilter(model=url, threshold=0.5)
    assert remote.model == url
    assert remote.keys(batch()).equals(local.keys(batch()))
    with pytest.raises(InvalidArgumentError) as error:
        QualityClassifierFilter(model=f"s3://{bucket}/none.bin", threshold=0.5)
    assert str(error.value) == f"quality_classifier: model must be a quality model file, not 's3://{bucket}/none.bin'"


@pytest.fixture
def lid_model(tmp_path: Path) -> Path:
    import fasttext

    train = tmp_path / "lid.txt"
    with open(train, "w", encoding="utf-8") as f:
        for name, lang in (("botchan.txt", "en"), ("wagahaiwa_nekodearu.txt", "ja")):
            for line in (CORPORA / "text" / name).read_text(encoding="utf-8").splitlines()[:800]:
                if line.strip():
                    f.write(f"__label__{lang} {line.strip()}\n")
    model = fasttext.train_supervised(str(train), epoch=3, minn=1, maxn=2, thread=1, seed=1, verbose=0)
    path = tmp_path / "lid.bin"
    model.save_model(str(path))
    return path


def test_language_fasttext_model_by_url(bucket: str, lid_model: Path) -> None:
    url = upload(bucket, lid_model, "models/lid.bin")
    local = LanguageFilter(backend="fasttext", model_path=str(lid_model), languages=["en"], min_score=0.5)
    remote = LanguageFilter(backend="fasttext", model_path=url, languages=["en"], min_score=0.5)
    same_result(remote, local)
    same_result(pickle.loads(pickle.dumps(remote)), local)
    with pytest.raises(InvalidArgumentError, match=f"not 's3://{bucket}/none.bin'"):
        LanguageFilter(backend="fasttext", model_path=f"s3://{bucket}/none.bin")


def test_tokenize_tokenizer_by_url(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("gpt2_encoder.json", "gpt2_vocab.bpe"):
        upload(bucket, VOCAB / name, f"tok/{name}")
    url = f"s3://{bucket}/tok/gpt2_vocab.bpe"
    local = Tokenize(tokenizer=str(VOCAB / "gpt2_vocab.bpe"))
    remote = Tokenize(tokenizer=url)
    # Built once: processing batches asks the bucket nothing more.
    def no_requests(*args: object) -> None:
        raise AssertionError("a request to the bucket while tokenizing")

    monkeypatch.setattr(storage, "version", no_requests)
    monkeypatch.setattr(storage, "local_copy", no_requests)
    same_result(remote, local)
    monkeypatch.undo()
    same_result(pickle.loads(pickle.dumps(remote)), local)


def test_stage_models_by_url_in_a_run_on_two_workers(bucket: str, arpa: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    docs = texts()
    for part in range(3):
        (inputs / f"part{part}.jsonl").write_text(
            "".join(json.dumps({"id": f"d{i}", "text": docs[i]}) + "\n" for i in range(part, len(docs), 3)),
            encoding="utf-8")
    for name in ("gpt2_encoder.json", "gpt2_vocab.bpe"):
        upload(bucket, VOCAB / name, f"tok/{name}")
    model_url = upload(bucket, arpa, "models/lm.arpa")

    def config(model: str, tokenizer: str) -> str:
        return ("stages:\n"
                f"  - type: perplexity\n    model: {model}\n    tokenizer: {tokenizer}\n    max_perplexity: 2000\n"
                f"  - type: tokenize\n    tokenizer: {tokenizer}\n")

    (tmp_path / "local.yaml").write_text(config(str(arpa), str(VOCAB / "gpt2_encoder.json")), encoding="utf-8")
    bucket_filesystem().pipe_file(f"{bucket}/configs/p.yaml",
                                  config(model_url, f"s3://{bucket}/tok/gpt2_encoder.json").encode())
    run([inputs], tmp_path / "local", config=tmp_path / "local.yaml", workers=2)
    run([inputs], tmp_path / "remote", config=f"s3://{bucket}/configs/p.yaml", workers=2)
    for folder in ("data/", "rejected/"):
        local = pq.read_table(sorted((tmp_path / "local").glob(f"{folder}part-*.parquet")))
        remote = pq.read_table(sorted((tmp_path / "remote").glob(f"{folder}part-*.parquet")))
        assert local.num_rows > 0 and remote.equals(local), folder
