"""Work units: what an engine runs, in its own process or in a worker (top-level functions, so
that any engine can ship them), and how a unit stages what it writes.

* :func:`run_segment_task`: one input task through one segment of the stage list (the stages
  between two global stages), from its input (the reader, or the previous segment's staged
  documents and the verdicts of the global stage between) to its staged kept and rejected
  documents and its marker.
* :func:`pack_group`: one worker group's final shards, copied from the staging (the rejected
  ones, with ``rejected_by_stage``, into one folder per stage: ``RunState.rejected_dir``).
* :class:`Staging`: how a segment task stages its documents; a strategy the caller passes
  in. :class:`ParquetStaging` is ``tokpipe clean``'s; ``tokpipe tokenize`` has its own.

Every unit writes its files first and its marker last (``RunState``), so a unit is either
wholly there or redone.

A document a stage drops is staged in rejected/ as it was then, except that it first goes
through every later stage that rewrites rejected documents (``Stage.rewrites_rejected``:
``pii`` with ``scrub_rejected``, its default), so rejected/ holds no personal data the kept
shards would not. With ``rejected_by_stage`` it also carries :data:`STAGED_PLACE`, the place in
the config of the stage that dropped it (the ``stage`` column names its type, which two stages
may share), by which the pack step sorts it into that stage's folder.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe import storage
from tokpipe.pipeline import fs
from tokpipe.pipeline.base import DUPLICATE_OF, GlobalStage, Stage, StageStats, split_rejected
from tokpipe.pipeline.config import PipelineConfig, StageSpec
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.engines.state import READ_STATS, RunState
from tokpipe.pipeline.fields import conform
from tokpipe.pipeline.kernels import arrow_of, flags_of, numpy_of
from tokpipe.pipeline.readers import ReaderOptions, ReadError, Task, meter, read_task
from tokpipe.pipeline.readers.base import MAX_BATCH_TEXT_BYTES
from tokpipe.pipeline.readers.parquet import parquet_batches
from tokpipe.pipeline.writers import JsonlShardWriter, ParquetShardWriter, ShardInfo
from tokpipe.pipeline.writers.manifest import DATA_DIR
from tokpipe.storage import Location

__all__ = ["run_segment_task", "pack_group", "Staging", "ParquetStaging", "StagingWriter", "staging_writer",
           "segments", "rewriters", "task_bytes", "task_label", "prefetched", "STAGED_KEY", "STAGED_PLACE",
           "STAGING_SHARD"]

#: The column a segment's kept staging gets for the global stage that ends it: its keys.
STAGED_KEY = "_tokpipe_key"
#: The column a staged rejected document gets with ``rejected_by_stage``: the place in the
#: config's stage list of the stage that dropped it (never written to the final shards).
STAGED_PLACE = "_tokpipe_place"
#: Staging shards are per task; this only bounds a file, it is not a unit of work.
STAGING_SHARD = 1 << 30
# Staging files are written once and read once: lz4 costs a fraction of zstd's time there.
_STAGING_CODEC = "lz4"
# Rows per batch when the pack step copies staging into the final shards (bytes bound them
# too: see `parquet_batches`); pyarrow's own default.
_PACK_ROWS = 65_536
T = TypeVar("T")

#: A segment as work units get it: its document stages and the global stage that ends it
#: (or None), each as :meth:`StageSpec.to_wire` gives it.
SegmentSpecs = tuple[list[dict[str, Any]], Optional[dict[str, Any]]]


class StagingWriter(Protocol):
    """What a work unit writes a task's staged documents with (``ParquetShardWriter``'s
    interface): batches in, the files finished so far out."""

    def write(self, batch: pa.RecordBatch) -> list[ShardInfo]: ...

    def close(self) -> list[ShardInfo]: ...

    def abort(self) -> None: ...


class Staging:
    """How a segment task stages its documents. The engine runs any staging alike: the
    task's marker, written last, commits whatever the writers wrote."""

    def writers(self, state: RunState, k: int, task: int) -> tuple[StagingWriter, StagingWriter]:
        """The writers of segment ``k``'s kept and rejected documents of ``task``."""
        raise NotImplementedError

    def marker(self, kept: StagingWriter) -> dict[str, Any]:
        """What the task's marker records besides the files and their sizes."""
        return {}

    def accepts(self, state: RunState, k: int, summary: dict[str, Any]) -> bool:
        """Whether a task's marker is one this staging resumes from (beyond the sizes and
        magic bytes of the files it lists, which ``RunState.committed`` checks)."""
        return True


