"""``--hf-dir`` on ``tokpipe train-bpe``, ``train-wordpiece``, ``train-unigram`` and ``tokpipe train
--model``, through the real console entry point: the folder is what ``save_pretrained`` writes
for the trained tokenizer, transformers' ``AutoTokenizer`` loads it and pads with it, and the
summary lists it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tokpipe
from tests.conftest import CORPORA

FILES = ("special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", env=dict(os.environ))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """English and Japanese lines of the shared text, small enough to train on in a second."""
    path = tmp_path_factory.mktemp("corpus") / "mixed.txt"
    text = CORPORA / "text"
    lines = (text / "botchan.txt").read_text(encoding="utf-8").splitlines()[:2000]
    lines += (text / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines()[:300]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("command", "options", "pad"), [
    (["train-bpe"], ["--vocab-size", "800"], "<|endoftext|>"),
    (["train-wordpiece"], ["--vocab-size", "1500"], "[PAD]"),
    (["train-unigram"], ["--vocab-size", "1500", "--character-coverage", "0.98", "--pad-id", "3"], "<pad>"),
    (["train", "--model", "unigram"], ["--vocab-size", "1500", "--character-coverage", "0.98"], "<unk>"),
])
def test_hf_dir_is_the_save_pretrained_folder_and_loads_in_transformers(
        command: list[str], options: list[str], pad: str, corpus: Path, tmp_path: Path) -> None:
    output, folder = tmp_path / "tokenizer.json", tmp_path / "nested" / "hf"
    result = run(*command, str(corpus), *options, "-o", str(output), "--hf-dir", str(folder))
    assert result.returncode == 0, result.stderr
    assert any(line.split() == ["transformers", "folder", str(folder)] for line in result.stderr.splitlines()), \
        result.stderr
    # The tokenizer -o holds (a role that was an ordinary piece, <unk> or <pad>, is also an
    # added token), and the configuration save_pretrained writes for it.
    tok = tokpipe.Tokenizer.from_file(output)
    tok.save_pretrained(tmp_path / "expected")
    written, plain = (json.loads(path.read_text(encoding="utf-8")) for path in (folder / "tokenizer.json", output))
    assert {**written, "added_tokens": None} == {**plain, "added_tokens": None}
    assert {t["content"] for t in written["added_tokens"]} >= {t["content"] for t in plain["added_tokens"]} | {pad}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        assert (folder / name).read_bytes() == (tmp_path / "expected" / name).read_bytes(), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(folder))
    texts = ["It was a fine day.", "吾輩は猫である。", "a"]
    assert hf(texts, add_special_tokens=False)["input_ids"] == tok.encode_batch(texts)
    assert hf.pad_token == pad
    padded = hf(texts, padding=True, return_tensors="np")
    assert padded["input_ids"].shape[0] == 3
    assert padded["input_ids"][2, -1] == tok.token_to_id(pad)
    assert padded["attention_mask"][2, -1] == 0


def test_hf_dir_beside_a_model_file(corpus: Path, tmp_path: Path) -> None:
    # train-unigram -o x.model: the folder is the one the .model's tokenizer gives.
    model, folder = tmp_path / "u.model", tmp_path / "hf"
    result = run("train-unigram", str(corpus), "--vocab-size", "1500", "--character-coverage", "0.98", "-q",
                 "-o", str(model), "--hf-dir", str(folder))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    tokpipe.Tokenizer.from_file(model).save_pretrained(tmp_path / "expected")
    assert sorted(path.name for path in folder.iterdir()) == list(FILES)
    for name in FILES:
        assert (folder / name).read_bytes() == (tmp_path / "expected" / name).read_bytes(), name


@pytest.mark.parametrize("command", ["train-bpe", "train-wordpiece", "train-unigram", "train"])
def test_help_names_hf_dir(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0
    assert "--hf-dir" in result.stdout and "AutoTokenizer" in result.stdout


def test_hf_dir_must_not_be_a_file(corpus: Path, tmp_path: Path) -> None:
    target = tmp_path / "a_file"
    target.write_text("x")
    result = run("train-bpe", str(corpus), "--vocab-size", "300", "-o", str(tmp_path / "t.json"),
                 "--hf-dir", str(target))
    assert result.returncode == 2
    assert "a_file" in result.stderr


def test_model_max_length_reaches_transformers_and_outputs_may_go_to_new_folders(corpus: Path,
                                                                                tmp_path: Path) -> None:
    # -o and --vocab-txt into folders that do not exist yet: made, not a failure after training.
    output, vocab, folder = tmp_path / "new" / "t.json", tmp_path / "other" / "vocab.txt", tmp_path / "hf"
    result = run("train-wordpiece", str(corpus), "--vocab-size", "600", "-q", "-o", str(output),
                 "--vocab-txt", str(vocab), "--hf-dir", str(folder), "--model-max-length", "128")
    assert result.returncode == 0, result.stderr
    assert output.is_file() and vocab.is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(folder))
    assert hf.model_max_length == 128
    assert hf(["word " * 300], truncation=True)["input_ids"][0].__len__() == 128


def test_model_max_length_without_hf_dir_is_a_usage_error_before_training(corpus: Path, tmp_path: Path) -> None:
    output = tmp_path / "t.json"
    result = run("train-bpe", str(corpus), "--vocab-size", "300", "-o", str(output), "--model-max-length", "64")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["tokpipe: error: --model-max-length is written to the --hf-dir "
                                                  "folder: give --hf-dir too"]
    assert not output.exists()
