"""Parquet reader: one document per row, streamed a batch of rows at a time.

The text is column ``options.text_field`` (string, large string, or binary holding UTF-8); the
id is column ``options.id_field`` cast to string, and where it is absent or null,
``f"{path}:{n}"`` with ``n`` the 1-based **row number** in the file. Every other column is
carried through with its own type (a column named ``id`` or ``text`` that is not the id or
text field is renamed ``input_id`` / ``input_text``).

Whole-file errors (location ``""``): a file that is not Parquet or cannot be opened
(``unreadable_file``), no rows (``empty_file``), no text column (``missing_text_field``, its
detail listing the columns), a text column of another type (``non_string_text_field``). Row errors: ``null_text``,
``invalid_utf8`` (binary text columns only: Arrow string columns are UTF-8 by construction),
``document_too_large``. A file that breaks midway (a corrupt row group) keeps the rows before
and is one ``unreadable_file`` error at the first row not read.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokpipe.pipeline import fs

from . import meter
from .base import MAX_BATCH_TEXT_BYTES, ErrorSink, ReadError, ReaderOptions, Task, missing_field_detail

__all__ = ["read_parquet", "parquet_batches"]


def parquet_batches(parquet: pq.ParquetFile, max_rows: int, max_bytes: int = MAX_BATCH_TEXT_BYTES,
                    groups: Iterable[int] | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``parquet`` in order, as batches of at most ``max_rows`` rows and about
    ``max_bytes`` (sized from each row group's average row, uncompressed). Memory is then
    bounded by bytes, not rows: 1,024 rows of 1 MiB documents would be a 1 GiB batch. A
    batch never spans two row groups (a row group is read whole anyway). ``groups``: only
    these row groups (in increasing order), each batched as it would be among all."""
    metadata = parquet.metadata
    for group in range(metadata.num_row_groups) if groups is None else groups:
        info = metadata.row_group(group)
        if not info.num_rows:
            continue
        row_bytes = max(1, info.total_byte_size // info.num_rows)
        rows = max(1, min(max_rows, max_bytes // row_bytes))
        yield from parquet.iter_batches(batch_size=rows, row_groups=[group])


def read_parquet(task: Task, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> Iterator[pa.RecordBatch]:
    """The documents of one Parquet file, as record batches (see the module docstring)."""
    sink = ErrorSink(task.path, options, on_error)
    try:
        parquet = fs.parquet_file(task.path)
    except (OSError, pa.ArrowException) as error:
        sink.report("", "unreadable_file", f"{type(error).__name__}: {error}")
        return
    with parquet:
        schema = parquet.schema_arrow
        rows = parquet.metadata.num_rows
        if rows == 0:
            sink.report("", "empty_file", "the file has no rows")
            return
        if options.text_field not in schema.names:
            sink.report("", "missing_text_field", missing_field_detail(f"no column {options.text_field!r}", schema.names))
            return
        text_type = schema.field(options.text_field).type
        if not (_is_string(text_type) or _is_binary(text_type)):
            sink.report("", "non_string_text_field", f"column {options.text_field!r} is {text_type}")
            return
        first_row = 1  # 1-based number of the next batch's first row
        batches = parquet_batches(parquet, options.batch_rows)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (OSError, pa.ArrowException) as error:
                sink.report(f"row {first_row}", "unreadable_file", f"{type(error).__name__}: {error}; rows from here on are unread")
                return
            meter.report(first_row - 1 + batch.num_rows, rows)  # progress: rows stand for the file's bytes
            yield from _documents(batch, first_row, task.path, options, sink)
            first_row += batch.num_rows


def _is_string(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def _is_binary(arrow_type: pa.DataType) -> bool:
    return pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)


def _documents(batch: pa.RecordBatch, first_row: int, path: str, options: ReaderOptions, sink: ErrorSink) -> Iterator[pa.RecordBatch]:
    """The good rows of ``batch`` as output batches; the bad ones reported."""
    text = batch.column(options.text_field)
    keep = [True] * batch.num_rows
    if text.null_count:
        for row in pc.indices_nonzero(text.is_null()).to_pylist():
            keep[row] = False
            sink.report(f"row {first_row + row}", "null_text", f"column {options.text_field!r} is null")
    if _is_binary(text.type):
        text, keep = _decode_binary(text, keep, first_row, sink)
    sizes = pc.binary_length(text).to_pylist()
    for row, size in enumerate(sizes):
        if keep[row] and size > options.max_document_bytes:
            keep[row] = False
            sink.report(f"row {first_row + row}", "document_too_large", f"text of {size} bytes > max_document_bytes={options.max_document_bytes}")

    ids = _ids(batch, first_row, path, options)
    # The output schema is fixed (string, not large_string) so batches of every file concatenate.
    columns: dict[str, pa.Array] = {"id": ids, "text": text if pa.types.is_string(text.type) else text.cast(pa.string())}
    for name in batch.schema.names:
        if name in (options.text_field, options.id_field):
            continue
        columns[f"input_{name}" if name in ("id", "text") else name] = batch.column(name)
    table = pa.Table.from_pydict(columns)
    if not all(keep):
        table = table.filter(pa.array(keep, type=pa.bool_()))
    yield from _bounded(table, sizes, keep)


def _decode_binary(text: pa.Array, keep: list[bool], first_row: int, sink: ErrorSink) -> tuple[pa.Array, list[bool]]:
    values: list[object] = []
    for row, raw in enumerate(text.to_pylist()):
        if not keep[row]:
            values.append(None)
            continue
        try:
            values.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            keep[row] = False
            values.append(None)
            sink.report(f"row {first_row + row}", "invalid_utf8", f"byte {error.start} of the text is not valid UTF-8 ({error.reason})")
    return pa.array(values, type=pa.string()), keep


def _ids(batch: pa.RecordBatch, first_row: int, path: str, options: ReaderOptions) -> pa.Array:
    generated = [f"{path}:{first_row + row}" for row in range(batch.num_rows)]
    if options.id_field not in batch.schema.names:
        return pa.array(generated, type=pa.string())
    given = batch.column(options.id_field)
    try:
        as_text = given.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Nested ids (structs, lists) have no cast to string: print them.
        as_text = pa.array([None if value is None else str(value) for value in given.to_pylist()], type=pa.string())
    return pc.coalesce(as_text, pa.array(generated, type=pa.string()))


def _bounded(table: pa.Table, sizes: list[int], keep: list[bool]) -> Iterator[pa.RecordBatch]:
    """``table`` as record batches of at most MAX_BATCH_TEXT_BYTES of text (at least one row)."""
    kept_sizes = [size for size, kept in zip(sizes, keep) if kept]
    start, total = 0, 0
    for row, size in enumerate(kept_sizes):
        if total and total + size > MAX_BATCH_TEXT_BYTES:
            yield from table.slice(start, row - start).combine_chunks().to_batches()
            start, total = row, 0
        total += size
    if start < len(kept_sizes):
        yield from table.slice(start).combine_chunks().to_batches()