class ParquetStaging(Staging):
    """``tokpipe clean``'s staging: kept and rejected documents in lz4 Parquet files, which
    the next segment and the pack step read back a row group at a time."""

    def writers(self, state: RunState, k: int, task: int) -> tuple[StagingWriter, StagingWriter]:
        return (staging_writer(state.staging_dir(k, "kept"), task),
                staging_writer(state.staging_dir(k, "rejected"), task))


def staging_writer(directory: Location, task: int, file_format: str = "parquet") -> ParquetShardWriter:
    """A staging file writer: lz4 Parquet, or (``"arrow"``) uncompressed Arrow IPC for a
    consumer that memory-maps them. No sha256 and no fsync: nothing checks staging files
    against a digest, and the task's marker commits them (a killed run redoes the tasks
    without one)."""
    if file_format == "arrow":
        return ParquetShardWriter(directory, task, STAGING_SHARD, file_format="arrow", checksum=False)
    return ParquetShardWriter(directory, task, STAGING_SHARD, compression=_STAGING_CODEC, checksum=False,
                              large_columns=(TEXT,))


def segments(config: PipelineConfig) -> list[tuple[list[StageSpec], StageSpec | None]]:
    """The stage list cut after each global stage: (document stages, the global stage or None)."""
    cut: list[tuple[list[StageSpec], StageSpec | None]] = []
    current: list[StageSpec] = []
    for spec in config.stages:
        if spec.stage_class().scope == "global":
            cut.append((current, spec))
            current = []
        else:
            current.append(spec)
    cut.append((current, None))
    return cut


def rewriters(config: PipelineConfig) -> list[tuple[int, dict[str, Any]]]:
    """The stages that rewrite the documents rejected before them (``Stage.rewrites_rejected``),
    with their place in the stage list. Only stages whose class can say yes are built here:
    building others may load a model."""
    return [(place, spec.to_wire()) for place, spec in enumerate(config.stages)
            if spec.stage_class().rewrites_rejected is not Stage.rewrites_rejected and spec.build().rewrites_rejected()]


def task_bytes(task: Task, file_size: int | None = None) -> int:
    """The task's bytes of input (what progress counts). ``file_size``: its file's size as
    the run recorded it, which spares a ``stat`` (a request, for a file in a bucket)."""
    try:
        end = task.end if task.end is not None else file_size if file_size is not None else \
            storage.version(task.path)[0]
    except OSError:
        return 0
    return max(0, end - task.start)


def task_label(task: Task) -> str:
    """A task as messages name it."""
    where = "" if task.start == 0 and task.end is None else f", bytes {task.start:,}-{task.end or 'end'}"
    return f"task {task.index} ({task.path}{where})"


def _with_rejection_columns(rejected: pa.RecordBatch) -> pa.RecordBatch:
    """Every rejected batch gets the same rejection columns, so rejected shards share a schema."""
    if DUPLICATE_OF not in rejected.schema.names:
        rejected = rejected.append_column(DUPLICATE_OF, pa.nulls(rejected.num_rows, type=pa.string()))
    return rejected


def _global_stage(spec: dict[str, Any]) -> GlobalStage:
    built = StageSpec.from_wire(spec).build()
    assert isinstance(built, GlobalStage)
    return built


