"""``tokpipe encode -t`` and ``tokpipe tokenize -t`` take the same tokenizer files, every format
tokpipe reads, and both give the ids the format's own library gives on real text.

Each command goes through the console entry point and ``Tokenizer.from_file`` (the one loader),
which tells the format by the file's content; a file under a name that says nothing (or the
wrong thing) loads all the same.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA, VOCAB
from tests.parity.peers import tiktoken_encoding

Peer = Callable[[str], list[int]]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def _tiktoken(name: str) -> Peer:
    return tiktoken_encoding(name).encode_ordinary


def _hf_json(path: Path) -> Peer:
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(path))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _sentencepiece(path: Path) -> Peer:
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path)).encode


def _bert(path: Path) -> Peer:
    from tokenizers.implementations import BertWordPieceTokenizer

    tok = BertWordPieceTokenizer(str(path), lowercase=True)
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _copy(tmp: Path, source: Path, name: str, unzip: bool = False) -> Path:
    target = tmp / name
    if unzip:
        target.write_bytes(gzip.decompress(source.read_bytes()))
    else:
        shutil.copyfile(source, target)
    return target


# (case, the tokenizer file (made in a temporary folder when needed), the peer for that file)
FORMATS: dict[str, tuple[Callable[[Path], Path], Callable[[Path], Peer]]] = {
    "tokenizer.json": (lambda tmp: VOCAB / "gpt-neo-tokenizer.json", _hf_json),
    "sentencepiece .model": (lambda tmp: VOCAB / "spm_botchan_unigram_1000.model", _sentencepiece),
    ".tiktoken.gz": (lambda tmp: VOCAB / "cl100k_base.tiktoken.gz", lambda path: _tiktoken("cl100k")),
    "plain .tiktoken": (lambda tmp: _copy(tmp, VOCAB / "o200k_base.tiktoken.gz", "o200k_base.tiktoken", unzip=True),
                        lambda path: _tiktoken("o200k")),
    # A rank file named .txt: the content says tiktoken (a .txt used to be read as a BERT
    # vocabulary by tokenize), the name says which pattern.
    ".tiktoken named .txt": (lambda tmp: _copy(tmp, VOCAB / "cl100k_base.tiktoken.gz", "cl100k_base.txt", unzip=True),
                             lambda path: _tiktoken("cl100k")),
    "encoder.json": (lambda tmp: VOCAB / "gpt2_encoder.json", lambda path: _tiktoken("gpt2")),
    "vocab.bpe": (lambda tmp: VOCAB / "gpt2_vocab.bpe", lambda path: _tiktoken("gpt2")),
    "vocab.txt": (lambda tmp: VOCAB / "bert_base_uncased_vocab.txt", _bert),
    # encode used to read anything but tokenizer.json and .model as JSON.
    "vocab.txt named .dat": (lambda tmp: _copy(tmp, VOCAB / "bert_base_uncased_vocab.txt", "bert.dat"), _bert),
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Real text as JSONL documents: English and Japanese novel lines, Chinese notes, a web page."""
    docs = []
    for name, count in (("botchan.txt", 25), ("wagahaiwa_nekodearu.txt", 8)):
        lines = (CORPORA / "text" / name).read_text(encoding="utf-8").splitlines()
        docs += [line for line in lines if line.strip()][100:100 + count]
    notes = sorted((CORPORA / "text" / "zh_notes").glob("*.txt"))[0].read_text(encoding="utf-8")
    docs.append(notes[:1500])
    with gzip.open(sorted((CORPORA / "web").glob("*.jsonl.gz"))[0], "rt", encoding="utf-8") as f:
        docs.append(json.loads(f.readline())["text"][:3000])
    path = tmp_path_factory.mktemp("sample") / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "text": d}, ensure_ascii=False) + "\n"
                            for i, d in enumerate(docs)), encoding="utf-8")
    return path, docs


@pytest.mark.parametrize("case", list(FORMATS))
def test_encode_and_tokenize_take_the_file_and_give_the_peers_ids(case: str, sample: tuple[Path, list[str]],
                                                                  tmp_path: Path) -> None:
    make, peer_of = FORMATS[case]
    tokenizer = make(tmp_path)
    peer = peer_of(tokenizer)
    corpus, docs = sample
    want = [peer(d) for d in docs]

    encoded = run("encode", "-t", str(tokenizer), str(corpus))
    assert encoded.returncode == 0, encoded.stderr
    assert [[int(x) for x in line.split()] for line in encoded.stdout.splitlines()] == want

    out = tmp_path / "out"
    tokenized = run("tokenize", str(corpus), "-t", str(tokenizer), "-o", str(out), "--no-shuffle",
                    "--no-append-eos", "--workers", "1", "--threads", "2", "-q")
    assert tokenized.returncode == 0, tokenized.stderr
    table = pq.read_table(sorted((out / "train").glob("part-*.parquet")))
    got = dict(zip(table.column("id").to_pylist(), table.column("input_ids").to_pylist()))
    # Documents without a token are dropped by tokenize (reason `empty`).
    assert got == {str(i): ids for i, ids in enumerate(want) if ids}


def test_a_tiktoken_file_whose_name_says_no_pattern_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    ranks = _copy(tmp_path, VOCAB / "cl100k_base.tiktoken.gz", "ranks.tiktoken", unzip=True)
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "hello"}\n', encoding="utf-8")
    for command in (("encode", "-t", str(ranks), str(docs)),
                    ("tokenize", str(docs), "-t", str(ranks), "-o", str(tmp_path / "out"))):
        result = run(*command)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith("tokpipe: error:") and len(result.stderr.strip().splitlines()) == 1
        assert str(ranks) in result.stderr and "pattern" in result.stderr


def test_gpt2_encoder_without_its_merges_names_the_missing_file(tmp_path: Path) -> None:
    encoder = _copy(tmp_path, VOCAB / "gpt2_encoder.json", "gpt2_encoder.json")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "hello"}\n', encoding="utf-8")
    result = run("encode", "-t", str(encoder), str(docs))
    assert result.returncode == 1
    assert "gpt2_vocab.bpe" in result.stderr and len(result.stderr.strip().splitlines()) == 1

