"""What every reader shares: the task and error records, the options, and the batch builder.

A reader turns one :class:`Task` into a stream of Arrow record batches whose first two columns
are ``id`` and ``text`` (both strings). Every input unit (a line, a record, a row, a file) is
either yielded once as a document or reported once as a :class:`ReadError`; :class:`ErrorSink`
is the one place a reader reports through, so ``strict`` behaves the same in every format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pyarrow as pa

from tokpipe.errors import CorpusError, InvalidArgumentError
from tokpipe.pipeline.fields import field_column

__all__ = [
    "Task",
    "ReadError",
    "READ_ERROR_REASONS",
    "ReaderOptions",
    "ErrorSink",
    "BatchBuilder",
    "utf8_size",
    "MAX_BATCH_TEXT_BYTES",
    "missing_field_detail",
    "fields_in_detail",
]

READ_ERROR_REASONS = (
    "malformed_json",
    "missing_text_field",
    "non_string_text_field",
    "null_text",
    "invalid_utf8",
    "corrupt_stream",
    "empty_file",
    "unreadable_file",
    "unreadable_folder",
    "document_too_large",
)

# A batch is closed at this much text even below ``batch_rows``: a batch of 1024 web pages of
# a few MB each would otherwise hold gigabytes at once.
MAX_BATCH_TEXT_BYTES = 64 << 20


@dataclass(frozen=True, order=True)
class Task:
    """One unit of input work: a whole file, or a byte range of a big plain line-based file.

    Tasks are numbered (``index``) in a stable order: the order of the inputs, files of a folder
    or glob sorted, the ranges of one file in byte order. A range owns the lines that *start*
    inside ``[start, end)``; ``end=None`` means the end of the file.
    """

    index: int
    path: str
    start: int = 0
    end: Optional[int] = None


@dataclass(frozen=True)
class ReadError:
    """One input unit that could not be read; it becomes one line of ``OUT/errors.jsonl``.

    ``location`` is ``"line N"``, ``"record N"`` or ``"row N"`` (1-based), or ``""`` for a whole
    file. ``detail`` says what was wrong and never quotes the document (it may hold PII).
    """

    path: str
    location: str
    reason: str
    detail: str

    def __post_init__(self) -> None:
        if self.reason not in READ_ERROR_REASONS:
            raise InvalidArgumentError(f"unknown read error reason {self.reason!r}; expected one of {READ_ERROR_REASONS}")


@dataclass(frozen=True)
class ReaderOptions:
    """How inputs are read. See the module docstrings of each format for the details."""

    text_field: str = "text"
    id_field: str = "id"
    split: str = "none"  # .txt only: "none" (one document per file) | "lines" | "paragraphs"
    batch_rows: int = 1024
    max_document_bytes: int = 1 << 30
    # Tasks are the unit of parallel work and of resume: 64 MB keeps every worker busy on a
    # single big file and bounds what a crash makes redo, at a few thousand tasks per 100 GB.
    task_bytes: int = 64 << 20
    strict: bool = False
    #: Carry the input's other fields as columns after ``id`` and ``text``. A consumer that
    #: needs only those two (``tokpipe tokenize``) turns it off, and readers skip the work.
    extra_fields: bool = True

    def __post_init__(self) -> None:
        if self.split not in ("none", "lines", "paragraphs"):
            raise InvalidArgumentError(f"split must be 'none', 'lines' or 'paragraphs', not {self.split!r}")
        for name in ("batch_rows", "max_document_bytes", "task_bytes"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"{name} must be at least 1, not {getattr(self, name)}")


class ErrorSink:
    """Reports the read errors of one task: to ``on_error``, or as a ``CorpusError`` when strict."""

    def __init__(self, path: str, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> None:
        self.path = path
        self.strict = options.strict
        self.on_error = on_error
        self.reported = 0

    def report(self, location: str, reason: str, detail: str) -> None:
        # One line, whatever the underlying exception said: errors.jsonl and the strict message
        # are both read line by line.
        detail = " ".join(detail.split())
        error = ReadError(path=self.path, location=location, reason=reason, detail=detail)
        if self.strict:
            where = f"{self.path}, {location}" if location else self.path
            raise CorpusError(f"{where}: {reason}: {detail}")
        self.reported += 1
        self.on_error(error)


# What the detail of a ``missing_text_field`` error lists of the fields the record (or the
# file) has: enough to see a misnamed text field, never a record's worth of names.
_LISTED_FIELDS = 20
_FIELD_NAME_CHARS = 40
_FIELDS_LISTED = re.compile(r"; fields: (\[.*\])(?: and (\d+) more)?$")


def missing_field_detail(problem: str, names: Iterable[str]) -> str:
    """The detail of a ``missing_text_field`` error: ``problem`` and the fields found instead,
    as a JSON list (``no field 'content'; fields: ["id", "text"]``), so that the end of a run
    that read nothing can say which field was meant (:func:`fields_in_detail`). Names only,
    never values; at most 20, each cut at 40 characters."""
    names = list(names)
    shown = [name if len(name) <= _FIELD_NAME_CHARS else name[:_FIELD_NAME_CHARS - 3] + "..."
             for name in names[:_LISTED_FIELDS]]
    more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
    return f"{problem}; fields: {json.dumps(shown, ensure_ascii=False)}{more}"


def fields_in_detail(detail: str) -> tuple[list[str], int]:
    """The fields a :func:`missing_field_detail` lists, and how many more it left out (an
    empty list for a detail without them)."""
    found = _FIELDS_LISTED.search(detail)
    if found is None:
        return [], 0
    try:
        names = json.loads(found.group(1))
    except ValueError:
        return [], 0
    return [str(n) for n in names], int(found.group(2) or 0)


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``; raises ``UnicodeEncodeError`` on a lone surrogate.

    ASCII text is the common case and needs no copy to be measured.
    """
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8"))


