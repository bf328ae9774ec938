"""JSON Lines reader: ``.jsonl``, ``.ndjson`` and ``.json``, plain, gzip or zstd compressed.

Every non-blank line is one JSON object, one document. The document's text is the string at
``options.text_field``; its id is ``options.id_field`` (a string, or a number printed as one),
or, when the record has none, ``f"{path}:{n}"`` with ``n`` the 1-based **line number** in the
decompressed file (blank lines count). The record's other top-level fields become further
columns, their Arrow types inferred per batch (see :class:`~.base.BatchBuilder`); a value
nested more than 16 levels deep is kept as its JSON text (:mod:`tokpipe.pipeline.fields`), so
no record is set aside for its metadata.

A ``.json`` file is read as JSON Lines too: a file holding one JSON array is not supported (it
would have to be read whole); it shows up as a ``malformed_json`` or non-object error.

Bad lines are reported and skipped: ``malformed_json`` (not JSON, or JSON that is not an
object), ``missing_text_field`` (its detail lists the record's fields, to show a misnamed text
field), ``null_text``, ``non_string_text_field``, ``invalid_utf8`` (bytes that are not UTF-8, or
a ``\\ud800``-style lone surrogate escape, which no UTF-8 text can hold), and
``document_too_large``. A line longer than ``max_document_bytes`` plus 1 MiB of room for the
other fields is set aside as too large without being parsed, so one runaway line cannot
exhaust memory.

Speed: lines are read a block at a time (:func:`~.lines.iter_blocks`) and parsed in Rust
(``tokpipe_core::jsonl``) straight into Arrow string buffers. The rules above are those of the
standard library's ``json``, which stays the reference: the Rust parser takes a line only when
``json.loads`` would read it to the same id, text and fields, and leaves every other line
(bad ones, and good ones it does not reproduce, such as float ids or ``NaN``) to
:func:`_read_line`, which reads it here with ``json``. ``options.extra_fields=False`` skips
the other fields altogether.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional

import numpy as np
import pyarrow as pa

from tokpipe import _core

from tokpipe.pipeline.fields import JsonText, loads_record

from .base import (BatchBuilder, ErrorSink, ReadError, ReaderOptions, Task, id_to_string, missing_field_detail,
                   utf8_size)
from .lines import iter_blocks

__all__ = ["read_jsonl"]

# Room for a record's other fields on top of its text, when capping the length of a raw line.
_FIELDS_ALLOWANCE = 1 << 20


def read_jsonl(task: Task, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> Iterator[pa.RecordBatch]:
    """The documents of one JSON Lines task, as record batches (see the module docstring).

    Blocks of lines go to Rust (``_core.parse_jsonl_block``), which reads every line it is
    sure ``json.loads`` would read the same way into Arrow buffers; it stops before any other
    line, which :func:`_read_line` reads here with ``json`` (and reports if it is bad).
    """
    sink = ErrorSink(task.path, options, on_error)
    builder = BatchBuilder(options.batch_rows)
    max_line = options.max_document_bytes + _FIELDS_ALLOWANCE
    saw_record_line = False
    for first, block in iter_blocks(task, sink, max_line):
        if block is None:
            saw_record_line = True
            sink.report(f"line {first}", "document_too_large", f"the line is longer than {max_line} bytes")
            continue
        at, number = 0, first
        while at < len(block):
            max_docs, text_room = builder.room
            (id_buffers, text_buffers, rest, (consumed, next_line), lines, saw, stop) = _core.parse_jsonl_block(
                block, at, number, options.text_field, options.id_field, options.extra_fields, task.path, max_line,
                options.max_document_bytes, max_docs, text_room)
            saw_record_line = saw_record_line or saw
            start = at
            at += consumed
            number += lines
            texts = _strings(*text_buffers)
            extras = None if rest is None else [None if r is None else loads_record(r) for r in rest]
            full = builder.add_columns(_strings(*id_buffers), texts, len(text_buffers[1]), extras)
            if full is not None:
                yield full
            if stop != "slow":
                continue
            end = start + next_line
            line = bytes(block[at:end])
            at = end
            saw, full = _read_line(line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line,
                                   number, task, options, max_line, sink, builder)
            number += 1
            saw_record_line = saw_record_line or saw
            if full is not None:
                yield full
        # Let go of the block before the next is read: its buffer can then grow in place.
        del block
    if not saw_record_line and sink.reported == 0 and task.start == 0 and task.end is None:
        # Whitespace only: no unit to yield or report, yet the file must not vanish silently.
        sink.report("", "empty_file", "the file holds only blank lines")
    rest_batch = builder.flush()
    if rest_batch is not None:
        yield rest_batch


def _strings(offsets: bytes, data: bytes) -> pa.Array:
    """A ``string`` column from the parser's int64 offsets and its data."""
    bounds = np.frombuffer(offsets, dtype=np.int64)
    if bounds[-1] < 1 << 31:
        return pa.StringArray.from_buffers(len(bounds) - 1, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(data))
    return pa.LargeStringArray.from_buffers(len(bounds) - 1, pa.py_buffer(offsets), pa.py_buffer(data))


