"""Plain text reader: ``.txt`` files, split into documents by ``options.split``.

- ``"none"``: the whole file is one document, its text the file's contents exactly (line
  endings kept as they are).
- ``"lines"``: every non-blank line is a document (its line ending removed).
- ``"paragraphs"``: every run of non-blank lines is a document (the lines joined by ``\\n``);
  blank (whitespace-only) lines separate paragraphs and belong to none.

Text files carry no ids: a document's id is ``f"{path}:{n}"`` with ``n`` the 1-based **line
number** where the document starts (always 1 for ``"none"``). Blank lines are not documents and
are neither yielded nor reported. A UTF-8 byte-order mark at the start of a file is dropped. A file with no bytes, or only blank lines, is one
``empty_file`` error. Text that is not UTF-8 is one ``invalid_utf8`` error for the document
(file, line or paragraph) it is in; a document over ``max_document_bytes`` is one
``document_too_large`` error, detected without holding more than the limit in memory.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator, Optional

import pyarrow as pa

from tokpipe import storage

from .base import BatchBuilder, ErrorSink, ReadError, ReaderOptions, Task
from .lines import UTF8_BOM, iter_lines

__all__ = ["read_text"]


def read_text(task: Task, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> Iterator[pa.RecordBatch]:
    """The documents of one text task, as record batches (see the module docstring)."""
    sink = ErrorSink(task.path, options, on_error)
    builder = BatchBuilder(options.batch_rows)
    if options.split == "none":
        documents = _whole_file(task, options, sink)
    elif options.split == "lines":
        documents = _lines(task, options, sink)
    else:
        documents = _paragraphs(task, options, sink)
    for first_line, content in documents:
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as error:
            where = "" if options.split == "none" else f"line {first_line}"
            sink.report(where, "invalid_utf8", f"byte {error.start} of the document is not valid UTF-8 ({error.reason})")
            continue
        full = builder.add(f"{task.path}:{first_line}", text, len(content))
        if full is not None:
            yield full
    rest = builder.flush()
    if rest is not None:
        yield rest


def _whole_file(task: Task, options: ReaderOptions, sink: ErrorSink) -> Iterator[tuple[int, bytes]]:
    try:
        with storage.open_input(task.path) as f:
            size = storage.open_size(f)
            if size == 0:
                sink.report("", "empty_file", "the file has no bytes")
                return
            if size > options.max_document_bytes:
                sink.report("", "document_too_large", f"file of {size} bytes > max_document_bytes={options.max_document_bytes}")
                return
            content = f.read()
    except OSError as error:
        sink.report("", "unreadable_file", f"{type(error).__name__}: {error.strerror or error}")
        return
    yield 1, content[len(UTF8_BOM) :] if content.startswith(UTF8_BOM) else content


def _lines(task: Task, options: ReaderOptions, sink: ErrorSink) -> Iterator[tuple[int, bytes]]:
    saw_text = False
    for number, line in iter_lines(task, sink, options.max_document_bytes):
        if line is None:
            saw_text = True
            sink.report(f"line {number}", "document_too_large", f"line longer than max_document_bytes={options.max_document_bytes}")
        elif line.strip():
            saw_text = True
            yield number, line
    _report_if_blank(task, sink, saw_text)


def _paragraphs(task: Task, options: ReaderOptions, sink: ErrorSink) -> Iterator[tuple[int, bytes]]:
    limit = options.max_document_bytes
    pieces: list[bytes] = []
    first_line: Optional[int] = None
    size = 0  # bytes of the paragraph so far, separators included
    too_large = False
    saw_text = False
    for number, line in iter_lines(task, sink, limit):
        if line is not None and not line.strip():
            if first_line is not None:
                paragraph = _close_paragraph(first_line, pieces, too_large, sink, limit)
                if paragraph is not None:
                    yield paragraph
            pieces, first_line, size, too_large = [], None, 0, False
            continue
        saw_text = True
        if first_line is None:
            first_line = number
        if line is None or too_large or size + len(line) + bool(pieces) > limit:
            # Keep scanning to the paragraph's end, but stop holding its text.
            too_large, pieces = True, []
            continue
        size += len(line) + bool(pieces)
        pieces.append(line)
    if first_line is not None:
        paragraph = _close_paragraph(first_line, pieces, too_large, sink, limit)
        if paragraph is not None:
            yield paragraph
    _report_if_blank(task, sink, saw_text)


def _close_paragraph(first_line: int, pieces: list[bytes], too_large: bool, sink: ErrorSink, limit: int) -> Optional[tuple[int, bytes]]:
    if too_large:
        sink.report(f"line {first_line}", "document_too_large", f"paragraph longer than max_document_bytes={limit}")
        return None
    return first_line, b"\n".join(pieces)


def _report_if_blank(task: Task, sink: ErrorSink, saw_text: bool) -> None:
    if not saw_text and sink.reported == 0 and task.start == 0 and task.end is None:
        sink.report("", "empty_file", "the file holds only blank lines")
