"""``tokpipe train-bpe`` through the real console entry point."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tiktoken
import tiktoken.load
import tokenizers

from tests.conftest import CORPORA, REPO
from tests.parity.peers import tiktoken_encoding

EXAMPLES = REPO / "examples" / "corpus"


def run(*args: str, threads: int | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if threads is not None:
        env["RAYON_NUM_THREADS"] = str(threads)
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", env=env)


def test_readme_command_on_the_shipped_example(tmp_path: Path) -> None:
    out = tmp_path / "tokenizer.json"
    result = run("train-bpe", str(EXAMPLES), "--vocab-size", "500", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "documents" in result.stderr and "vocabulary" in result.stderr
    hf = tokenizers.Tokenizer.from_file(str(out))
    assert hf.get_vocab_size() == 500
    import tokpipe

    ours = tokpipe.Tokenizer.from_file(out)
    for path in sorted(EXAMPLES.rglob("*")):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, path.name


def test_same_output_whatever_the_thread_count(tmp_path: Path) -> None:
    outputs = []
    for threads in (1, 2, 5):
        out = tmp_path / f"t{threads}.json"
        result = run("train-bpe", str(CORPORA / "text"), "--vocab-size", "3000", "--pattern", "cl100k", "-q",
                     "-o", str(out), threads=threads)
        assert result.returncode == 0, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


def test_tiktoken_output_loads_in_tiktoken(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    out, ranks = tmp_path / "tok.json", tmp_path / "tok.tiktoken"
    result = run("train-bpe", str(CORPORA / "text"), "--vocab-size", "2000", "--special-token", "<|endoftext|>",
                 "--pattern", "gpt2", "-q", "-o", str(out), "--tiktoken", str(ranks))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    # tiktoken's ranks hold the ordinary tokens only; its gpt2 pattern is the one we trained with.
    enc = tiktoken.Encoding("trained", pat_str=tiktoken_encoding("gpt2")._pat_str,
                            mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(ranks)), special_tokens={})
    hf = tokenizers.Tokenizer.from_file(str(out))
    for name, text in documents[:30]:
        assert enc.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids, name


def test_bad_input_is_reported_not_dropped(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"good line one\nbad \xff line\n" * 50)
    (corpus / "b.jsonl").write_text('{"text": "fine"}\n{oops\n' * 20, encoding="utf-8")
    result = run("train-bpe", str(corpus), "--vocab-size", "300", "-o", str(tmp_path / "t.json"))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^documents +120$", result.stderr, re.M)
    assert re.search(r"^invalid UTF-8 \(replaced\) +50$", result.stderr, re.M)
    assert re.search(r"^set aside: malformed_json +20$", result.stderr, re.M)
    assert "b.jsonl:2: malformed_json" in result.stderr
    strict = run("train-bpe", str(corpus), "--strict", "-o", str(tmp_path / "s.json"))
    assert strict.returncode == 2
    assert "a.txt:2: invalid UTF-8" in strict.stderr and "Traceback" not in strict.stderr


def test_unusable_corpus_or_settings_exit_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "nothing.txt").write_bytes(b"")
    cases = {
        "no such file": ("train-bpe", str(tmp_path / "absent")),
        "no training files": ("train-bpe", str(tmp_path / "empty")),
        "no text": ("train-bpe", str(tmp_path / "blank")),
        "at least 257": ("train-bpe", str(EXAMPLES), "--vocab-size", "256"),
    }
    for expected, args in cases.items():
        result = run(*args, "-o", str(tmp_path / "never.json"))
        assert result.returncode == 2, (args, result.stderr)
        assert expected in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) <= 3 and "Traceback" not in result.stderr
    assert not (tmp_path / "never.json").exists()


def test_help_explains_every_option() -> None:
    result = run("train-bpe", "--help")
    assert result.returncode == 0
    for option in ("--vocab-size", "--pattern", "--special-token", "--min-frequency", "--max-token-length",
                   "--text-field", "--strict", "--tiktoken", "--quiet", "--output"):
        assert option in result.stdout