def id_to_string(value: Any) -> Optional[str]:
    """An input id as a string: strings as they are, numbers printed, anything else as JSON.

    ``None`` (a null or absent id) stays ``None`` so the caller can make one up.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class BatchBuilder:
    """Accumulates documents (id, text, extra fields) and hands out record batches.

    A batch closes at ``batch_rows`` documents or :data:`MAX_BATCH_TEXT_BYTES` of text. Extra
    fields become columns after ``id`` and ``text``, in order of first appearance within the
    batch, by the batch rule of :mod:`tokpipe.pipeline.fields` (types inferred by pyarrow;
    mixed scalars as strings, other clashes and values nested too deeply as JSON text), so no
    record's data is lost. An extra field named ``id`` or ``text`` (possible when ``id_field`` or
    ``text_field`` name other fields) is carried as ``input_id`` / ``input_text``.

    Documents come one at a time (:meth:`add`) or as ready Arrow columns (:meth:`add_columns`,
    what a reader's Rust fast path produces); a batch keeps them in the order they came.
    """

    def __init__(self, batch_rows: int) -> None:
        self.batch_rows = batch_rows
        self.ids: list[str] = []
        self.texts: list[str] = []
        # Arrow columns already built: (ids, texts), the documents before `ids`/`texts`.
        self._columns: list[tuple[pa.Array, pa.Array]] = []
        self.extras: list[Optional[dict[str, Any]]] = []
        self.has_extras = False
        self.rows = 0
        self.text_bytes = 0

    @property
    def room(self) -> tuple[int, int]:
        """(documents, text bytes) the open batch takes before it closes; both at least 1."""
        return self.batch_rows - self.rows, MAX_BATCH_TEXT_BYTES - self.text_bytes

    def add(self, doc_id: str, text: str, text_bytes: int, extras: Optional[dict[str, Any]] = None) -> Optional[pa.RecordBatch]:
        """Adds one document; returns a full batch when this document closed one."""
        self.ids.append(doc_id)
        self.texts.append(text)
        self.extras.append(extras or None)
        self.has_extras = self.has_extras or bool(extras)
        self.rows += 1
        self.text_bytes += text_bytes
        return self._full()

    def add_columns(self, ids: pa.Array, texts: pa.Array, text_bytes: int,
                    extras: Optional[list[Optional[dict[str, Any]]]] = None) -> Optional[pa.RecordBatch]:
        """Adds documents given as string columns (no more than :attr:`room` allows, past
        the document that fills it); returns a full batch when they closed one."""
        if not len(ids):
            return None
        self._close_lists()
        self._columns.append((ids, texts))
        if extras is None:
            self.extras.extend([None] * len(ids))
        else:
            self.extras.extend(extras)
            self.has_extras = self.has_extras or any(extras)
        self.rows += len(ids)
        self.text_bytes += text_bytes
        return self._full()

    def _full(self) -> Optional[pa.RecordBatch]:
        if self.rows >= self.batch_rows or self.text_bytes >= MAX_BATCH_TEXT_BYTES:
            return self.flush()
        return None

    def _close_lists(self) -> None:
        if self.ids:
            self._columns.append((pa.array(self.ids, type=pa.string()), pa.array(self.texts, type=pa.string())))
            self.ids, self.texts = [], []

    def flush(self) -> Optional[pa.RecordBatch]:
        """The documents added since the last batch, as a batch; ``None`` when there are none."""
        if not self.rows:
            return None
        self._close_lists()
        columns: dict[str, pa.Array] = {"id": _concat_strings([i for i, _ in self._columns]),
                                        "text": _concat_strings([t for _, t in self._columns])}
        if self.has_extras:
            columns.update(_extra_columns(self.extras))
        self._columns, self.extras = [], []
        self.has_extras = False
        self.rows = 0
        self.text_bytes = 0
        return pa.RecordBatch.from_pydict(columns)


def _concat_strings(parts: list[pa.Array]) -> pa.Array:
    """One ``string`` column of ``parts`` (``string`` or ``large_string``)."""
    parts = [p if p.type == pa.string() else p.cast(pa.string()) for p in parts]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _extra_columns(rows: list[Optional[dict[str, Any]]]) -> dict[str, pa.Array]:
    """The batch's extra fields as columns, in order of first appearance (the batch rule of
    :mod:`tokpipe.pipeline.fields`)."""
    names: dict[str, None] = {}  # an ordered set: first appearance order
    for row in rows:
        if row:
            names.update(dict.fromkeys(row))
    return {f"input_{name}" if name in ("id", "text") else name: field_column([row.get(name) if row else None for row in rows])
            for name in names}
