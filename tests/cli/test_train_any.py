"""``tokpipe train --model M``: the model's own train command, with the same options."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer as HfTokenizer

from tests.cli.test_train import run
from tests.conftest import CORPORA

BOOK = str(CORPORA / "text" / "botchan.txt")


@pytest.mark.parametrize(("model", "options"), [
    ("bpe", ["--vocab-size", "600", "--pattern", "cl100k", "--special-token", "<|endoftext|>",
             "--special-token", "<pad>", "--min-frequency", "3"]),
    ("wordpiece", ["--vocab-size", "900", "--score", "frequency", "--limit-alphabet", "200"]),
    ("unigram", ["--vocab-size", "700", "--character-coverage", "1.0", "--byte-fallback", "--no-split-by-number",
                 "--user-defined-symbol", "<sep>", "--normalization", "nfkc"]),
])
def test_same_tokenizer_as_the_models_own_command(tmp_path: Path, model: str, options: list[str]) -> None:
    generic, specific = tmp_path / "generic.json", tmp_path / "specific.json"
    a = run("train", "--model", model, BOOK, *options, "-q", "-o", str(generic))
    b = run(f"train-{model}", BOOK, *options, "-q", "-o", str(specific))
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert generic.read_bytes() == specific.read_bytes()
    assert HfTokenizer.from_file(str(generic)).get_vocab_size() == int(options[1])


def test_model_defaults_apply(tmp_path: Path) -> None:
    # No --vocab-size: each model's own default (and wordpiece's BERT special tokens).
    out = tmp_path / "wp.json"
    result = run("train", "-m", "wordpiece", str(CORPORA / "text"), "-q", "-o", str(out))
    assert result.returncode == 0, result.stderr
    hf = HfTokenizer.from_file(str(out))
    assert hf.token_to_id("[CLS]") is not None and hf.get_vocab_size() <= 30000


def test_an_option_of_another_model_is_a_usage_error(tmp_path: Path) -> None:
    result = run("train", "--model", "bpe", BOOK, "--score", "frequency", "--cased", "-o", str(tmp_path / "x.json"))
    assert result.returncode == 2
    assert "--cased, --score are not options of --model bpe" in result.stderr
    assert not (tmp_path / "x.json").exists()


def test_model_is_required() -> None:
    result = run("train", BOOK)
    assert result.returncode == 2
    assert "--model" in result.stderr