def run_segment_task(state: RunState, k: int, task: Task, segment: SegmentSpecs,
                     previous_global: dict[str, Any] | None, reader: dict[str, Any], staging: Staging,
                     first: int = 0, rewriters: Sequence[tuple[int, dict[str, Any]]] = (),
                     mark_places: bool = False) -> dict[str, Any]:
    """Segment ``k`` of one task: its input (the reader, or segment k-1 and its verdicts),
    the segment's document stages, and the keys of the global stage that ends it. Batches
    stream through to staging files (``staging``); nothing holds a whole task in memory.
    The task's marker, written last, commits them; it is returned.

    ``first`` is the place of the segment's first stage in the config's stage list, and
    ``rewriters`` the stages (place, spec) that rewrite the documents rejected before them
    (``Stage.rewrites_rejected``: ``pii`` with ``scrub_rejected``): a document a stage drops
    goes through every such stage placed after that stage, wherever it is in the pipeline,
    before it is staged in rejected/. ``mark_places`` (``rejected_by_stage``): each staged
    rejected document gets :data:`STAGED_PLACE`, that stage's place."""
    stage_specs, global_spec = segment
    stages: list[Stage] = [StageSpec.from_wire(s).build() for s in stage_specs]
    later: list[tuple[int, Stage]] = [(place, StageSpec.from_wire(s).build()) for place, s in rewriters]
    closing = _global_stage(global_spec) if global_spec is not None else None
    stats: dict[str, dict[str, Any]] = {}
    errors: list[ReadError] = []
    kept_writer, rejected_writer = staging.writers(state, k, task.index)
    counts = {"kept": 0, "rejected": 0}
    files: dict[str, list[str]] = {"kept": [], "rejected": []}
    # Each file's size, recorded in the marker: a resume checks the files against it.
    sizes: dict[str, int] = {}

    def record(kind: str, infos: Sequence[ShardInfo]) -> None:
        for info in infos:
            files[kind].append(info.name)
            sizes[f"{kind}/{info.name}"] = info.bytes

    def reject(batch: pa.RecordBatch, place: int) -> None:
        """Stages the documents that the stage at ``place`` in the config dropped."""
        for after, rewriter in later:
            if after > place:
                batch = rewriter.rewrite_rejected(batch)
        counts["rejected"] += batch.num_rows
        batch = _with_rejection_columns(batch)
        if mark_places:
            batch = batch.append_column(STAGED_PLACE, arrow_of(np.full(batch.num_rows, place, dtype=np.int32)))
        record("rejected", rejected_writer.write(batch))

    def reject_duplicates(batch: pa.RecordBatch) -> None:
        reject(batch, first - 1)  # the global stage that ended the previous segment

    def batches() -> Iterator[pa.RecordBatch]:
        if k == 0:
            options = ReaderOptions(**reader)
            read = StageStats(READ_STATS)
            for batch in prefetched(read_task(task, options, errors.append)):
                read.input += batch.num_rows
                read.kept += batch.num_rows
                yield batch
            read.input += len(errors)
            for e in errors:
                read.dropped[e.reason] += 1
            stats[READ_STATS] = read.as_dict()
            return
        previous = state.summary(k - 1, task.index)
        deciding = _global_stage(previous_global) if previous_global is not None else None
        verdicts = state.verdicts(k - 1, task.index) if deciding is not None else None
        offset = 0
        staged_rows, read_rows = int(previous.get("kept", 0)), 0
        for path in state.staged_files(k - 1, previous, "kept"):
            with fs.parquet_file(path) as shard:
                for batch in parquet_batches(shard, reader.get("batch_rows", 1024)):
                    read_rows += batch.num_rows
                    meter.report(read_rows, staged_rows)  # progress: the staged rows stand for the task's bytes
                    if STAGED_KEY in batch.schema.names:
                        batch = batch.drop_columns([STAGED_KEY])
                    if verdicts is not None and deciding is not None:
                        verdict = verdicts.slice(offset, batch.num_rows)
                        offset += batch.num_rows
                        batch = _apply_verdicts(batch, verdict, deciding, reject_duplicates)
                    if batch.num_rows:
                        yield batch

    try:
        for batch in batches():
            for place, stage in enumerate(stages, first):
                result = stage.process(batch)
                if result.rejected is not None and result.rejected.num_rows:
                    reject(result.rejected, place)
                batch = result.kept
                if not batch.num_rows:
                    break
            if batch.num_rows:
                if closing is not None:
                    batch = batch.append_column(STAGED_KEY, closing.keys(batch))
                counts["kept"] += batch.num_rows
                record("kept", kept_writer.write(batch))
        record("kept", kept_writer.close())
        record("rejected", rejected_writer.close())
    except BaseException:
        kept_writer.abort()
        rejected_writer.abort()
        raise
    for stage in stages:
        stats[stage.name] = stage.stats.as_dict()  # its name in the run (StageSpec.build)
    if k == 0:
        name, size = state.write_errors(task.index, (json.dumps(asdict(e), ensure_ascii=False) + "\n"
                                                     for e in errors))
        sizes[name] = size
    summary = {"task": task.index, "stats": stats, "errors": len(errors), **counts,
               "kept_files": files["kept"], "rejected_files": files["rejected"], "sizes": sizes,
               **staging.marker(kept_writer)}
    state.write_summary(k, task.index, summary)
    return summary


def prefetched(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """``items``, produced up to ``depth`` ahead on another thread. A reader's next batch
    (file reads, decompression, the JSON Lines parser: all of them release the GIL) is then
    made while the stages work on this one. The items and their order are the same; an
    exception reaches the consumer where the item would have, and everything the producer
    did (such as reporting read errors) is done when the last item has been taken."""
    pipe: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                pipe.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, done))
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
            put((False, error))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    producer = threading.Thread(target=produce, name="tokpipe-read", daemon=True)
    producer.start()
    try:
        while True:
            ok, item = pipe.get()
            if not ok:
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()
        producer.join()