def _read_line(line: bytes, number: int, task: Task, options: ReaderOptions, max_line: int, sink: ErrorSink,
               builder: BatchBuilder) -> tuple[bool, Optional[pa.RecordBatch]]:
    """One line the Rust parser left: read with ``json``, added to ``builder`` or reported.
    Returns (whether the line holds a record, a batch it closed)."""
    where = f"line {number}"
    if len(line) > max_line:
        sink.report(where, "document_too_large", f"the line is longer than {max_line} bytes")
        return True, None
    if not line.strip():
        return False, None  # a blank line holds no record
    try:
        decoded = line.decode("utf-8")
    except UnicodeDecodeError as error:
        sink.report(where, "invalid_utf8", f"byte {error.start} of the line is not valid UTF-8 ({error.reason})")
        return True, None
    try:
        record = loads_record(decoded)
    except json.JSONDecodeError as error:
        # error.msg and the column only: the exception's str() is fine too, but never the line.
        # json's own spelling ("Unterminated string starting at: line 1 column 10 ..."): its
        # messages may end in "at", so " at column" glued on reads "starting at at column".
        sink.report(where, "malformed_json", f"{error.msg}: column {error.colno}")
        return True, None
    if not isinstance(record, dict):
        sink.report(where, "malformed_json", f"a JSON {_json_type(record)}, not an object")
        return True, None
    text_field, id_field = options.text_field, options.id_field
    if text_field not in record:
        sink.report(where, "missing_text_field", missing_field_detail(f"no field {text_field!r}", record))
        return True, None
    text = record.pop(text_field)
    if text is None:
        sink.report(where, "null_text", f"field {text_field!r} is null")
        return True, None
    if not isinstance(text, str) or isinstance(text, JsonText):
        sink.report(where, "non_string_text_field", f"field {text_field!r} is a JSON {_json_type(text)}")
        return True, None
    doc_id = id_to_string(record.pop(id_field, None))
    try:
        size = utf8_size(text)
        if doc_id is not None:
            utf8_size(doc_id)
    except UnicodeEncodeError:
        sink.report(where, "invalid_utf8", "a \\u escape encodes a lone surrogate, which UTF-8 cannot hold")
        return True, None
    if size > options.max_document_bytes:
        sink.report(where, "document_too_large", f"text of {size} bytes > max_document_bytes={options.max_document_bytes}")
        return True, None
    extras = record if options.extra_fields else None
    return True, builder.add(doc_id if doc_id is not None else f"{task.path}:{number}", text, size, extras)


def _json_type(value: Any) -> str:
    if isinstance(value, JsonText):
        return "object" if value.startswith("{") else "array"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
