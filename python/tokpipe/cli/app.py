"""The ``tokpipe`` click group and what every command shares: usage errors, failures printed
as one line with the right exit code.

Exit codes: 0 success, 1 the work failed (bad tokenizer file, I/O error, a run that read no
document), 2 the command was used wrongly (bad option, missing or empty corpus, a bad config or
config value, an output folder holding another run). Errors print as one line; ``--verbose``
adds the traceback. Output piped into a command that stops reading early (``tokpipe encode
... | head``) ends the command quietly, with 0, as ``cat`` and ``grep`` do.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from tokpipe import __version__
from tokpipe.errors import CorpusError, TokpipeError

__all__ = ["cli", "UsageError", "friendly_errors", "fail", "one_line"]

F = TypeVar("F", bound=Callable[..., Any])


class UsageError(click.UsageError):
    """A usage problem found after parsing (missing corpus, say): exit 2, one line.

    Unlike click's own usage errors (bad options, which print the usage line), the command
    line was well formed, so the usage text would only bury the message.
    """

    def show(self, file: Any = None) -> None:
        click.echo(f"tokpipe: error: {one_line(self)}", err=True)


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
        except BrokenPipeError:
            reader_gone()
        except CorpusError as e:
            if verbose:
                traceback.print_exc()
            raise UsageError(str(e)) from None
        except (TokpipeError, OSError, ValueError) as e:
            if verbose:
                traceback.print_exc()
            fail(e)

    return wrapper  # type: ignore[return-value]


def reader_gone() -> NoReturn:
    """The reader of standard output closed it (``| head``): nothing more is wanted, so exit
    0 without a word. Standard output is pointed at /dev/null first: the interpreter's last
    flush of what is still buffered would fail again, and print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(0)


def fail(error: BaseException) -> NoReturn:
    """Print ``error`` as one line and exit 1 (the work failed)."""
    click.echo(f"tokpipe: error: {one_line(error)}", err=True)
    sys.exit(1)


def one_line(e: BaseException) -> str:
    """The error's message on one line (an OS error: its file and reason)."""
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    return " ".join(str(e).split()) or type(e).__name__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="tokpipe")
@click.option("-v", "--verbose", is_flag=True, help="Print the full traceback when a command fails.")
def cli(verbose: bool) -> None:
    """tokpipe: train and run tokenizers, and turn raw text into LLM pretraining datasets."""