def _apply_verdicts(batch: pa.RecordBatch, verdict: pa.Table, stage: GlobalStage,
                    reject: Callable[[pa.RecordBatch], None]) -> pa.RecordBatch:
    """Hands the decision's columns to the stage's ``revise``, then drops the documents marked
    as duplicates and those ``revise`` dropped, handing them to ``reject``. ``verdict``:
    ``duplicate_of`` (the id of the document kept in its place, or null to keep it) and the
    stage's decision columns, per document."""
    columns = {name: verdict.column(name).combine_chunks() for name in verdict.column_names if name != DUPLICATE_OF}
    duplicate_of = verdict.column(DUPLICATE_OF).combine_chunks()
    is_dup = flags_of(duplicate_of.is_valid())  # not to_numpy(), which imports pandas
    reasons: str | np.ndarray = "duplicate"
    drop = is_dup
    if columns:
        batch, own = stage.revise(batch, columns)
        if own is not None:
            own = np.asarray(own, dtype=object)
            dropped_here = own.astype(bool) & ~is_dup
            reasons = np.where(is_dup, "duplicate", own)
            drop = is_dup | dropped_here
    result = split_rejected(batch, ~drop, reasons, stage.name)
    if result.rejected is not None:
        reject(result.rejected.append_column(DUPLICATE_OF, duplicate_of.take(arrow_of(np.flatnonzero(drop)))))
    return result.kept


