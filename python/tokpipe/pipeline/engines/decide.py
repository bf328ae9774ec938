"""A global stage's phase: its keys read back from every task's staging, its decision (by the
stage, or by the engine's distributed join), and its verdict on each task's documents, which
the next segment applies (``engines.units``).

The keys are read task by task (:class:`LazyColumns`) and the ids of the kept copies only
from the tasks that hold them (:func:`gather`), so the phase never holds the documents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe.pipeline import fs
from tokpipe.pipeline.allocator import release_memory
from tokpipe.pipeline.base import DUPLICATE_OF, DecideContext, Decision, GlobalStage, StageStats
from tokpipe.pipeline.config import StageSpec
from tokpipe.pipeline.documents import ID
from tokpipe.pipeline.engines.state import RunState
from tokpipe.pipeline.engines.units import STAGED_KEY
from tokpipe.pipeline.kernels import arrow_of
from tokpipe.pipeline.readers import Task
from tokpipe.storage import Location

__all__ = ["decide", "LazyColumns", "gather", "read_column", "read_fixed_column", "DecideStage"]

#: An engine's decision of a global stage: (stage, keys, context, each task's staged files,
#: each task's documents) -> ``decide``'s answer.
DecideStage = Callable[[GlobalStage, Sequence[pa.Array], DecideContext, list[list[Location]], list[int]], list[Any]]


def decide(state: RunState, k: int, tasks: list[Task], spec: StageSpec, progress: Callable[[str, int, int], None],
           decide_stage: DecideStage) -> None:
    """Global stage ``k`` (``spec``) decides over every task's staged keys, and its verdict on
    each task's documents is written: ``duplicate_of`` (the id of the document kept in its
    place, null to keep it), the stage's ``cluster_column`` if it has one, and its decision
    columns. Nothing when it has decided already. ``progress(phase, done, total)`` reports
    the phases, in units."""
    if state.decided(k):
        return
    progress(f"{spec.run_name}: deciding", 0, 1)
    stage = spec.build()
    assert isinstance(stage, GlobalStage)
    summaries = [state.summary(k, t.index) for t in tasks]
    files = [state.staged_files(k, summary, "kept") for summary in summaries]
    keys = LazyColumns(files, STAGED_KEY, stage.key_type())
    scratch = state.decision_scratch(k)
    fs.remove_tree(scratch)
    sizes = [summary["kept"] for summary in summaries]

    def report(phase: str, done: int, total: int) -> None:
        progress(f"{spec.run_name}: {phase}", done, total)

    def column(name: str, positions: np.ndarray) -> pa.Array:
        return gather(files, sizes, name, positions)

    decided = decide_stage(stage, keys, DecideContext(scratch, report, column), files, sizes)
    fs.remove_tree(scratch)
    release_memory()
    decisions = [d if isinstance(d, Decision) else Decision(np.asarray(d)) for d in decided]
    del keys, decided
    keepers = [d.keeper for d in decisions]
    bounds = np.cumsum([0, *[len(x) for x in keepers]])
    # Nothing here is a copy of every document's keeper: what grows with the corpus is the
    # duplicates (the documents kept in another's place) and their keepers.
    targets = np.concatenate([kp[kp != np.arange(bounds[i], bounds[i + 1])] for i, kp in enumerate(keepers)]
                             ).astype(np.int64) if files else np.zeros(0, dtype=np.int64)
    needed, counts = np.unique(targets, return_counts=True)
    del targets
    # Kept copies that have duplicates: a keeper named by two documents or more, counting
    # its own name for itself (a keeper is usually its own).
    clustered = np.zeros(0, dtype=np.int64)
    if stage.cluster_column is not None:
        for i, kp in enumerate(keepers):
            lo, hi = np.searchsorted(needed, bounds[i:i + 2])
            counts[lo:hi] += kp[needed[lo:hi] - bounds[i]] == needed[lo:hi]
        clustered = needed[counts > 1]
    del counts
    # The ids of the needed positions, in the order of `needed` (sorted), looked up by
    # searchsorted and gathered with `take`: no Python object per document.
    needed_ids = gather(files, [len(x) for x in keepers], ID, needed)

    def ids_of(positions: np.ndarray, wanted: np.ndarray) -> pa.Array:
        """The id at each position where `wanted`, else null."""
        slots = np.searchsorted(needed, positions[wanted])
        index = np.zeros(len(positions), dtype=np.int64)
        index[wanted] = slots
        # Built from its buffers (the nulls: a bitmap of `wanted`): pa.array would import pandas.
        indices = pa.Array.from_buffers(pa.int64(), len(index), [pa.py_buffer(np.packbits(wanted, bitorder="little")),
                                                                  pa.py_buffer(index)], int(len(index) - wanted.sum()))
        return needed_ids.take(indices)

    stats = StageStats(spec.run_name)
    for i, t in enumerate(tasks):
        is_dup = keepers[i] != np.arange(bounds[i], bounds[i + 1])
        columns = {DUPLICATE_OF: ids_of(keepers[i], is_dup)}
        if stage.cluster_column is not None:
            columns[stage.cluster_column] = ids_of(keepers[i], np.isin(keepers[i], clustered))
        columns.update(decisions[i].columns)
        state.write_verdicts(k, t.index, pa.record_batch(columns))
        stats.input += len(is_dup)
        stats.dropped["duplicate"] += int(is_dup.sum())
    stats.dropped.update(stage.stats.dropped)
    stats.extra.update(stage.stats.extra)
    stats.kept = stats.input - sum(stats.dropped.values())
    state.write_decision(k, stats.as_dict())
    # The workers that apply the verdicts come next, beside this process.
    del decisions, keepers, needed, needed_ids, clustered
    release_memory()
    progress(f"{spec.run_name}: deciding", 1, 1)


class LazyColumns(Sequence[pa.Array]):
    """One column of every task's staging shards, each task's read only when asked for, so
    a global stage can stream the keys instead of holding all of them; or a row group at a
    time (``pieces``, the ``PiecewiseKeys`` a stage may stream instead of a task's)."""

    def __init__(self, files: list[list[Location]], column: str, kind: pa.DataType) -> None:
        self.files, self.column, self.kind = files, column, kind

    def __len__(self) -> int:
        return len(self.files)

    @overload
    def __getitem__(self, i: int) -> pa.Array: ...

    @overload
    def __getitem__(self, i: slice) -> list[pa.Array]: ...

    def __getitem__(self, i: int | slice) -> pa.Array | list[pa.Array]:
        if isinstance(i, slice):
            return [read_column(f, self.column, self.kind) for f in self.files[i]]
        return read_column(self.files[i], self.column, self.kind)

    def __iter__(self) -> Iterator[pa.Array]:
        # Not Sequence's own, whose generator keeps the task it yielded last while it reads
        # the next: two tasks' keys at once (seen: 2 x 130 MB in the minhash decide).
        return (self[i] for i in range(len(self)))

    def pieces(self, task: int) -> Iterator[pa.Array]:
        """Task ``task``'s column a row group at a time, in order (``PiecewiseKeys``)."""
        for f in self.files[task]:
            with fs.parquet_file(f) as shard:
                for group in range(shard.num_row_groups):
                    yield from shard.read_row_group(group, columns=[self.column]).column(self.column).chunks


def gather(files: list[list[Location]], sizes: list[int], column: str, positions: np.ndarray) -> pa.Array:
    """One column's values at sorted global ``positions`` (task after task, ``sizes``
    documents each), reading only the row groups that hold them, one at a time."""
    bounds = np.cumsum([0, *sizes])
    parts = []
    for i, task_files in enumerate(files):
        here = positions[(positions >= bounds[i]) & (positions < bounds[i + 1])] - bounds[i]
        if not len(here):
            continue
        start = 0
        for f in task_files:
            with fs.parquet_file(f) as shard:
                for group in range(shard.num_row_groups):
                    rows = shard.metadata.row_group(group).num_rows
                    lo, hi = np.searchsorted(here, [start, start + rows])
                    if hi > lo:
                        values = shard.read_row_group(group, columns=[column]).column(column)
                        # arrow_of, not pa.array, which would import pandas (kernels.numpy_of).
                        parts.extend(values.take(arrow_of(here[lo:hi] - start)).chunks)
                    start += rows
    return pa.concat_arrays(parts) if parts else pa.nulls(0, pa.string())  # an empty one, without pa.array


def read_column(files: list[Location], column: str, kind: pa.DataType) -> pa.Array:
    """One column of a task's staging shards, in order, as one array. A column of fixed-size
    binary values (the dedup stages' keys) is copied row group by row group into one buffer,
    so reading it holds little more than the result; other columns are read whole and
    concatenated (twice their size at the peak)."""
    if pa.types.is_fixed_size_binary(kind):
        fixed = read_fixed_column(files, column, kind)
        if fixed is not None:
            return fixed
    parts = [fs.read_parquet(f, columns=[column]).column(column) for f in files]
    chunks = [c for part in parts for c in part.chunks]
    return pa.concat_arrays(chunks) if chunks else pa.nulls(0, kind)


def read_fixed_column(files: list[Location], column: str, kind: pa.FixedSizeBinaryType) -> pa.Array | None:
    """``read_column`` of a fixed-size binary column without nulls, a row group at a time
    into one preallocated buffer; None when a value is null."""
    width = kind.byte_width
    total = 0
    for f in files:
        with fs.parquet_file(f) as shard:
            total += shard.metadata.num_rows
    out = np.empty(total * width, dtype=np.uint8)
    start = 0
    for f in files:
        with fs.parquet_file(f) as shard:
            for group in range(shard.num_row_groups):
                for chunk in shard.read_row_group(group, columns=[column]).column(column).chunks:
                    if chunk.null_count:
                        return None
                    size = len(chunk) * width
                    out[start:start + size] = np.frombuffer(chunk.buffers()[1], dtype=np.uint8)[
                        chunk.offset * width:chunk.offset * width + size]
                    start += size
    return pa.FixedSizeBinaryArray.from_buffers(kind, total, [None, pa.py_buffer(out)])
