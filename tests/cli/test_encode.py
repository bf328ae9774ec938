"""``tokpipe encode`` / ``tokpipe decode`` through the real console entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import VOCAB
from tests.parity.test_hf_parity import hf_ids, hf_neo

NEO = str(VOCAB / "gpt-neo-tokenizer.json")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          input=stdin, capture_output=True, text=True, encoding="utf-8")


@pytest.fixture()
def lines(tmp_path: Path, documents: list[tuple[str, str]]) -> tuple[Path, list[str]]:
    docs = [line for _, text in documents[:3] for line in text.splitlines() if line.strip()][:300]
    path = tmp_path / "in.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return path, docs


def test_encode_text_matches_hf_and_decode_round_trips(tmp_path: Path, lines: tuple[Path, list[str]]) -> None:
    path, docs = lines
    out = run("encode", "-t", NEO, str(path))
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert len(rows) == len(docs)
    for row, doc in zip(rows, docs):
        assert [int(x) for x in row.split()] == hf_ids(hf_neo(), doc)
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(out.stdout, encoding="utf-8")
    back = run("decode", "-t", NEO, str(ids_file))
    assert back.returncode == 0, back.stderr
    assert back.stdout.splitlines() == docs


def test_encode_and_decode_with_a_sentencepiece_model(tmp_path: Path, lines: tuple[Path, list[str]]) -> None:
    import sentencepiece as spm

    model = VOCAB / "spm_ja_unigram_8000.model"
    peer = spm.SentencePieceProcessor(model_file=str(model))
    path, docs = lines
    out = run("encode", "-t", str(model), str(path))
    assert out.returncode == 0, out.stderr
    rows = [[int(x) for x in row.split()] for row in out.stdout.splitlines()]
    assert rows == [peer.encode(d) for d in docs]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(out.stdout, encoding="utf-8")
    back = run("decode", "-t", str(model), str(ids_file))
    assert back.returncode == 0, back.stderr
    assert back.stdout.splitlines() == [peer.decode(r) for r in rows]


def test_encode_jsonl_and_npy(tmp_path: Path, lines: tuple[Path, list[str]]) -> None:
    path, docs = lines
    records = tmp_path / "in.jsonl"
    records.write_text("".join(json.dumps({"body": d}) + "\n" for d in docs), encoding="utf-8")
    out = run("encode", "-t", NEO, str(records), "--text-field", "body", "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    assert [json.loads(r)["ids"] for r in out.stdout.splitlines()] == [hf_ids(hf_neo(), d) for d in docs]
    npy = tmp_path / "ids.npy"
    assert run("encode", "-t", NEO, str(path), "--format", "npy", "-o", str(npy)).returncode == 0
    flat = np.load(npy)
    assert flat.dtype == np.uint32
    assert flat.tolist() == [i for d in docs for i in hf_ids(hf_neo(), d)]


def test_encode_reads_standard_input() -> None:
    out = run("encode", "-t", NEO, stdin="hello world\n")
    assert out.returncode == 0, out.stderr
    assert [int(x) for x in out.stdout.split()] == hf_ids(hf_neo(), "hello world")


def test_bad_tokenizer_file_is_one_line_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    out = run("encode", "-t", str(bad), stdin="x\n")
    assert out.returncode == 1
    assert out.stderr.startswith("tokpipe: error:") and str(bad) in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr
    verbose = run("--verbose", "encode", "-t", str(bad), stdin="x\n")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr


def test_missing_input_exits_2(tmp_path: Path) -> None:
    out = run("encode", "-t", NEO, str(tmp_path / "missing.txt"))
    assert out.returncode == 2
    assert "missing.txt" in out.stderr


def test_malformed_jsonl_line_exits_2_naming_the_line(tmp_path: Path) -> None:
    records = tmp_path / "in.jsonl"
    records.write_text('{"text": "ok"}\n{broken\n', encoding="utf-8")
    out = run("encode", "-t", NEO, str(records))
    assert out.returncode == 2
    assert "in.jsonl:2" in out.stderr


def test_help_explains_every_option() -> None:
    import click

    from tokpipe.cli import cli, main  # noqa: F401
    from tokpipe.cli import encode, train  # noqa: F401  (registers the commands)

    for name in ("encode", "decode", "train-bpe"):
        command = cli.commands[name]
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{name} {param.opts} has no help"
        assert run(name, "--help").returncode == 0


def test_encode_into_a_reader_that_stops_early_ends_quietly_with_0(tmp_path: Path) -> None:
    # `tokpipe encode ... | head -1`: the reader closes the pipe after one line, while the
    # command still has most of its output to write (far more than a pipe holds).
    source = tmp_path / "in.txt"
    source.write_text("".join(f"hello world, line number {n}\n" for n in range(100_000)), encoding="utf-8")
    errors = tmp_path / "stderr"
    with open(errors, "w", encoding="utf-8") as err:
        command = subprocess.Popen([sys.executable, "-c", "from tokpipe.cli import main; main()", "encode", "-t", NEO,
                                    str(source)], stdout=subprocess.PIPE, stderr=err)
        assert command.stdout is not None
        first = command.stdout.readline()
        command.stdout.close()
        code = command.wait(timeout=120)
    assert first.split() and all(word.isdigit() for word in first.split())
    assert code == 0
    assert errors.read_text(encoding="utf-8") == ""
