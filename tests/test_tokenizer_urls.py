"""Tokenizer files given by URL: ``Tokenizer.from_file`` (and the other loaders, and ``save``)
against a real S3 protocol server on 127.0.0.1 (``tests/s3_server.py``), and ``-t s3://...``
through the real console entry point. The files are the shared vocab files, uploaded here; the
ids must be those of the same file read locally, and an error must name the URL (never the
local copy in the cache, never a credential)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import VOCAB
from tests.s3_server import bucket_filesystem
from tokpipe import Tokenizer, storage
from tokpipe.errors import FormatError

TEXTS = ["Hello world, this is tokpipe.", "naïve café, 123 456 7890", "  spaces\tand\nnewlines  ",
         "吾輩は猫である。名前はまだ無い。", "<|endoftext|> is text here", ""]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tokpipe's cache of fetched files in this test's folder (inherited by the commands run)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TOKPIPE_CACHE", str(folder))
    yield folder
    storage.configure({})


def upload(bucket: str, local: Path, key: str) -> str:
    bucket_filesystem().put_file(str(local), f"{bucket}/{key}")
    return f"s3://{bucket}/{key}"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", env=env)


@pytest.mark.parametrize("name", ["cl100k_base.tiktoken.gz", "gpt-neo-tokenizer.json", "spm_botchan_unigram_1000.model",
                                  "bert_base_uncased_vocab.txt"])
def test_a_url_gives_the_ids_of_the_local_file(bucket: str, name: str) -> None:
    url = upload(bucket, VOCAB / name, f"tokenizers/{name}")
    remote, local = Tokenizer.from_file(url), Tokenizer.from_file(VOCAB / name)
    assert remote.vocab_size == local.vocab_size
    assert remote.special_tokens == local.special_tokens
    assert remote.encode_batch(TEXTS) == local.encode_batch(TEXTS)


def test_gpt2_pair_is_found_beside_it_in_the_bucket(bucket: str) -> None:
    local = Tokenizer.from_file(VOCAB / "gpt2_encoder.json")
    for name in ("gpt2_encoder.json", "gpt2_vocab.bpe"):
        url = upload(bucket, VOCAB / name, f"gpt2/{name}")
    for name in ("gpt2_encoder.json", "gpt2_vocab.bpe"):
        assert Tokenizer.from_file(f"s3://{bucket}/gpt2/{name}").encode_batch(TEXTS) == local.encode_batch(TEXTS)
    assert Tokenizer.from_gpt2(f"s3://{bucket}/gpt2/gpt2_encoder.json", url).encode_batch(TEXTS) == \
        local.encode_batch(TEXTS)
    lonely = upload(bucket, VOCAB / "gpt2_encoder.json", "alone/gpt2_encoder.json")
    with pytest.raises(FormatError) as error:
        Tokenizer.from_file(lonely)
    assert str(error.value) == f"{lonely}: GPT-2's encoder.json needs its vocab.bpe beside it, and there is no gpt2_vocab.bpe"


def test_other_loaders_take_urls(bucket: str) -> None:
    tiktoken = upload(bucket, VOCAB / "o200k_base.tiktoken.gz", "o200k_base.tiktoken.gz")
    model = upload(bucket, VOCAB / "spm_botchan_unigram_1000.model", "m.model")
    vocab = upload(bucket, VOCAB / "bert_base_uncased_vocab.txt", "vocab.txt")
    pairs = [(Tokenizer.from_tiktoken(tiktoken, "o200k"), Tokenizer.from_tiktoken(VOCAB / "o200k_base.tiktoken.gz", "o200k")),
             (Tokenizer.from_sentencepiece(model), Tokenizer.from_sentencepiece(VOCAB / "spm_botchan_unigram_1000.model")),
             (Tokenizer.from_wordpiece_vocab(vocab, lowercase=False),
              Tokenizer.from_wordpiece_vocab(VOCAB / "bert_base_uncased_vocab.txt", lowercase=False))]
    for remote, local in pairs:
        assert remote.encode_batch(TEXTS) == local.encode_batch(TEXTS)


def test_a_changed_object_is_fetched_again(bucket: str, tmp_path: Path) -> None:
    url = upload(bucket, VOCAB / "gpt-neo-tokenizer.json", "t/tokenizer.json")
    assert Tokenizer.from_file(url).model_type == "BPE"
    bert = tmp_path / "bert.json"
    Tokenizer.from_wordpiece_vocab(VOCAB / "bert_base_uncased_vocab.txt").save(bert)
    upload(bucket, bert, "t/tokenizer.json")
    assert Tokenizer.from_file(url).model_type == "WordPiece"


def test_errors_name_the_url_not_the_cached_copy(bucket: str, cache: Path) -> None:
    missing = f"s3://{bucket}/nothing/tokenizer.json"
    with pytest.raises(FileNotFoundError) as lost:
        Tokenizer.from_file(missing)
    assert lost.value.filename == missing
    bad = f"s3://{bucket}/bad/tokenizer.json"
    bucket_filesystem().pipe_file(bad.removeprefix("s3://"), b'{"version": "1.0", "model": 7}')
    with pytest.raises(FormatError) as broken:
        Tokenizer.from_file(bad)
    assert str(broken.value).startswith(f"{bad}: ")
    assert str(cache) not in str(broken.value)
    with pytest.raises(FormatError) as broken_model:
        Tokenizer.from_sentencepiece(bad)
    assert bad in str(broken_model.value) and str(cache) not in str(broken_model.value)


def test_save_to_a_url_writes_the_local_bytes(bucket: str, tmp_path: Path) -> None:
    fs = bucket_filesystem()
    neo = Tokenizer.from_file(VOCAB / "gpt-neo-tokenizer.json")
    spm = Tokenizer.from_file(VOCAB / "spm_botchan_unigram_1000.model")
    bert = Tokenizer.from_file(VOCAB / "bert_base_uncased_vocab.txt")
    for tok, method, name in ((neo, "save", "t.json"), (neo, "save_tiktoken", "t.tiktoken"),
                              (spm, "save_sentencepiece", "t.model"), (bert, "save_vocab", "vocab.txt")):
        getattr(tok, method)(tmp_path / name)
        getattr(tok, method)(f"s3://{bucket}/saved/{name}")
        assert fs.cat_file(f"{bucket}/saved/{name}") == (tmp_path / name).read_bytes(), method


def test_tokenizer_option_takes_a_url(bucket: str, tmp_path: Path) -> None:
    url = upload(bucket, VOCAB / "gpt-neo-tokenizer.json", "neo/tokenizer.json")
    text = tmp_path / "in.txt"
    text.write_text("\n".join(t.replace("\n", " ") for t in TEXTS) + "\n", encoding="utf-8")
    local = run("encode", "-t", str(VOCAB / "gpt-neo-tokenizer.json"), str(text))
    remote = run("encode", "-t", url, str(text))
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    ids = f"s3://{bucket}/out/ids.txt"
    assert run("encode", "-t", url, str(text), "-o", ids).returncode == 0
    assert bucket_filesystem().cat_file(ids.removeprefix("s3://")).decode() == local.stdout
    (tmp_path / "ids.txt").write_text(local.stdout, encoding="utf-8")
    back = run("decode", "-t", url, ids)
    assert back.returncode == 0, back.stderr
    assert back.stdout == run("decode", "-t", str(VOCAB / "gpt-neo-tokenizer.json"), str(tmp_path / "ids.txt")).stdout


def test_a_missing_tokenizer_url_is_one_line_and_exit_1(bucket: str, tmp_path: Path) -> None:
    text = tmp_path / "in.txt"
    text.write_text("hello\n", encoding="utf-8")
    missing = f"s3://{bucket}/missing/tokenizer.json"
    result = run("encode", "-t", missing, str(text))
    assert result.returncode == 1
    assert result.stderr.startswith(f"tokpipe: error: {missing}: no such object")
    assert result.stderr.count("\n") == 1


def test_no_credential_in_any_message(bucket: str, tmp_path: Path) -> None:
    # The secret the commands run with, and one given as a storage option: recognisable, so
    # that any message quoting either would show it.
    secret, option_secret = "SeCrEt0fThisTest0nly9", "0pti0nSeCrEt0fThisTest7"
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": secret}
    text = tmp_path / "in.txt"
    text.write_text("hello\n", encoding="utf-8")
    outputs = [
        run("encode", "-t", f"s3://{bucket}/missing.json", str(text), env=env),
        run("encode", "-t", f"s3://{bucket}/missing.json", str(text), "--storage-option", f"secret={option_secret}",
            "--storage-option", "key=testing", env=env),
        run("encode", "-t", f"s3://{bucket}/missing.json", str(text), "--storage-option", f"secret={option_secret}",
            "--storage-option", "no_such_option=1", env=env),
        run("encode", "-t", "s3://no-such-bucket-here/t.json", str(text), env=env),
    ]
    for result in outputs:
        assert result.returncode != 0
        assert result.stderr.count("\n") == 1, result.stderr
        assert secret not in result.stderr + result.stdout
        assert option_secret not in result.stderr + result.stdout
