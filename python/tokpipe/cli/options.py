"""Options several commands take, declared once so that they are spelled, typed and explained
alike: ``-t/--tokenizer`` (any file :meth:`tokpipe.Tokenizer.from_file` opens), ``-w/--workers``
(processes), ``--threads`` (threads inside one process), the corpus options of the trainers, and
sizes such as ``256MB``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["TOKENIZER_FILES", "tokenizer_option", "workers_option", "threads_option", "corpus_options",
           "parse_size"]

F = TypeVar("F", bound=Callable[..., Any])

#: What ``-t/--tokenizer`` takes, for its help.
TOKENIZER_FILES = ("A tokenizer file: an HF tokenizer.json, a sentencepiece .model, a .tiktoken[.gz] rank file "
                   "(cl100k, o200k, p50k, r50k or gpt2 in its name), GPT-2's encoder.json (vocab.bpe beside it) "
                   "or BERT's vocab.txt; told apart by content.")


def tokenizer_option(required: bool = True, about: str = "") -> Callable[[F], F]:
    """``-t/--tokenizer FILE`` as the parameter ``tokenizer_path`` (a string; None when not
    required and not given). ``about`` follows the list of formats in the help."""
    return click.option("-t", "--tokenizer", "tokenizer_path", required=required, default=None,
                        type=click.Path(exists=True, dir_okay=False),
                        help=f"{TOKENIZER_FILES} {about}".strip())


def workers_option(default: str, about: str = "") -> Callable[[F], F]:
    """``-w/--workers N``: worker processes; None when not given (``default`` says what the
    command then uses)."""
    text = f"Worker processes{f' ({about})' if about else ''} [default: {default}]."
    return click.option("-w", "--workers", type=click.IntRange(min=1), default=None, help=text)


def threads_option(about: str, default: int | None = None, default_help: str = "") -> Callable[[F], F]:
    """``--threads N``: threads inside one process (Rust's, encoding or training). A fixed
    ``default`` is shown; else ``default_help`` says what None means."""
    if default is not None:
        return click.option("--threads", type=click.IntRange(min=1), default=default, show_default=True, help=about)
    return click.option("--threads", type=click.IntRange(min=1), default=None,
                        help=f"{about} [default: {default_help}].")


def corpus_options(func: F) -> F:
    """The options of every command that reads a training corpus: its text field, strictness
    about bad input, and quiet."""
    options = (
        click.option("--text-field", default="text", show_default=True,
                     help="Field holding the text in JSONL and Parquet input."),
        click.option("--strict", is_flag=True,
                     help="Fail on invalid UTF-8 or malformed records instead of replacing or setting them aside."),
        click.option("-q", "--quiet", is_flag=True, help="No progress bars and no summary."),
    )
    for option in reversed(options):
        func = option(func)
    return func


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}


def parse_size(text: str) -> int:
    """``256MB``, ``1G``, ``4096``: a byte count."""
    raw = text.strip().upper().replace("IB", "B")
    number = raw.rstrip("KMGB")
    unit = raw[len(number):]
    try:
        value = float(number)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size like 256MB, 1G or 4096") from None
    if unit not in _UNITS or value <= 0:
        raise click.BadParameter(f"{text!r} is not a size like 256MB, 1G or 4096")
    return int(value * _UNITS[unit])
