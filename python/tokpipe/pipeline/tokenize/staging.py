"""Phase 1's staging (``writers.ids_staging``): how a task stages its documents
(:class:`IdsStaging`, the strategy the executor is given) and how phase 2 reads them back in
place (:func:`staged_batches`, :func:`staged_documents`): the token ids stay in the ids files,
read through memory maps or straight into the writers' buffers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokpipe.errors import PipelineError
from tokpipe.pipeline import fs
from tokpipe.pipeline.documents import ID
from tokpipe.pipeline.engines.state import RunState
from tokpipe.pipeline.engines.units import STAGING_SHARD, Staging, StagingWriter, staging_writer
from tokpipe.pipeline.kernels import numpy_of
from tokpipe.pipeline.stages.tokenize import INPUT_IDS, LENGTH
from tokpipe.pipeline.writers.ids_staging import IdsStagingWriter

__all__ = ["IdsStaging", "StagedTask", "StagedBatch", "staged_batches", "staged_documents", "large_lists"]


class IdsStaging(Staging):
    """A task's token ids appended raw to its process's ids file, its documents' ``id`` and
    ``length`` (and rejected documents) in Arrow IPC files; the marker records the byte range
    of its ids (``ids``). A marker without that range (a tokpipe that staged ids in Arrow
    files), or whose range runs past the end of its ids file (a power loss after the marker:
    the file is append-only, so later tasks may have made it longer, never shorter), is
    redone."""

    def writers(self, state: RunState, k: int, task: int) -> tuple[StagingWriter, StagingWriter]:
        return (IdsStagingWriter(state.staging_dir(k, "kept"), task, STAGING_SHARD),
                staging_writer(state.staging_dir(k, "rejected"), task, "arrow"))

    def marker(self, kept: StagingWriter) -> dict[str, Any]:
        assert isinstance(kept, IdsStagingWriter)
        return {"ids": kept.ids_range}

    def accepts(self, state: RunState, k: int, summary: dict[str, Any]) -> bool:
        ids = summary.get("ids")
        if ids is None:
            return False
        try:
            return fs.size(state.staging_dir(k, "kept") / ids["file"]) >= ids["end"]
        except OSError:
            return False


@dataclass(frozen=True)
class StagedTask:
    """What phase 1 staged for one task (``writers.ids_staging``): its documents' ids and
    lengths (Arrow IPC files, in order) and the byte range [start, end) of its token ids in
    an ids file (None when it kept no document)."""

    meta: list[Path]
    ids: Path | None
    start: int
    end: int

    @staticmethod
    def of(state: RunState, summary: dict[str, Any]) -> StagedTask:
        """A task's staging, from its marker in segment 0."""
        ids = summary["ids"]
        return StagedTask(state.staged_files(0, summary, "kept"),
                           state.staging_dir(0, "kept") / ids["file"] if ids["end"] > ids["start"] else None,
                           ids["start"], ids["end"])


@dataclass
class StagedBatch:
    """A staged record batch, for reading its documents' ids in place: its ids file (a
    number in the run's list of ids files), the byte position in that file of its first id,
    its documents' token counts and ids. The counts and ids are views of the memory-mapped
    staging file (page cache, which the kernel can drop): a list of every batch of a run
    then holds no memory of its own per document, where int64 offsets did (8 bytes a
    document, 46 MB at 5.7M documents)."""

    file: int
    base: int
    lengths: pa.Array
    doc_ids: pa.Array

    @property
    def offsets(self) -> np.ndarray:
        """Its int64 list offsets (from 0), computed anew at each call."""
        offsets = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(numpy_of(self.lengths), out=offsets[1:])
        return offsets


def staged_batches(tasks: list[StagedTask], itemsize: int) -> tuple[list[Path], list[StagedBatch]]:
    """The run's ids files, and every staged batch in input order. Only ids and lengths are
    read (a few bytes a document); the token ids stay on disk."""
    files: dict[Path, int] = {}
    batches = []
    for task in tasks:
        base = task.start
        number = files.setdefault(task.ids, len(files)) if task.ids is not None else -1
        for path in task.meta:
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                staged = StagedBatch(number, base, batch.column(LENGTH), batch.column(ID))
                batches.append(staged)
                base += int(numpy_of(staged.lengths).sum(dtype=np.int64)) * itemsize
        if base != task.end:
            raise PipelineError(f"{task.meta}: the staged lengths do not add up to the ids staged ({task.ids})")
    return list(files), batches


def staged_documents(tasks: list[StagedTask], itemsize: int) -> Iterator[pa.RecordBatch]:
    """The staged documents (``id``, ``input_ids``), task after task, as record batches over
    memory maps of the staging files: nothing is decoded or copied to read them."""
    files, batches = staged_batches(tasks, itemsize)
    maps = [pa.memory_map(str(path)) for path in files]
    for batch in batches:
        offsets = batch.offsets
        values = maps[batch.file].read_at(int(offsets[-1]) * itemsize, batch.base) if batch.file >= 0 \
            else pa.py_buffer(b"")
        yield pa.record_batch([batch.doc_ids, large_lists(offsets, values, itemsize)], names=[ID, INPUT_IDS])


def large_lists(offsets: Any, values: Any, itemsize: int) -> pa.LargeListArray:
    """A large_list array over int64 ``offsets`` (from 0) and flat unsigned ``values`` of
    ``itemsize`` bytes, both objects with the buffer protocol (numpy arrays, ``OwnedBuffer``),
    not copied."""
    value_type = pa.from_numpy_dtype(np.dtype(f"uint{8 * itemsize}"))
    offsets, values = pa.py_buffer(offsets), pa.py_buffer(values)
    flat = pa.Array.from_buffers(value_type, values.size // value_type.byte_width, [None, values])
    return pa.LargeListArray.from_buffers(pa.large_list(value_type), offsets.size // 8 - 1, [None, offsets],
                                          children=[flat])
