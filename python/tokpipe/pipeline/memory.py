"""In-memory data as a pipeline's input: what ``tokpipe.pipeline.apply`` (and ``run``) take
besides paths.

The data is streamed into files of a private folder, in the format whose reader already
gives it its meaning, and the run reads those like any input: the documents, the stages,
the stats and what is set aside are a file run's, by the same code.

- Arrow data (``pyarrow.Table``, ``RecordBatch``, ``RecordBatchReader``, a
  ``pyarrow.dataset.Dataset``, a Hugging Face ``datasets.Dataset`` or ``IterableDataset``,
  a pandas ``DataFrame``) is written as Parquet, a row group at a time, and read by the
  Parquet reader: the text column, a null text set aside as ``null_text``, every other
  column kept with its own type. A text column that is missing or not text is an error
  before anything is written.
- An iterable of dicts is written as JSON Lines, one document a line, and read by the JSON
  Lines reader: a record without the text field is set aside as ``missing_text_field``, a
  text that is not a string as ``non_string_text_field``, an item that is not a dict as
  ``malformed_json``. The other fields' types are inferred as for a file.
- An iterable of strings (:func:`texts` for ``run``, where a list of strings is a list of
  paths) is written as JSON Lines records of the text alone.

A document without an id (no id field, or a null one) is named ``memory:N``, N its 1-based
position in the data, where a file's reader would name it ``PATH:N``; the ids are filled in
as the data is written, so nothing names the private folder. Nothing holds the whole data
in memory: files are cut at about ``ReaderOptions.task_bytes``, so several workers share the
work. ``datasets`` and ``pandas`` are recognised by their module names and never imported
here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokpipe.errors import ArgumentTypeError, InvalidArgumentError
from tokpipe.pipeline.readers.base import MAX_BATCH_TEXT_BYTES, ReadError, ReaderOptions

__all__ = ["Texts", "texts", "MEMORY", "StagedInput", "split_inputs", "check_data", "stage"]

#: What documents of in-memory data are named after in generated ids (``memory:N``) and
#: in the read errors (``path``).
MEMORY = "memory"
# Rows per Parquet row group: pyarrow's default; bytes bound them too (MAX_BATCH_TEXT_BYTES).
_GROUP_ROWS = 65_536
# Staging files are written once and read once: lz4 costs a fraction of zstd's time.
_CODEC = "lz4"


@dataclass(frozen=True)
class Texts:
    """Strings that are documents' texts, not paths: ``run(texts(["a text", ...]), out)``."""

    items: Iterable[Any]


def texts(items: Iterable[str]) -> Texts:
    """Marks ``items`` as texts for :func:`tokpipe.pipeline.run`, which takes a list of
    strings as paths. (:func:`tokpipe.pipeline.apply` takes a list of strings as texts.)"""
    return Texts(items)


@dataclass
class StagedInput:
    """Data written by :func:`stage`: its files in order, the position (0-based) of each
    file's first document in the data, and the documents written."""

    files: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    rows: int = 0

    def rename(self, text: str) -> str:
        """``text`` (a read error's message) with each staged file's name and its ``line
        N``/``row N`` made the data's: ``memory, row M``."""
        for path, offset in zip(self.files, self.offsets):
            if path in text:
                text = re.sub(re.escape(path) + r"(, | )?(?:line|row) (\d+)",
                              lambda m: f"{MEMORY}{m.group(1) or ' '}row {offset + int(m.group(2))}", text)
                text = text.replace(path, MEMORY)
        return text

    def error(self, record: dict[str, Any]) -> ReadError:
        """A line of the run's ``errors.jsonl`` as the data's: ``path`` ``memory`` and
        ``location`` ``row N``, N the document's position in the data."""
        location = record.get("location", "")
        for path, offset in zip(self.files, self.offsets):
            if record.get("path") == path:
                number = re.fullmatch(r"(?:line|row) (\d+)", location)
                if number:
                    location = f"row {offset + int(number.group(1))}"
        return ReadError(MEMORY, location, record["reason"], record.get("detail", ""))


