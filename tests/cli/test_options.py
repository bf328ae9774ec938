"""Options several commands share are spelled alike everywhere: ``-t/--tokenizer`` for a
tokenizer file, ``-w/--workers`` for processes, ``--threads`` for threads inside one; and
``--help`` marks the options a command cannot run without."""

from __future__ import annotations

import subprocess
import sys

import click


def all_commands() -> dict[str, click.Command]:
    """Every ``tokpipe`` command: importing the modules of ``tokpipe.cli`` registers them."""
    import importlib
    import pkgutil

    import tokpipe.cli as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"tokpipe.cli.{module.name}")
    return dict(package.cli.commands)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def test_every_command_that_takes_a_tokenizer_spells_it_alike() -> None:
    takers = {}
    for name, command in all_commands().items():
        for option in _options(command):
            if "tokenizer" in option.name or any("tokenizer" in o for o in option.opts):
                takers[name] = option
    assert set(takers) >= {"encode", "decode", "tokenize", "train-lm"}
    for name, option in takers.items():
        assert option.opts == ["-t", "--tokenizer"], name
        assert "vocab.txt" in (option.help or "") and ".tiktoken" in (option.help or ""), name


def test_parallelism_options_are_named_alike() -> None:
    seen = set()
    for name, command in all_commands().items():
        for option in _options(command):
            flags = option.opts + option.secondary_opts
            if option.name == "workers":
                assert flags == ["-w", "--workers"], name
                seen.add((name, "workers"))
            elif option.name == "threads":
                assert flags == ["--threads"], name
                seen.add((name, "threads"))
            else:
                for flag in flags:
                    assert not any(word in flag for word in ("thread", "worker", "jobs", "proc", "cpu")), (name, flag)
    assert {("clean", "workers"), ("tokenize", "workers"), ("tokenize", "threads"), ("encode", "threads")} <= seen


def test_help_marks_the_options_a_command_cannot_run_without() -> None:
    tokenize = run("tokenize", "--help").stdout
    assert tokenize.startswith("Usage: tokpipe tokenize [OPTIONS] INPUTS...")
    for flag in ("-t, --tokenizer", "-o, --output"):
        block = tokenize[tokenize.index(flag):].split("\n  -", 1)[0]
        assert "[required]" in block, flag
    clean = run("clean", "--help").stdout
    block = " ".join(clean[clean.index("-o, --output"):].split("\n  -", 1)[0].split())
    assert "[required unless --print-config]" in block
    assert run("tokenize", "-t", __file__).returncode == 2  # no INPUTS, no -o: a usage error


def test_a_size_under_one_byte_is_refused_before_any_work(tmp_path) -> None:
    # "0.5" used to round down to 0 bytes: a tokenize shuffle buffer or a shard that holds nothing.
    corpus = tmp_path / "in.jsonl"
    corpus.write_text('{"text": "a document"}\n', encoding="utf-8")
    from tests.conftest import VOCAB

    cases = [("tokenize", str(corpus), "-t", str(VOCAB / "cl100k_base.tiktoken.gz"), "-o", str(tmp_path / "tok"), "--shuffle-buffer", "0.5"),
             ("clean", str(corpus), "-o", str(tmp_path / "clean"), "--shard-size", "0.5B")]
    for args in cases:
        result = run(*args)
        assert result.returncode == 2, (args, result.stderr)
        # A malformed option value is click's usage error: the usage line, then the message.
        option, value = args[-2:]
        assert f"Invalid value for '{option}': '{value}' is less than one byte" in result.stderr, result.stderr
        assert not (tmp_path / args[args.index("-o") + 1]).exists()
