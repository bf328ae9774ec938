"""``decontaminate``: drop or tag documents that share an n-gram of normalised words with an
evaluation set (GPT-3's rule; 13-grams by default).

**Benchmarks.** Each entry of ``benchmarks`` is a file or a folder: a ``.jsonl``/``.json``/
``.ndjson`` file (plain, ``.gz`` or ``.zst``), a ``.parquet`` file, or a ``.txt`` file (one
record per non-blank line), or a folder of such files (searched recursively, hidden names
skipped; every file is a part of the same benchmark). A file is named by its name without its
suffixes (``mmlu.jsonl.gz`` -> ``mmlu``), a folder by its own name; two benchmarks of one name
are a ``ConfigError``. A JSONL or Parquet record's text is its ``text_fields`` joined by a
newline, in the order given (a list of strings counts as its items joined by newlines, a
number as its digits, a null or absent value as nothing), so an n-gram may span the end of a
question and the start of its answer (datatrove's ``find_overlap_ngrams``).

**Words** are normalised as ``tokpipe_core::text::decont`` says: the script-aware words of
``text_stats`` (whitespace-separated pieces holding a letter or number; each Han character,
hiragana or katakana is one word, as Chinese and Japanese have no spaces), each reduced to its
letters and numbers (Unicode L*, N*: punctuation goes, ``Don't`` is ``dont``, ``GPT-4`` is
``gpt4``) and lower-cased character by character.

**Short records.** A record of ``n`` words or more gives its n-grams. A record of
``min_words`` to ``n - 1`` words is matched whole (GPT-3 used a record shorter than its n-gram
size whole); a record under ``min_words`` words (a bare answer such as "Paris") would match
most documents and is skipped. A benchmark file with no record left to index (empty, blank, or
only short records) is a ``ConfigError`` before any work, as is a missing path or a
``text_fields`` field that no record of a file has.

**Scale.** The index (64-bit keys of the n-grams, in Rust) is built once per process, when
the config is read, and reused by every batch; each batch is scanned in Rust on all cores with
the GIL released, stopping at a document's first match.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokpipe.errors import ConfigError
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.documents import TEXT, set_column
from tokpipe.pipeline.kernels import DecontIndex, decont_add, decont_index, decont_scan
from tokpipe.pipeline.readers.lines import open_decompressed
from tokpipe.pipeline.readers.tasks import format_of

__all__ = ["Decontaminate", "CONTAMINATED_BY", "CONTAMINATED_NGRAM", "CONTAMINATED"]

#: Column naming the benchmark a document shares an n-gram with (null when none).
CONTAMINATED_BY = "contaminated_by"
#: Column holding that n-gram's normalised words, joined by spaces (null when none).
CONTAMINATED_NGRAM = "contaminated_ngram"
#: The reason of a dropped document.
CONTAMINATED = "contaminated"

_SUFFIXES = (".gz", ".zst", ".zstd", ".jsonl", ".json", ".ndjson", ".parquet", ".txt")

#: Built indexes of this process, by what they were built from (the files' sizes and
#: modification times included): a worker builds the stage once per work unit, the index once.
_INDEXES: dict[tuple[Any, ...], tuple[DecontIndex, tuple[str, ...]]] = {}


def _benchmark_name(path: str) -> str:
    name = os.path.basename(os.path.normpath(path))
    if os.path.isdir(path):
        return name
    while True:
        for suffix in _SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


def _benchmark_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = []
        for root, folders, names in os.walk(path):
            folders[:] = sorted(f for f in folders if not f.startswith("."))
            files += [os.path.join(root, n) for n in sorted(names)
                      if not n.startswith(".") and format_of(n) in ("jsonl", "parquet", "text")]
        if not files:
            raise ConfigError(f"decontaminate: benchmark folder {path} holds no .jsonl, .parquet or .txt file")
        return sorted(files)
    if not os.path.exists(path):
        raise ConfigError(f"decontaminate: no benchmark file or folder at {path}")
    if format_of(path) not in ("jsonl", "parquet", "text"):
        raise ConfigError(f"decontaminate: benchmark {path} is not a .jsonl(.gz|.zst), .parquet or .txt file")
    return [path]


def _as_text(column: pa.Array | pa.ChunkedArray, path: str, field: str) -> pa.Array:
    """A field's values as strings: lists joined by newlines, numbers as their digits."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        column = pc.binary_join(column.cast(pa.list_(pa.string())), "\n")
    try:
        return column.cast(pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise ConfigError(f"decontaminate: benchmark {path}: field {field!r} is {kind}, not text") from None


def _json_value(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value if v is not None)
    return json.dumps(value, ensure_ascii=False)


def _records(path: str, fields: Sequence[str]) -> pa.Array:
    """The records of one benchmark file: their ``fields`` joined by newlines."""
    kind = format_of(path)
    try:
        if kind == "text":
            with open_decompressed(path) as f:
                lines = f.read().decode("utf-8").splitlines()
            return pa.array([line for line in lines if line.strip()], type=pa.large_string())
        if kind == "parquet":
            schema = pq.read_schema(path)
            present = [f for f in fields if f in schema.names]
            if not present:
                raise ConfigError(f"decontaminate: benchmark {path} has no field {' or '.join(map(repr, fields))} "
                                  f"(fields: {', '.join(schema.names)[:200]})")
            table = pq.read_table(path, columns=present)
            columns = [_as_text(table.column(f), path, f) for f in present]
        else:
            values: dict[str, list[str | None]] = {f: [] for f in fields}
            seen: set[str] = set()
            others: set[str] = set()
            with open_decompressed(path) as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ConfigError(f"decontaminate: benchmark {path}: line {number} is not a JSON object")
                    others.update(list(record)[:50])
                    for field in fields:
                        value = record.get(field)
                        if field in record:
                            seen.add(field)
                        values[field].append(_json_value(value))
            present = [f for f in fields if f in seen]
            if not present:
                if not others:
                    raise ConfigError(f"decontaminate: benchmark file {path} has no records")
                raise ConfigError(f"decontaminate: benchmark {path} has no field {' or '.join(map(repr, fields))} "
                                  f"(fields: {', '.join(sorted(others))[:200]})")
            columns = [pa.array(values[f], type=pa.large_string()) for f in present]
    except (OSError, UnicodeDecodeError, ValueError, pa.ArrowException) as error:
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(f"decontaminate: cannot read benchmark {path}: "
                          f"{type(error).__name__}: {' '.join(str(error).split())[:200]}") from None
    if len(columns) == 1:
        return columns[0].fill_null("")
    newline = pa.scalar("\n", pa.large_string())
    return pc.binary_join_element_wise(*columns, newline, null_handling="skip").fill_null("")


def _build(benchmarks: Sequence[str], fields: Sequence[str], n: int,
           min_words: int) -> tuple[DecontIndex, tuple[str, ...]]:
    found = []
    for path in benchmarks:
        files = _benchmark_files(str(path))
        found.append((_benchmark_name(str(path)), files))
    names = [name for name, _ in found]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"decontaminate: two benchmarks are named {name!r} (a file is named by its name without "
                              "suffixes, a folder by its name); rename one")
    stamps = tuple((name, tuple((f, os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files))
                   for name, files in found)
    key = (stamps, tuple(fields), n, min_words)
    cached = _INDEXES.get(key)
    if cached is not None:
        return cached
    index = decont_index(n, min_words)
    for number, (name, files) in enumerate(found):
        for path in files:
            added = decont_add(index, number, _records(path, fields))
            if added.records == 0:
                raise ConfigError(f"decontaminate: benchmark file {path} has no records")
            if added.usable == 0:
                raise ConfigError(f"decontaminate: benchmark file {path} has no record of at least {min_words} words "
                                  f"in {', '.join(fields)} ({added.records} records: {added.short} shorter, "
                                  f"{added.empty} without a word)")
    _INDEXES[key] = (index, tuple(names))
    return index, tuple(names)


@register
class Decontaminate(Stage):
    """Finds each document's first n-gram (``n`` normalised words, see the module's
    documentation) shared with a benchmark record and adds ``contaminated_by`` (the benchmark's
    name) and ``contaminated_ngram`` (the n-gram's normalised words), null for a clean document.
    ``action: drop`` drops a contaminated document (reason ``contaminated``; the rejected row
    carries both columns); ``tag`` keeps it. The stats count the contaminated documents per
    benchmark (``contaminated_<name>``). ``benchmarks`` and ``text_fields`` as the module says;
    records of ``min_words`` to ``n - 1`` words are matched whole, shorter ones skipped."""

    name = "decontaminate"

    def __init__(self, benchmarks: list[str], text_fields: list[str] = ("text",),  # type: ignore[assignment]
                 n: int = 13, action: Literal["drop", "tag"] = "drop", min_words: int = 8) -> None:
        if isinstance(benchmarks, (str, os.PathLike)) or not benchmarks:
            raise ConfigError("decontaminate: benchmarks is a non-empty list of files or folders")
        if isinstance(text_fields, str) or not text_fields:
            raise ConfigError("decontaminate: text_fields is a non-empty list of field names")
        if not isinstance(n, int) or n < 1:
            raise ConfigError(f"decontaminate: n must be a positive integer, not {n!r}")
        if not isinstance(min_words, int) or min_words < 1:
            raise ConfigError(f"decontaminate: min_words must be a positive integer, not {min_words!r}")
        if action not in ("drop", "tag"):
            raise ConfigError(f"decontaminate: action must be drop or tag, not {action!r}")
        self.benchmarks = [os.fspath(b) for b in benchmarks]
        self.text_fields = list(text_fields)
        self.n = n
        self.action = action
        self.min_words = min(min_words, n)
        self._index, self._names = _build(self.benchmarks, self.text_fields, n, self.min_words)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch.column(TEXT)
        # Arrow leaves what lies under a null slot unspecified: read nulls as empty text.
        benchmark, ngrams = decont_scan(self._index, text.fill_null("") if text.null_count else text)
        hit = benchmark >= 0
        names = pa.array(self._names, type=pa.string())
        valid = pa.py_buffer(np.packbits(hit, bitorder="little"))
        indices = pa.Array.from_buffers(pa.int32(), len(benchmark),
                                        [valid, pa.py_buffer(np.where(hit, benchmark, 0).astype(np.int32))])
        batch = set_column(batch, CONTAMINATED_BY, names.take(indices))
        batch = set_column(batch, CONTAMINATED_NGRAM, ngrams.cast(pa.string()))
        counts = np.bincount(benchmark[hit], minlength=len(self._names))
        for name, count in zip(self._names, counts.tolist()):
            self.stats.extra[f"{CONTAMINATED}_{name}"] += count
        if self.action == "tag":
            return StageResult(batch)
        return self.reject(batch, ~hit, CONTAMINATED)

    def __getstate__(self) -> dict[str, Any]:
        # The Rust index does not pickle; a copy finds or rebuilds it from the files.
        state = dict(self.__dict__)
        state["_index"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._index, self._names = _build(self.benchmarks, self.text_fields, self.n, self.min_words)
