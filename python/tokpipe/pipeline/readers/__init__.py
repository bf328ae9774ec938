"""Streaming document readers: text, JSON Lines, Parquet and WARC files in, Arrow batches out.

:func:`plan_tasks` turns the inputs into numbered :class:`Task` s; :func:`read_task` streams
one task as record batches whose first columns are ``id`` and ``text``. Input that cannot be
read never stops the run: each bad unit is one :class:`ReadError` handed to ``on_error``
(or a ``CorpusError`` under ``ReaderOptions(strict=True)``).
"""

from __future__ import annotations

from .base import READ_ERROR_REASONS, ReadError, ReaderOptions, Task
from .tasks import KNOWN_SUFFIXES, format_of, plan_tasks, read_task

__all__ = [
    "Task",
    "ReadError",
    "READ_ERROR_REASONS",
    "ReaderOptions",
    "plan_tasks",
    "read_task",
    "format_of",
    "KNOWN_SUFFIXES",
]
