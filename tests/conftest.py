"""Shared fixtures: the real corpora in ``../shared/corpora`` and reference peers built offline.

The corpora sit beside the repository (``../shared/corpora``, relative to the repo root). Tests
that need them fail, rather than skip, when they are missing: a skipped parity test would hide
exactly the breakage it exists to catch.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"
VOCAB = CORPORA / "vocab"


def _require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"test data missing: {path} (the shared corpora must sit beside the repo)")
    return path


def load_documents() -> list[tuple[str, str]]:
    """Every document of ``text/`` and ``web/`` as (name, text).

    Text files are whole documents; JSONL records are documents; WARC response bodies are
    documents decoded as UTF-8 with replacement (raw HTML in the wild, mixed encodings and all).
    """
    docs: list[tuple[str, str]] = []
    for path in sorted(_require(CORPORA / "text").rglob("*.txt")):
        docs.append((path.name, path.read_text(encoding="utf-8")))
    for path in sorted(_require(CORPORA / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f):
                docs.append((f"{path.name}:{n + 1}", json.loads(line)["text"]))
    for path in sorted((CORPORA / "web").glob("*.warc.gz")):
        raw = gzip.open(path).read()
        for n, record in enumerate(raw.split(b"WARC/1.0\r\n")):
            if b"WARC-Type: response" in record:
                docs.append((f"{path.name}#{n}", record.decode("utf-8", errors="replace")))
    assert len(docs) > 40, "expected the shared corpora's text, jsonl and warc documents"
    return docs


def real_english_documents() -> list[str]:
    """The real English documents of the corpora, for agreement with datatrove's English
    rules: the two English books whole and in 30-line pieces (so short documents are covered
    too), and the Common Crawl JSONL documents."""
    docs = []
    for name in ("botchan.txt", "tinyshakespeare.txt"):
        text = _require(CORPORA / "text" / name).read_text(encoding="utf-8")
        lines = text.splitlines()
        docs += [text] + ["\n".join(lines[i:i + 30]) for i in range(0, len(lines), 30)]
    files = sorted(_require(CORPORA / "web").glob("*.jsonl.gz"))
    assert len(files) == 2, "expected the two Common Crawl JSONL samples"
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line)["text"] for line in f]
    return docs


@pytest.fixture(scope="session", autouse=True)
def empty_tokpipe_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An empty tokpipe cache for the whole session, as on a fresh CI machine: a model that
    ``tokpipe language-model`` installed here would otherwise turn ``backend: auto`` into
    fastText in every test (an environment variable, so spawned workers see it too)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKPIPE_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="session")
def documents() -> list[tuple[str, str]]:
    return load_documents()


@pytest.fixture(scope="session")
def vocab_dir() -> Path:
    return _require(VOCAB)


# -- Object storage: a local S3 server (tests/s3_server.py) for the whole session.

#: The environment the S3 tests run under: moto takes any credentials; these keep a real
#: AWS configuration on the machine out of the tests.
S3_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The endpoint URL of a local S3 server, started once per session; while it runs, the
    test process (and the commands it starts) has test credentials and ``AWS_ENDPOINT_URL``
    pointing at it, as for any S3-compatible endpoint. The environment is restored after."""
    import os

    from tests.s3_server import start_s3

    endpoint, stop = start_s3()
    settings = {**S3_ENVIRONMENT, "AWS_ENDPOINT_URL": endpoint}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        stop()


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    """A new, empty bucket of the local S3 server, named uniquely for this test."""
    import uuid

    import s3fs

    name = f"test-{uuid.uuid4().hex[:16]}"
    s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint}, skip_instance_cache=True).mkdir(name)
    return name
