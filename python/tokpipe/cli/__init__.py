"""The ``tokpipe`` command: one click group, one module per command.

Exit codes: 0 success, 1 the work failed (bad tokenizer file, I/O error), 2 the command was
used wrongly (bad option, missing or empty corpus). Errors print as one line; ``--verbose``
adds the traceback.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

# Before numpy loads (the commands import it): its OpenBLAS would start a thread per core
# that spins for work for about 0.1 s of CPU, and tokpipe does no matrix work worth threads.
# That was 0.1 CPU-s of every command, taken from the cores the command itself needs. A
# value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click  # noqa: E402

from tokpipe import __version__  # noqa: E402
from tokpipe.errors import CorpusError, TokpipeError  # noqa: E402

F = TypeVar("F", bound=Callable[..., Any])


class UsageError(click.UsageError):
    """A usage problem found after parsing (missing corpus, say): exit 2, one line.

    Unlike click's own usage errors (bad options, which print the usage line), the command
    line was well formed, so the usage text would only bury the message.
    """

    def show(self, file: Any = None) -> None:
        click.echo(f"tokpipe: error: {_one_line(self)}", err=True)


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


def friendly_errors(func: F) -> F:
    """Turn tokpipe and OS errors into one readable line and the right exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        verbose = ctx.find_root().params.get("verbose", False)
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except CorpusError as e:
            if verbose:
                traceback.print_exc()
            raise UsageError(str(e)) from None
        except (TokpipeError, OSError, ValueError) as e:
            if verbose:
                traceback.print_exc()
            click.echo(f"tokpipe: error: {_one_line(e)}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    return " ".join(str(e).split()) or type(e).__name__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="tokpipe")
@click.option("-v", "--verbose", is_flag=True, help="Print the full traceback when a command fails.")
def cli(verbose: bool) -> None:
    """tokpipe: train and run tokenizers, and turn raw text into LLM pretraining datasets."""


def main() -> None:
    from tokpipe.cli import clean, encode, tokenize, train, train_lm, train_quality  # noqa: F401  (registers the commands)
    from tokpipe.pipeline.engines.workers import keep_freed_memory

    keep_freed_memory()

    cli(prog_name="tokpipe")
