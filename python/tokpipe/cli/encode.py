"""``tokpipe encode`` and ``tokpipe decode``: token ids to and from text, streamed in batches.
Inputs, ``-o`` and ``-t`` may be object-storage URLs (``s3://...``): inputs are streamed, an
output is written locally and uploaded whole when done."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from tokpipe import storage
from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.options import OUTPUT_FILE, storage_options, threads_option, tokenizer_option
from tokpipe.tokenizer import Tokenizer

# Documents encoded per encode_batch call: enough to keep every core busy, little memory.
_BATCH = 4096


def _open_text(name: str) -> IO[str]:
    if name == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    path = storage.location(name)
    if isinstance(path, Path) and not path.exists():
        raise UsageError(f"{name}: no such file")
    from tokpipe.pipeline.readers.lines import open_decompressed

    return io.TextIOWrapper(open_decompressed(path if isinstance(path, Path) else name), encoding="utf-8",
                            errors="replace")


@contextmanager
def _written(output: str | None, suffix: str = "") -> Iterator[str | None]:
    """The local path to write ``-o`` to: the path itself, or for a URL a local temporary
    file uploaded whole when the command ends without an error (``suffix``: what the
    name gets when it does not end with it, as ``numpy.save`` does to a local path)."""
    if output is None or not storage.is_remote(output):
        yield output
        return
    from tokpipe.pipeline import fs

    final = output if output.endswith(suffix) else output + suffix
    with fs.atomic(storage.location(final)) as tmp:
        yield os.fspath(tmp)


def _documents(names: tuple[str, ...], text_field: str) -> Iterator[str]:
    """One document per line of text input, or per record of JSONL input (by file name)."""
    for name in names or ("-",):
        jsonl = ".jsonl" in name or ".ndjson" in name
        with _open_text(name) as f:
            for n, line in enumerate(f, 1):
                if not jsonl:
                    yield line.rstrip("\n")
                    continue
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    text = record[text_field]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise UsageError(f"{name}:{n}: not a JSON object with a {text_field!r} field ({e})") from None
                yield text


def _batches(docs: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


@cli.command("encode")
@tokenizer_option()
@click.argument("inputs", nargs=-1, type=str)
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl", "npy"]), default="text", show_default=True,
              help="text: one line of space-separated ids per document; jsonl: {\"ids\": [...]} per document; "
                   "npy: all ids in one uint32 array (needs -o).")
@click.option("-o", "--output", type=OUTPUT_FILE, default=None,
              help="Write here (a path or URL) instead of standard output.")
@click.option("--text-field", default="text", show_default=True, help="Field holding the text in .jsonl input.")
@click.option("--allow-special", is_flag=True, help="Turn special-token strings in the text into their ids.")
@threads_option("Threads to encode with", default_help="all cores")
@storage_options
@friendly_errors
def encode_command(tokenizer_path: str, inputs: tuple[str, ...], fmt: str, output: str | None, text_field: str,
                   allow_special: bool, threads: int | None) -> None:
    """Encode INPUTS (files or URLs, or - for standard input; the default) to token ids.

    Each line of a text file is one document; each record of a .jsonl[.gz|.zst] file is one.
    """
    tok = Tokenizer.from_file(tokenizer_path)
    allowed = "all" if allow_special else ()
    if fmt == "npy":
        if output is None:
            raise UsageError("--format npy needs -o/--output")
        import numpy as np

        chunks = [np.asarray(ids, dtype=np.uint32) for batch in _batches(_documents(inputs, text_field))
                  for ids in tok.encode_batch(batch, threads, allowed)]
        with _written(output, ".npy") as target:
            np.save(target, np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint32))
        return
    with _written(output) as target:
        out = open(target, "w", encoding="utf-8") if target else sys.stdout
        try:
            for batch in _batches(_documents(inputs, text_field)):
                for ids in tok.encode_batch(batch, threads, allowed):
                    out.write(json.dumps({"ids": ids}) if fmt == "jsonl" else " ".join(map(str, ids)))
                    out.write("\n")
        finally:
            if target:
                out.close()


@cli.command("decode")
@tokenizer_option()
@click.argument("inputs", nargs=-1, type=str)
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl", "npy"]), default="text", show_default=True,
              help="What INPUTS hold, as written by `tokpipe encode --format`.")
@click.option("-o", "--output", type=OUTPUT_FILE, default=None,
              help="Write here (a path or URL) instead of standard output.")
@storage_options
@friendly_errors
def decode_command(tokenizer_path: str, inputs: tuple[str, ...], fmt: str, output: str | None) -> None:
    """Decode token ids back to text, one document per line (npy: the whole array as one text)."""
    tok = Tokenizer.from_file(tokenizer_path)
    with _written(output) as target:
        out = open(target, "w", encoding="utf-8") if target else sys.stdout
        try:
            if fmt == "npy":
                import numpy as np

                for name in inputs:
                    with storage.open_input(name) as f:
                        out.write(tok.decode(np.load(f).tolist()))
                return
            for name in inputs or ("-",):
                with _open_text(name) as f:
                    for n, line in enumerate(f, 1):
                        try:
                            ids = json.loads(line)["ids"] if fmt == "jsonl" else [int(x) for x in line.split()]
                        except (ValueError, KeyError, TypeError) as e:
                            raise UsageError(f"{name}:{n}: not a line of token ids ({e})") from None
                        out.write(tok.decode(ids))
                        out.write("\n")
        finally:
            if target:
                out.close()
