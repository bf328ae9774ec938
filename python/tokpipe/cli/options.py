"""Options several commands take, declared once so that they are spelled, typed and explained
alike: ``-t/--tokenizer`` (any file :meth:`tokpipe.Tokenizer.from_file` opens), ``-w/--workers``
(processes), ``--threads`` (threads inside one process), the corpus options of the trainers, and
sizes such as ``256MB``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tokpipe.errors import TokpipeError

__all__ = ["F", "TOKENIZER_FILES", "LOCATION", "EXISTING_FILE", "OUTPUT_FILE", "EXISTING_FOLDER", "LocationType", "tokenizer_option", "workers_option",
           "threads_option", "corpus_options", "storage_options", "staging_dir_option", "keep_staging_option",
           "parse_size"]

F = TypeVar("F", bound=Callable[..., Any])

#: What ``-t/--tokenizer`` takes, for its help.
TOKENIZER_FILES = ("A tokenizer file: an HF tokenizer.json, a sentencepiece .model, a .tiktoken[.gz] rank file "
                   "(cl100k, o200k, p50k, r50k or gpt2 in its name), GPT-2's encoder.json (vocab.bpe beside it) "
                   "or BERT's vocab.txt; told apart by content.")


class LocationType(click.ParamType):
    """A local path or an object-storage URL (``s3://``, ``gs://``, ``az://``, ``hf://``,
    ``file://``), given to the command as the text typed, so a URL keeps its ``//`` (click's
    ``Path`` would make ``s3://b`` into ``s3:/b``). ``exists``: a local path must exist (a
    remote one is checked where it is read, with the cloud's own error); ``dir_okay=False``:
    a local path must not be a folder; ``file_okay=False``: nor a file."""

    name = "path"

    def __init__(self, exists: bool = False, dir_okay: bool = True, file_okay: bool = True) -> None:
        self.exists = exists
        self.dir_okay = dir_okay
        self.file_okay = file_okay

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from tokpipe import storage

        text = value if isinstance(value, str) else os.fspath(value)
        if storage.is_url(text):
            try:
                storage.location(text)
            except TokpipeError as error:
                self.fail(str(error), param, ctx)
            return text
        if self.exists and not os.path.exists(text):
            self.fail(f"{text!r} does not exist", param, ctx)
        if not self.dir_okay and os.path.isdir(text):
            self.fail(f"{text!r} is a folder", param, ctx)
        if not self.file_okay and os.path.isfile(text):
            self.fail(f"{text!r} is a file, not a folder", param, ctx)
        return text


#: Any path or URL.
LOCATION = LocationType()
#: A file that must exist (when local).
EXISTING_FILE = LocationType(exists=True, dir_okay=False)
#: A file to write (when local, not a folder).
OUTPUT_FILE = LocationType(dir_okay=False)
#: A folder that must exist (when local).
EXISTING_FOLDER = LocationType(exists=True, file_okay=False)


def storage_options(func: F) -> F:
    """``--storage-option KEY=VALUE`` (repeatable): options for object-storage filesystems
    (``tokpipe.storage.configure``), applied as the command line is parsed."""

    def apply(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> None:
        from tokpipe import storage

        options: dict[str, str] = {}
        for value in values:
            key, sep, setting = value.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"{value.split('=')[0]!r}: expected KEY=VALUE", ctx, param)
            options[key.strip()] = setting
        if options:
            storage.configure(options)

    return click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE", callback=apply,
                        expose_value=False, is_eager=True,
                        help="An option of the object-storage filesystem (fsspec's names), e.g. endpoint_url=http://"
                             "127.0.0.1:9000 or anon=true; repeatable. Credentials come from the cloud's usual "
                             "chain (environment, config files, instance roles); AWS_ENDPOINT_URL is honoured.")(func)


def staging_dir_option(func: F) -> F:
    """``--staging-dir PATH``: where a run keeps its state (``staging_dir`` of the run)."""
    return click.option("--staging-dir", type=LOCATION, default=None,
                        help="Where the run keeps its staged documents and markers until the output is written "
                             "[default: OUTPUT/.tokpipe; for an OUTPUT in object storage, a local folder under "
                             "~/.cache/tokpipe/runs (with --engine ray: OUTPUT/.tokpipe in the bucket)]. A local "
                             "folder is fast and costs local disk about the size of the output; one in the bucket "
                             "costs a PUT and a GET per staged file but lets any machine resume.")(func)


def keep_staging_option(about: str) -> Callable[[F], F]:
    """``--keep-staging``: keep the run's state once it succeeded (``keep_staging`` of the
    run); ``about``: what it is then good for."""
    return click.option("--keep-staging", is_flag=True,
                        help="Keep the staging (--staging-dir) once the run succeeded; by default what tokpipe wrote "
                             "there is removed after the manifest is written (a --staging-dir folder you named "
                             f"stays). {about}")


def tokenizer_option(required: bool = True, about: str = "") -> Callable[[F], F]:
    """``-t/--tokenizer FILE`` as the parameter ``tokenizer_path`` (a string; None when not
    required and not given). ``about`` follows the list of formats in the help."""
    return click.option("-t", "--tokenizer", "tokenizer_path", required=required, default=None,
                        type=EXISTING_FILE, help=f"{TOKENIZER_FILES} A path or URL (s3://, gs://, hf://...). "
                                                 f"{about}".strip())


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
        storage_options,
    )
    for option in reversed(options):
        func = option(func)
    return func


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}


class SizeType(click.ParamType):
    """An option's byte count, parsed when click parses the command line, so a bad value is
    refused before any work, in click's message that names the option."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except click.BadParameter as e:
            self.fail(e.message, param, ctx)


SIZE = SizeType()


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
    size = int(value * _UNITS[unit])
    # Sizes are whole bytes: "0.5" would round to 0, a buffer or shard that holds nothing.
    if size < 1:
        raise click.BadParameter(f"{text!r} is less than one byte")
    return size