def pack_group(state: RunState, worker: int, tasks: list[int], segments: int, shard_size: int,
               kept_schema: pa.Schema, rejected_schema: pa.Schema, output_format: str = "parquet",
               stage_folders: Sequence[str] | None = None) -> dict[str, Any]:
    """Worker group ``worker``'s final shards: its tasks' last-segment documents in task
    order (in ``OUT/data``), and every segment's rejected documents (in ``OUT/rejected``),
    each cast to the run's one schema, in ``output_format`` (``writers.OUTPUT_FORMATS``).
    The shards' names in the summary are relative to their folder. ``stage_folders`` (with
    ``rejected_by_stage``: each config place's folder, ``state.stage_folders``): the rejected
    documents go to their stage's folder instead, in the same order, named ``STAGE/part-...``
    in the summary."""
    last = segments - 1

    def staged_files(kind: str) -> Iterator[Location]:
        for t in tasks:
            for k in (range(segments) if kind == "rejected" else [last]):
                yield from state.staged_files(k, state.summary(k, t), kind)

    def staged(kind: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for path in staged_files(kind):
            with fs.parquet_file(path) as shard:
                for batch in parquet_batches(shard, _PACK_ROWS):
                    yield conform(batch, schema)

    with _final_writer(state.out / DATA_DIR, worker, shard_size, output_format) as kept:
        if stage_folders is None:
            with _final_writer(state.rejected_dir(), worker, shard_size, output_format) as rejected:
                rejected_shards = _write_groups(rejected, _row_groups(staged("rejected", rejected_schema), shard_size))
                rejected_shards += rejected.close()
        else:
            rejected_shards = _pack_by_stage(state, worker, lambda: staged_files("rejected"),
                                             rejected_schema.append(pa.field(STAGED_PLACE, pa.int32())),
                                             stage_folders, shard_size, output_format)
        shards = _write_groups(kept, _row_groups(staged("kept", kept_schema), shard_size))
        shards += kept.close()
    summary = {"worker": worker, "tasks": tasks, "shards": [asdict(s) for s in shards],
               "rejected": [asdict(s) for s in rejected_shards]}
    state.write_pack(worker, summary)
    return summary


def _pack_by_stage(state: RunState, worker: int, files: Callable[[], Iterator[Location]], schema: pa.Schema,
                   folders: Sequence[str], shard_size: int, output_format: str) -> list[ShardInfo]:
    """The rejected documents of the staging ``files`` (with :data:`STAGED_PLACE`), cast to
    ``schema``, written in their order to the folder of the stage that dropped them
    (``folders[place]``); a stage that dropped nothing gets no folder. Returns the shards,
    named from ``OUT/rejected``. One stage after another, each a pass that reads only its
    row groups (a staged row group is one stage's), so one pending row group is held, not
    one per stage (up to 64 MiB each: 360 to 620 MiB a worker at 10M documents)."""
    shards: list[ShardInfo] = []
    for place, folder in enumerate(folders):
        with ExitStack() as stack:
            writer: ParquetShardWriter | JsonlShardWriter | None = None
            groups, infos = _RowGroups(shard_size), []
            for batch in _staged_place(files(), schema, place):
                if writer is None:
                    writer = stack.enter_context(_final_writer(state.rejected_dir(folder), worker, shard_size,
                                                               output_format))
                infos += _write_groups(writer, groups.add(batch))
            if writer is not None:
                infos += _write_groups(writer, groups.flush()) + writer.close()
        shards += [ShardInfo(f"{folder}/{info.name}", info.rows, info.bytes, info.sha256) for info in infos]
    return shards


def _write_groups(writer: ParquetShardWriter | JsonlShardWriter, groups: Iterable[pa.RecordBatch]) -> list[ShardInfo]:
    """Writes each joined batch (a row group) of ``groups``; returns the shards completed.
    After each, Arrow's pool (mimalloc) returns its free memory to the system: it kept it,
    and a worker stepped up by a row group's worth pass after pass (278 MiB at 400k
    documents where 155 MiB was in use)."""
    shards: list[ShardInfo] = []
    for joined in groups:
        shards += writer.write(joined)
        del joined
        pa.default_memory_pool().release_unused()
    return shards


def _staged_place(files: Iterator[Location], schema: pa.Schema, place: int) -> Iterator[pa.RecordBatch]:
    """The staged rejected documents of the stage at ``place`` in ``files``, in order, cast
    to ``schema`` and without :data:`STAGED_PLACE`: the row groups without one are not read
    (their places column is, a few bytes a row)."""
    for path in files:
        with fs.parquet_file(path) as parquet:
            places = numpy_of(parquet.read(columns=[STAGED_PLACE]).column(0).combine_chunks())
            metadata = parquet.metadata
            ends = np.cumsum([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], dtype=np.int64)
            groups = np.unique(np.searchsorted(ends, np.flatnonzero(places == place), side="right")).tolist()
            del places, ends
            for batch in parquet_batches(parquet, _PACK_ROWS, groups=groups):
                batch = conform(batch, schema)
                mine = numpy_of(batch.column(STAGED_PLACE)) == place
                if not mine.any():  # a part of a large row group holding none
                    continue
                batch = batch.drop_columns([STAGED_PLACE])
                yield batch if mine.all() else batch.take(arrow_of(np.flatnonzero(mine)))


def _final_writer(directory: Location, worker: int, shard_size: int,
                  output_format: str) -> ParquetShardWriter | JsonlShardWriter:
    """The writer of a worker group's final shards in ``output_format``."""
    if output_format == "parquet":
        return ParquetShardWriter(directory, worker, shard_size, large_columns=(TEXT,))
    return JsonlShardWriter(directory, worker, shard_size, output_format=output_format)


def _row_groups(batches: Iterator[pa.RecordBatch], shard_size: int) -> Iterator[pa.RecordBatch]:
    """Consecutive batches of one schema joined into batches of up to :data:`_PACK_ROWS`
    rows and :data:`MAX_BATCH_TEXT_BYTES` (and no more than a shard, which closes after the
    batch that fills it): each becomes one row group of a final shard, of a good size
    whatever size the staged batches were, and no bigger than the byte budget."""
    groups = _RowGroups(shard_size)
    for batch in batches:
        yield from groups.add(batch)
    yield from groups.flush()


class _RowGroups:
    """:func:`_row_groups` fed a batch at a time (one per stage folder, fed from one pass)."""

    def __init__(self, shard_size: int) -> None:
        self.limit = min(MAX_BATCH_TEXT_BYTES, shard_size)
        self.pending: list[pa.RecordBatch] = []
        self.rows = self.size = 0

    def add(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The joined batches that ``batch`` completes (none or one)."""
        full = []
        if self.pending and (self.rows + batch.num_rows > _PACK_ROWS or self.size + batch.nbytes > self.limit):
            full = self.flush()
        self.pending.append(batch)
        self.rows += batch.num_rows
        self.size += batch.nbytes
        return full

    def flush(self) -> list[pa.RecordBatch]:
        """What is pending, joined (nothing when nothing is)."""
        pending, self.pending, self.rows, self.size = self.pending, [], 0, 0
        if not pending:
            return []
        return [pending[0] if len(pending) == 1 else pa.concat_batches(pending)]
