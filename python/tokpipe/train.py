"""``train_bpe``: train a byte-level BPE tokenizer from files, folders or strings.

Text, JSONL (plain, gzip, zstd) files are read, decoded and counted by the Rust core on all
cores with the GIL released. Parquet files and Python iterables are read here in batches and
handed to the same counter, so memory stays bounded by the batch plus the distinct pre-tokens.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from tokpipe import _core
from tokpipe.errors import CorpusError
from tokpipe.tokenizer import Tokenizer

__all__ = ["train_bpe", "CorpusReport", "TRAINING_SUFFIXES"]

StrPath = Union[str, "os.PathLike[str]"]

#: File endings picked up when a folder is walked (files named explicitly are always read).
TRAINING_SUFFIXES = (".txt", ".text", ".md", ".rst", ".jsonl", ".json", ".ndjson", ".jsonl.gz", ".jsonl.zst",
                     ".json.gz", ".json.zst", ".txt.gz", ".txt.zst", ".parquet")

# Strings per batch handed to Rust from Parquet files and iterables: large enough that the
# per-call cost vanishes, small enough that memory stays flat.
_BATCH = 8192


@dataclass
class CorpusReport:
    """What a training run read and what it set aside (never silently dropped)."""

    files: int = 0
    documents: int = 0
    bytes: int = 0
    invalid_utf8_documents: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, int, str]] = field(default_factory=list)

    def add(self, other: dict[str, object]) -> None:
        self.files += int(other.get("files", 0))  # type: ignore[arg-type]
        self.documents += int(other.get("documents", 0))  # type: ignore[arg-type]
        self.bytes += int(other.get("bytes", 0))  # type: ignore[arg-type]
        self.invalid_utf8_documents += int(other.get("invalid_utf8_documents", 0))  # type: ignore[arg-type]
        for reason, count in dict(other.get("set_aside", {})).items():  # type: ignore[call-overload]
            self.set_aside[reason] = self.set_aside.get(reason, 0) + int(count)
        self.examples.extend(other.get("examples", []))  # type: ignore[arg-type]

    def rows(self) -> list[tuple[str, str]]:
        """The summary table printed at the end of a run."""
        rows = [
            ("files", f"{self.files:,}"),
            ("documents", f"{self.documents:,}"),
            ("bytes read", f"{self.bytes:,}"),
            ("invalid UTF-8 (replaced)", f"{self.invalid_utf8_documents:,}"),
        ]
        rows += [(f"set aside: {reason}", f"{count:,}") for reason, count in sorted(self.set_aside.items())]
        return rows


def _collect_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and p.name.lower().endswith(TRAINING_SUFFIXES)
            )
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise CorpusError(f"{path}: no such file or folder")
    if not files:
        raise CorpusError(f"no training files found in {', '.join(map(str, paths))}")
    return files


def _as_paths(inputs: object) -> list[Path] | None:
    """The paths ``inputs`` names, or ``None`` when it is an iterable of texts.

    A str or PathLike is a path. A list or tuple of PathLike is paths; a list or tuple of str
    is paths when every item names an existing file or folder and texts when none does.
    Anything else iterable is texts.
    """
    if isinstance(inputs, (str, os.PathLike)):
        return [Path(inputs)]
    if isinstance(inputs, (list, tuple)):
        if inputs and all(isinstance(x, os.PathLike) for x in inputs):
            return [Path(x) for x in inputs]
        if inputs and all(isinstance(x, str) for x in inputs):
            exists = [len(x) < 4096 and "\n" not in x and Path(x).exists() for x in inputs]
            if all(exists):
                return [Path(x) for x in inputs]
            if any(exists):
                missing = next(x for x, e in zip(inputs, exists) if not e)
                raise CorpusError(f"{missing[:80]!r}: no such file (other items of the list are files)")
    return None


def _feed_parquet(trainer: _core.BpeTrainer, path: Path, text_field: str, report: CorpusReport) -> None:
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    if text_field not in parquet.schema_arrow.names:
        raise CorpusError(f"{path}: no column {text_field!r} (columns: {', '.join(parquet.schema_arrow.names)})")
    report.files += 1
    for batch in parquet.iter_batches(batch_size=_BATCH, columns=[text_field]):
        column = batch.column(0)
        nulls = column.null_count
        if nulls:
            report.set_aside["null text"] = report.set_aside.get("null text", 0) + nulls
            column = column.drop_null()
        texts = column.to_pylist()
        report.documents += len(texts)
        report.bytes += column.nbytes
        trainer.feed(texts)


def _feed_texts(trainer: _core.BpeTrainer, texts: Iterable[str], report: CorpusReport) -> None:
    batch: list[str] = []
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"training input must be strings, got {type(text).__name__}")
        batch.append(text)
        if len(batch) >= _BATCH:
            trainer.feed(batch)
            report.documents += len(batch)
            batch = []
    if batch:
        trainer.feed(batch)
        report.documents += len(batch)


def train_bpe(
    inputs: StrPath | Sequence[StrPath] | Iterable[str],
    vocab_size: int = 32000,
    pattern: str = "gpt2",
    special_tokens: Sequence[str] = ("<|endoftext|>",),
    min_frequency: int = 2,
    max_token_length: int | None = None,
    show_progress: bool = True,
    *,
    strict: bool = False,
    text_field: str = "text",
    report: list[CorpusReport] | None = None,
) -> Tokenizer:
    """Train a byte-level BPE tokenizer.

    ``inputs`` is a file or folder (walked recursively for .txt, .jsonl[.gz|.zst], .parquet),
    a list of them, or any iterable of strings (each string one sequence). In text files each
    line is one sequence, as in HF ``tokenizers``.

    The merges are those HF ``BpeTrainer`` makes with the same pre-tokenizer, vocabulary size,
    special tokens and ``min_frequency`` (ids: special tokens first, then the 256 bytes, then
    the merges). Invalid UTF-8 is replaced with U+FFFD and counted, or raises ``CorpusError``
    with ``strict=True``; malformed records are set aside and counted. Pass a list as
    ``report`` to receive the :class:`CorpusReport`.
    """
    trainer = _core.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        max_token_length=max_token_length,
        show_progress=show_progress,
        pattern=pattern,
    )
    summary = CorpusReport()
    paths = _as_paths(inputs)
    if paths is None:
        _feed_texts(trainer, inputs, summary)  # type: ignore[arg-type]
    else:
        files = _collect_files(paths)
        native = [os.fspath(f) for f in files if not f.name.lower().endswith(".parquet")]
        if native:
            summary.add(trainer.feed_files(native, strict=strict, text_field=text_field))
        for f in files:
            if f.name.lower().endswith(".parquet"):
                _feed_parquet(trainer, f, text_field, summary)
    if summary.documents == 0:
        raise CorpusError("the training corpus holds no text")
    if report is not None:
        report.append(summary)
    return Tokenizer(trainer.train())
