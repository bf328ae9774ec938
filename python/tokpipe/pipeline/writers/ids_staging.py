"""Staging for ``tokpipe tokenize``: token ids appended raw to one file per process, the
rest of each document (``id``, ``length``) in small Arrow IPC files per task.

Why raw and per process: a Megatron ``.bin`` is exactly the ids of its documents back to
back, and Megatron's ``.idx`` points at each document by byte offset, in any order. When one
process staged every task in order (one worker, the usual case on a machine whose cores the
encoder already takes), its ids file *is* the ``.bin`` of the unshuffled documents, and the
shuffle only has to reorder the pointers: the ``.bin`` is published as a hard link, and the
ids are written once instead of twice (staging, then ``.bin``). Other layouts (several
workers, a resumed run, a validation split, truncation) copy the ranges into place in task
order, so the published bytes never depend on how the work was scheduled.

The file is append-only: each process opens a new one (a random name) the first time it
stages a task, and never reopens an old one, so a ``.bin`` linked to it cannot change. A task
records the byte range its ids took (``IdsStagingWriter.ids_range``) in its marker, written
after the bytes; a range past the end of the file (a power loss after the marker) makes the
resume redo the task. Bytes of a task that failed stay in the file, unreferenced.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa

from tokpipe.pipeline.kernels import list_buffers
from tokpipe.pipeline.writers.parquet import ParquetShardWriter, ShardInfo

__all__ = ["IdsStagingWriter", "IDS_PREFIX", "close_ids_files"]

IDS_PREFIX = "ids-"
_COLUMN = "input_ids"

# This process's open ids file per staging folder: (descriptor, file name).
_open_files: dict[str, tuple[int, str]] = {}


def _ids_file(directory: Path) -> tuple[int, str]:
    key = str(directory.resolve())
    if key not in _open_files:
        name = f"{IDS_PREFIX}{uuid.uuid4().hex}.bin"
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        _open_files[key] = (fd, name)
    return _open_files[key]


def close_ids_files() -> None:
    """Closes this process's ids files: the next task staged starts a new one."""
    while _open_files:
        _, (fd, _) = _open_files.popitem()
        os.close(fd)


class IdsStagingWriter:
    """A task's kept documents: ``input_ids`` (a large_list column) appended to the process's
    ids file, the other columns to Arrow IPC shards (``ParquetShardWriter``'s interface)."""

    def __init__(self, directory: Path, task: int, shard_size: int) -> None:
        self._meta = ParquetShardWriter(directory, task, shard_size, file_format="arrow", checksum=False)
        self._fd, self._name = _ids_file(directory)
        self._start = os.lseek(self._fd, 0, os.SEEK_END)
        self._end = self._start

    @property
    def ids_range(self) -> dict[str, object]:
        """The ids file and the byte range [start, end) this task's ids take in it."""
        return {"file": self._name, "start": self._start, "end": self._end}

    def write(self, batch: pa.RecordBatch) -> list[ShardInfo]:
        offsets, values = list_buffers(batch.column(_COLUMN))
        view = memoryview(values[offsets[0]:offsets[-1]]).cast("B")
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
            self._end += written
        return self._meta.write(batch.drop_columns([_COLUMN]))

    def close(self) -> list[ShardInfo]:
        return self._meta.close()

    def abort(self) -> None:
        self._meta.abort()