def split_inputs(inputs: Any) -> tuple[Any, list[Any] | None]:
    """``run``'s ``inputs`` as ``(data, None)`` for in-memory data (Arrow, Hugging Face or
    pandas data, :func:`texts`, dicts), or ``(None, paths)``. A string, a path, or a list
    or iterator of them is paths (so is an empty list); an iterator's first item is looked
    at, and put back."""
    if isinstance(inputs, (str, bytes, os.PathLike)):
        return None, [inputs]
    if isinstance(inputs, Texts) or _arrow_kind(inputs) is not None:
        return inputs, None
    if not isinstance(inputs, Iterable):
        raise ArgumentTypeError(f"inputs: expected paths or in-memory data (see tokpipe.pipeline.apply), got a "
                                f"{type(inputs).__name__}")
    iterator = iter(inputs)
    first = next(iterator, None)
    if isinstance(first, Mapping):
        return (inputs if isinstance(inputs, (list, tuple)) else chain([first], iterator)), None
    if first is not None and not isinstance(first, (str, bytes, os.PathLike)):
        raise ArgumentTypeError(f"inputs: expected paths, dicts or in-memory data, got a list of "
                                f"{type(first).__name__}; texts are passed as tokpipe.pipeline.texts([...])")
    return None, ([] if first is None else [first, *iterator])


def check_data(data: Any, options: ReaderOptions) -> None:
    """Refuses, in one line and before anything is read, data that cannot be documents: not
    a kind :func:`stage` takes, or Arrow data without a text column of text."""
    _source(data, options, peek=False)


def stage(data: Any, folder: str | os.PathLike[str], options: ReaderOptions) -> StagedInput:
    """Writes ``data`` into ``folder`` (created) as files the readers read with ``options``
    (see the module docstring). Raises ``InvalidArgumentError`` when it holds no document,
    or when none of its dicts has the text field (a wrong ``text_field``, most likely)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    kind, source = _source(data, options, peek=True)
    if kind == "arrow":
        staged = _write_parquet(source, folder, options)
    else:
        staged = _write_jsonl(source, kind, folder, options)
    if not staged.rows:
        raise InvalidArgumentError("the data holds no documents")
    return staged


def _source(data: Any, options: ReaderOptions, peek: bool) -> tuple[str, Any]:
    """The kind of ``data`` ("arrow", "dicts" or "strings") and what to write: Arrow
    batches, or the items. Only with ``peek`` is an iterator's first item taken (and put
    back), to tell dicts from strings."""
    if isinstance(data, Texts):
        if isinstance(data.items, (str, bytes)) or not isinstance(data.items, Iterable):
            raise ArgumentTypeError(f"texts() takes a list (or iterable) of strings, not one {type(data.items).__name__}")
        return "strings", data.items
    arrow = _arrow_kind(data)
    if arrow is not None:
        schema, batches = arrow
        _check_schema(schema(), options)
        return "arrow", batches()
    if isinstance(data, (str, bytes, os.PathLike)):
        raise ArgumentTypeError(f"expected documents, got a {type(data).__name__}: apply() takes data (a list of texts, "
                                "dicts, a pyarrow Table...); to run over files, use tokpipe.pipeline.run(paths, out_dir)")
    name = type(data).__name__
    if name.endswith("DatasetDict") and type(data).__module__.startswith("datasets"):
        raise ArgumentTypeError(f"got a {name} of splits {list(data)}: pass one split, data['train'] say")
    if isinstance(data, Mapping):
        raise ArgumentTypeError("got a dict: pass [doc] for one document, or pyarrow.table(d) for a dict of columns")
    if not isinstance(data, Iterable):
        raise ArgumentTypeError(f"expected a pyarrow Table, RecordBatchReader or Dataset, a datasets.Dataset, or a list "
                                f"of dicts or of strings; got a {name}")
    if isinstance(data, (list, tuple)):
        first = data[0] if data else None
        items: Iterable[Any] = data
    elif not peek:
        return "unknown", data  # an iterator is only looked into when it is written
    else:
        iterator = iter(data)
        first = next(iterator, None)
        items = iterator if first is None else chain([first], iterator)
    if first is None:
        return "strings", items  # nothing to write: `stage` says so
    if isinstance(first, Mapping):
        return "dicts", items
    if isinstance(first, str):
        return "strings", items
    raise ArgumentTypeError(f"expected documents as dicts or texts as strings; the data's first item is a "
                            f"{type(first).__name__}")


# Arrow-shaped data as two functions: its schema, and its record batches (streamed).
ArrowKind = tuple[Callable[[], pa.Schema], Callable[[], Iterator[pa.RecordBatch]]]


def _arrow_kind(data: Any) -> ArrowKind | None:
    """For Arrow-shaped data: how to get its schema and its batches (nothing is read or
    converted yet); None for anything else."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return lambda: data.schema, lambda: iter(data.to_batches() if isinstance(data, pa.Table) else [data])
    if isinstance(data, pa.RecordBatchReader):
        return lambda: data.schema, lambda: iter(data)
    module, name = type(data).__module__, type(data).__name__
    if module.startswith("pyarrow") and hasattr(data, "to_batches") and hasattr(data, "schema"):
        return lambda: data.schema, lambda: iter(data.to_batches())  # pyarrow.dataset.Dataset and its kin
    if module.startswith("datasets") and name in ("Dataset", "IterableDataset"):
        return _hf_kind(data)
    if module.startswith("pandas") and name == "DataFrame":
        return (lambda: pa.Schema.from_pandas(data, preserve_index=False),
                lambda: iter(pa.Table.from_pandas(data, preserve_index=False).to_batches()))
    return None


def _hf_kind(data: Any) -> ArrowKind:
    """A Hugging Face dataset's schema and batches, read through its Arrow format (which
    follows its selection and order: ``select``, ``shuffle``, ``filter``)."""
    as_arrow = data.with_format("arrow")

    def schema() -> pa.Schema:
        features = getattr(data, "features", None)
        if features is not None:
            return features.arrow_schema
        # A streamed dataset whose features are unknown until it is read.
        first = next(iter(as_arrow.iter(batch_size=1)), None)
        return first.schema if first is not None else pa.schema([])

    def batches() -> Iterator[pa.RecordBatch]:
        for table in as_arrow.iter(batch_size=1024):
            yield from table.to_batches()

    return schema, batches


def _is_text(arrow_type: pa.DataType) -> bool:
    return any(check(arrow_type) for check in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                                               pa.types.is_large_binary, _is_view))


def _is_view(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string_view(arrow_type) or pa.types.is_binary_view(arrow_type)


def _check_schema(schema: pa.Schema, options: ReaderOptions) -> None:
    if options.text_field not in schema.names:
        columns = ", ".join(schema.names[:20]) + (", ..." if len(schema.names) > 20 else "")
        raise InvalidArgumentError(f"the data has no column {options.text_field!r} (columns: {columns or 'none'}); name "
                                   "the text column with text_field=...")
    text_type = schema.field(options.text_field).type
    if not _is_text(text_type):
        raise ArgumentTypeError(f"the data's column {options.text_field!r} is {text_type}, not text (string or binary)")


def _row_ids(batch: pa.RecordBatch, id_field: str, first: int) -> pa.RecordBatch:
    """``batch`` with its id column a string column without nulls: the ids it has as the
    Parquet reader prints them, and ``memory:N`` for the others (N from ``first``)."""
    names = pc.binary_join_element_wise(f"{MEMORY}:", pc.cast(pa.array(np.arange(first, first + batch.num_rows)),
                                                              pa.string()), "")
    index = batch.schema.get_field_index(id_field)
    if index < 0:
        return batch.append_column(pa.field(id_field, pa.string()), names)
    given = batch.column(index)
    try:
        as_text = given.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Nested ids have no cast to string: printed, as the reader prints them.
        as_text = pa.array([None if value is None else str(value) for value in given.to_pylist()], type=pa.string())
    return batch.set_column(index, pa.field(id_field, pa.string()), pc.coalesce(as_text, names))


def _pieces(batch: pa.RecordBatch, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into row groups of at most ``_GROUP_ROWS`` rows and about ``max_bytes``
    (the reader reads a row group whole; a file holds whole row groups)."""
    rows = max(1, min(_GROUP_ROWS, batch.num_rows * max_bytes // max(1, batch.nbytes)))
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)


def _write_parquet(batches: Iterable[pa.RecordBatch], folder: Path, options: ReaderOptions) -> StagedInput:
    staged = StagedInput()
    writer: pq.ParquetWriter | None = None
    written = 0  # bytes (in memory) in the open file
    try:
        for batch in batches:
            text = batch.schema.get_field_index(options.text_field)
            if _is_view(batch.schema.field(text).type):
                # Parquet keeps the view type, which the reader does not take: the plain type.
                plain = pa.string() if pa.types.is_string_view(batch.schema.field(text).type) else pa.binary()
                batch = batch.set_column(text, pa.field(options.text_field, plain), batch.column(text).cast(plain))
            for piece in _pieces(batch, min(MAX_BATCH_TEXT_BYTES, options.task_bytes)):
                if not piece.num_rows:
                    continue
                piece = _row_ids(piece, options.id_field, staged.rows + 1)
                # A new file past a task's worth of data (so that workers share the work),
                # or for batches of another schema (an iterable may change its columns).
                if writer is None or written >= options.task_bytes or \
                        not piece.schema.equals(writer.schema, check_metadata=False):
                    if writer is not None:
                        writer.close()
                    path = folder / f"part-{len(staged.files):05d}.parquet"
                    writer = pq.ParquetWriter(path, piece.schema, compression=_CODEC)
                    staged.files.append(str(path))
                    staged.offsets.append(staged.rows)
                    written = 0
                writer.write_batch(piece)
                written += piece.nbytes
                staged.rows += piece.num_rows
    finally:
        if writer is not None:
            writer.close()
    return staged


def _write_jsonl(items: Iterable[Any], kind: str, folder: Path, options: ReaderOptions) -> StagedInput:
    """One JSON Lines file (the reader cuts it into tasks by byte range); line N is the
    data's document N."""
    path = folder / "part-00000.jsonl"
    staged = StagedInput([str(path)], [0])
    text_field, id_field = options.text_field, options.id_field
    with_text = 0
    # Lone surrogates are written as they are (not UTF-8): the reader sets such a document
    # aside as `invalid_utf8`, as it would in a file.
    encode = json.JSONEncoder(ensure_ascii=False, default=_plain).encode  # one encoder: not one per document
    with open(path, "w", encoding="utf-8", errors="surrogatepass", newline="\n") as out:
        for n, item in enumerate(items, 1):
            if kind == "strings":
                record: Any = {text_field: item, id_field: f"{MEMORY}:{n}"}
                with_text += 1
            elif isinstance(item, Mapping):
                record = item if item.get(id_field) is not None else {**item, id_field: f"{MEMORY}:{n}"}
                with_text += text_field in item
            else:
                record = item  # not a document: the reader sets it aside as malformed_json
            try:
                out.write(encode(record) + "\n")
            except (TypeError, ValueError) as error:
                raise ArgumentTypeError(f"document {n}: {error}") from None
            staged.rows = n
    if staged.rows and not with_text:
        raise InvalidArgumentError(f"none of the {staged.rows} documents has a field {text_field!r}; name the text field "
                                   "with text_field=...")
    return staged


def _plain(value: Any) -> Any:
    """A value ``json`` cannot write, as JSON data: numpy scalars and arrays as numbers and
    lists. Anything else is refused, by type."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise ArgumentTypeError(f"a value of type {type(value).__name__} cannot be written as JSON; convert it, or pass the data as "
                    "a pyarrow Table")
