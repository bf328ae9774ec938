"""The local executor: a pipeline over input tasks on N worker processes, resumable.

(Over 500 lines: the run state, the work units and the executor still share this file; the
architecture issue splits them into ``state.py``, ``base.py`` and an executor of a few
hundred lines.)

Shape of a run. The stage list is cut at each global stage (``exact_dedup``...) into
segments. Each segment runs per task, in parallel; between segments a global stage decides
once, over the keys of every task. A last pack step writes the final shards.

    OUT/.tokpipe/run.json             what this folder is for (config, inputs, reader options)
    OUT/.tokpipe/tasks.json           the planned tasks, fixed at the first run
    OUT/.tokpipe/seg{k}/kept/part-{t}-*.parquet      task t's documents after segment k (plus
                                                     the next global stage's key column)
    OUT/.tokpipe/seg{k}/rejected/part-{t}-*.parquet  what segment k dropped from task t
    OUT/.tokpipe/seg{k}/{t}.errors.jsonl, {t}.json   read errors; stats and file list (written last)
    OUT/.tokpipe/global{k}/{t}.parquet   the global stage's verdict per document of task t
    OUT/.tokpipe/pack/{w}.json        worker group w's final shards (written last)
    OUT/part-{w:05d}-{s:05d}.parquet, OUT/rejected/..., OUT/errors.jsonl, OUT/manifest.json

Why this shape: every unit of work (a task in a segment, a global decision, a worker group's
pack) writes its files under temporary names and commits by writing its marker last, so a
killed run restarts exactly where it stopped, and a unit is either wholly there or redone.
Global stages see documents in task order, so the kept copy of a duplicate is the same for
any number of workers; only the cut of the final shards depends on ``workers``.

A document a stage drops is staged in rejected/ as it was then, except that it first goes
through every later stage that rewrites rejected documents (``Stage.rewrites_rejected``:
``pii`` with ``scrub_rejected``, its default), so rejected/ holds no personal data the kept
shards would not. The Ray engine runs these same work units.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import queue
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe.errors import PipelineError
from tokpipe.pipeline.base import DUPLICATE_OF, DecideContext, Decision, GlobalStage, Stage, StageStats, split_rejected
from tokpipe.pipeline.config import PipelineConfig, StageSpec
from tokpipe.pipeline.documents import ID, TEXT
from tokpipe.pipeline.engines.lock import RunLock
from tokpipe.pipeline.engines.workers import WorkerPool, disk_full_in_one_line, run_unit
from tokpipe.pipeline.fields import conform, union_schema
from tokpipe.pipeline.readers import ReaderOptions, ReadError, Task, plan_tasks, read_task
from tokpipe.pipeline.readers.base import MAX_BATCH_TEXT_BYTES
from tokpipe.pipeline.readers.parquet import parquet_batches
from tokpipe.pipeline.writers import ParquetShardWriter, ShardInfo, write_manifest
from tokpipe.pipeline.writers.ids_staging import IdsStagingWriter

__all__ = ["LocalExecutor", "RunOptions", "RunResult", "ProgressUpdate", "Progress", "DUPLICATE_OF", "READ_STATS"]

#: Stats key of the readers: documents read and input set aside, per reason.
READ_STATS = "read"
_KEY = "_tokpipe_key"
# Staging shards are per task; this only bounds a file, it is not a unit of work.
_STAGING_SHARD = 1 << 30
# Staging files are written once and read once: lz4 costs a fraction of zstd's time there.
_STAGING_CODEC = "lz4"
_STATE = ".tokpipe"
# In the state folder: the run's lock (`engines.lock`), and each input file's size and mtime.
_LOCK = "lock.json"
_INPUTS = "inputs.json"
# Rows per batch when the pack step copies staging into the final shards (bytes bound them
# too: see `parquet_batches`); pyarrow's own default.
_PACK_ROWS = 65_536
T = TypeVar("T")


@dataclass
class ProgressUpdate:
    """Where a run is: ``done`` of ``total`` in ``unit`` ("bytes" of input in the segment
    phases, "units" of work in the others), and the documents handled so far in this phase."""

    phase: str
    done: int
    total: int
    unit: str
    documents: int = 0


Progress = Callable[[ProgressUpdate], None]


@dataclass(frozen=True)
class RunOptions:
    workers: int = 1
    shard_size: int = 256 << 20
    strict: bool = False
    overwrite: bool = False
    reader: ReaderOptions = field(default_factory=ReaderOptions)


@dataclass
class RunResult:
    out_dir: Path
    stats: dict[str, StageStats]
    shards: list[ShardInfo]
    rejected: list[ShardInfo]
    errors: int
    #: Tasks done by this call (0 when everything was already done by an earlier run).
    tasks_run: int = 0

    @property
    def documents_in(self) -> int:
        read = self.stats[READ_STATS]
        return read.input

    @property
    def kept(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def rejected_rows(self) -> int:
        return sum(s.rows for s in self.rejected)


def _segments(config: PipelineConfig) -> list[tuple[list[StageSpec], StageSpec | None]]:
    """The stage list cut after each global stage: (document stages, the global stage or None)."""
    from tokpipe.pipeline.base import registered_stages

    known = registered_stages()
    segments: list[tuple[list[StageSpec], StageSpec | None]] = []
    current: list[StageSpec] = []
    for spec in config.stages:
        if known[spec.type].scope == "global":
            segments.append((current, spec))
            current = []
        else:
            current.append(spec)
    segments.append((current, None))
    return segments


def _rewriters(config: PipelineConfig) -> list[tuple[int, dict[str, Any]]]:
    """The stages that rewrite the documents rejected before them (``Stage.rewrites_rejected``),
    with their place in the stage list. Only stages whose class can say yes are built here:
    building others may load a model."""
    from tokpipe.pipeline.base import registered_stages

    known = registered_stages()
    return [(place, {"type": spec.type, "params": spec.params}) for place, spec in enumerate(config.stages)
            if known[spec.type].rewrites_rejected is not Stage.rewrites_rejected and spec.build().rewrites_rejected()]


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _write_table(path: Path, batches: Sequence[pa.RecordBatch]) -> None:
    """All batches into one Parquet file, committed by rename. Batches whose extra columns
    differ are unified first (missing columns become nulls)."""
    tmp = path.with_name(f".{path.name}.tmp")
    if batches:
        table = pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")
    else:
        table = pa.table({})
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def _with_rejection_columns(rejected: pa.RecordBatch) -> pa.RecordBatch:
    """Every rejected batch gets the same rejection columns, so rejected shards share a schema."""
    if DUPLICATE_OF not in rejected.schema.names:
        rejected = rejected.append_column(DUPLICATE_OF, pa.nulls(rejected.num_rows, type=pa.string()))
    return rejected


# ---------------------------------------------------------------------------------------------
# Work units. Top-level functions so worker processes can run them.


def _run_segment_task(state: str, k: int, task: Task, segment: tuple[list[dict[str, Any]], dict[str, Any] | None],
                      previous_global: dict[str, Any] | None, reader: dict[str, Any],
                      staging: str = "parquet", first: int = 0,
                      rewriters: Sequence[tuple[int, dict[str, Any]]] = ()) -> dict[str, Any]:
    """Segment ``k`` of one task: its input (the reader, or segment k-1 and its verdicts),
    the segment's document stages, and the keys of the global stage that ends it. Batches
    stream through to staging shards; nothing holds a whole task in memory. ``staging`` is
    the staging files' format: lz4 Parquet, (``"arrow"``) uncompressed Arrow IPC for a
    consumer that memory-maps them, or (``"ids"``, ``tokpipe tokenize``) the token ids raw
    in the process's ids file and the rest in Arrow IPC (``writers.ids_staging``); either
    way the task's marker, written last, commits them.

    ``first`` is the place of the segment's first stage in the config's stage list, and
    ``rewriters`` the stages (place, spec) that rewrite the documents rejected before them
    (``Stage.rewrites_rejected``: ``pii`` with ``scrub_rejected``): a document a stage drops
    goes through every such stage placed after that stage, wherever it is in the pipeline,
    before it is staged in rejected/."""
    state_dir = Path(state)
    stage_specs, global_spec = segment
    stages: list[Stage] = [StageSpec(s["type"], s["params"]).build() for s in stage_specs]
    later: list[tuple[int, Stage]] = [(place, StageSpec(s["type"], s["params"]).build()) for place, s in rewriters]
    closing: GlobalStage | None = None
    if global_spec is not None:
        built = StageSpec(global_spec["type"], global_spec["params"]).build()
        assert isinstance(built, GlobalStage)
        closing = built
    stats: dict[str, dict[str, Any]] = {}
    errors: list[ReadError] = []
    out = state_dir / f"seg{k}"
    kept_writer: ParquetShardWriter | IdsStagingWriter = \
        IdsStagingWriter(out / "kept", task.index, _STAGING_SHARD) if staging == "ids" else \
        _staging_writer(out / "kept", task.index, staging)
    rejected_writer = _staging_writer(out / "rejected", task.index, "arrow" if staging == "ids" else staging)
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
        record("rejected", rejected_writer.write(_with_rejection_columns(batch)))

    def reject_duplicates(batch: pa.RecordBatch) -> None:
        reject(batch, first - 1)  # the global stage that ended the previous segment

    def batches() -> Iterator[pa.RecordBatch]:
        if k == 0:
            options = ReaderOptions(**reader)
            read = StageStats(READ_STATS)
            for batch in _prefetched(read_task(task, options, errors.append)):
                read.input += batch.num_rows
                read.kept += batch.num_rows
                yield batch
            read.input += len(errors)
            for e in errors:
                read.dropped[e.reason] += 1
            stats[READ_STATS] = read.as_dict()
            return
        previous = _summary(state_dir, k - 1, task.index)
        verdicts = _verdicts(state_dir, k - 1, task.index) if previous_global is not None else None
        deciding: GlobalStage | None = None
        if previous_global is not None:
            built = StageSpec(previous_global["type"], previous_global["params"]).build()
            assert isinstance(built, GlobalStage)
            deciding = built
        offset = 0
        for name in previous["kept_files"]:
            for batch in parquet_batches(pq.ParquetFile(state_dir / f"seg{k - 1}" / "kept" / name),
                                         reader.get("batch_rows", 1024)):
                if _KEY in batch.schema.names:
                    batch = batch.drop_columns([_KEY])
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
                    batch = batch.append_column(_KEY, closing.keys(batch))
                counts["kept"] += batch.num_rows
                record("kept", kept_writer.write(batch))
        record("kept", kept_writer.close())
        record("rejected", rejected_writer.close())
    except BaseException:
        kept_writer.abort()
        rejected_writer.abort()
        raise
    for stage in stages:
        stats[stage.name] = stage.stats.as_dict()
    if k == 0:
        tmp = out / f".{task.index:06d}.errors.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for e in errors:
                f.write(json.dumps(asdict(e), ensure_ascii=False) + "\n")
        os.replace(tmp, out / f"{task.index:06d}.errors.jsonl")
        sizes[f"{task.index:06d}.errors.jsonl"] = (out / f"{task.index:06d}.errors.jsonl").stat().st_size
    summary = {"task": task.index, "stats": stats, "errors": len(errors), **counts,
               "kept_files": files["kept"], "rejected_files": files["rejected"], "sizes": sizes}
    if isinstance(kept_writer, IdsStagingWriter):
        summary["ids"] = kept_writer.ids_range
    _write_json(out / f"{task.index:06d}.json", summary)
    return summary


def _staging_writer(directory: Path, task: int, staging: str) -> ParquetShardWriter:
    # No sha256 and no fsync: nothing checks staging files against a digest, and the task's
    # marker commits them (a killed run redoes the tasks without one).
    if staging == "arrow":
        return ParquetShardWriter(directory, task, _STAGING_SHARD, file_format="arrow", checksum=False)
    return ParquetShardWriter(directory, task, _STAGING_SHARD, compression=_STAGING_CODEC, checksum=False,
                              large_columns=(TEXT,))


def _prefetched(items: Iterator[T], depth: int = 1) -> Iterator[T]:
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


def _summary(state_dir: Path, k: int, task: int) -> dict[str, Any]:
    return json.loads((state_dir / f"seg{k}" / f"{task:06d}.json").read_text(encoding="utf-8"))


# Magic bytes at both ends of a staging file, by suffix.
_MAGIC = {".arrow": b"ARROW1", ".parquet": b"PAR1"}


def _committed(state_dir: Path, k: int, task: int) -> bool:
    """Whether segment ``k`` of ``task`` is done: its marker can be read and every file it
    lists has the size it had then (and, for Arrow and Parquet files, the format's magic
    bytes at both ends).

    Staging files and markers are not fsynced (that would cost the run about as much as
    writing them): a killed process loses nothing the page cache holds, but after a power
    loss or an OS crash a marker may survive its files, which come back short, empty or
    zero-filled. Those are caught here, at the price of a ``stat`` and two small reads a
    file, and the task is redone. A raw ids file (``tokpipe tokenize``) has no magic bytes:
    it is checked by its length alone, so ids that came back zero-filled inside its length
    go unnoticed (ext4's default ``data=ordered`` journaling writes a file's data before the
    size that exposes it). (A marker of an older version lists no sizes: it is trusted as
    it was.)"""
    try:
        summary = _summary(state_dir, k, task)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):  # a marker the crash left empty or cut short
        return False
    ids = summary.get("ids")
    if ids is not None:
        # An append-only ids file (see `writers.ids_staging`): later tasks may have made it
        # longer, never shorter.
        try:
            if (state_dir / f"seg{k}" / "kept" / ids["file"]).stat().st_size < ids["end"]:
                return False
        except OSError:
            return False
    for name, size in summary.get("sizes", {}).items():
        path = state_dir / f"seg{k}" / name
        try:
            if path.stat().st_size != size:
                return False
            magic = _MAGIC.get(path.suffix)
            if magic is not None:
                with open(path, "rb") as f:
                    head = f.read(len(magic))
                    f.seek(-len(magic), os.SEEK_END)
                    if head != magic or f.read(len(magic)) != magic:
                        return False
        except OSError:
            return False
    return True


def _pending_tasks(state_dir: Path, k: int, tasks: Sequence[Task]) -> list[Task]:
    """The tasks whose segment ``k`` is not committed (see :func:`_committed`); the marker
    of one whose files are damaged is removed, so nothing reads them before it is redone."""
    todo = []
    for t in tasks:
        if not _committed(state_dir, k, t.index):
            (state_dir / f"seg{k}" / f"{t.index:06d}.json").unlink(missing_ok=True)
            todo.append(t)
    return todo


def _verdicts(state_dir: Path, k: int, task: int) -> pa.Table:
    """Global stage ``k``'s verdict on each document of ``task``: ``duplicate_of``, the id of
    the document kept in its place or null to keep it, and the stage's decision columns."""
    return pq.read_table(state_dir / f"global{k}" / f"{task:06d}.parquet").combine_chunks()


def _apply_verdicts(batch: pa.RecordBatch, verdict: pa.Table, stage: GlobalStage,
                    reject: Callable[[pa.RecordBatch], None]) -> pa.RecordBatch:
    """Hands the decision's columns to the stage's ``revise``, then drops the documents marked
    as duplicates and those ``revise`` dropped, handing them to ``reject``."""
    columns = {name: verdict.column(name).combine_chunks() for name in verdict.column_names if name != DUPLICATE_OF}
    duplicate_of = verdict.column(DUPLICATE_OF).combine_chunks()
    is_dup = duplicate_of.is_valid().to_numpy(zero_copy_only=False)
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
        reject(result.rejected.append_column(DUPLICATE_OF, duplicate_of.filter(pa.array(drop))))
    return result.kept


def _pack_group(state: str, out_dir: str, worker: int, tasks: list[int], segments: int,
                shard_size: int, kept_schema: pa.Schema, rejected_schema: pa.Schema) -> dict[str, Any]:
    """Worker group ``worker``'s final shards: its tasks' last-segment documents in task
    order, and every segment's rejected documents, each cast to the run's one schema."""
    state_dir, out = Path(state), Path(out_dir)
    last = segments - 1

    def staged(kind: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for t in tasks:
            for k in (range(segments) if kind == "rejected" else [last]):
                for name in _summary(state_dir, k, t)[f"{kind}_files"]:
                    for batch in parquet_batches(pq.ParquetFile(state_dir / f"seg{k}" / kind / name), _PACK_ROWS):
                        yield conform(batch, schema)

    with ParquetShardWriter(out, worker, shard_size, large_columns=(TEXT,)) as kept, \
            ParquetShardWriter(out / "rejected", worker, shard_size, large_columns=(TEXT,)) as rejected:
        rejected_shards = [info for batch in _row_groups(staged("rejected", rejected_schema), shard_size)
                           for info in rejected.write(batch)]
        rejected_shards += rejected.close()
        shards = [info for batch in _row_groups(staged("kept", kept_schema), shard_size) for info in kept.write(batch)]
        shards += kept.close()
    summary = {"worker": worker, "tasks": tasks, "shards": [asdict(s) for s in shards],
               "rejected": [asdict(s) for s in rejected_shards]}
    _write_json(state_dir / "pack" / f"{worker}.json", summary)
    return summary


def _row_groups(batches: Iterator[pa.RecordBatch], shard_size: int) -> Iterator[pa.RecordBatch]:
    """Consecutive batches of one schema joined into batches of up to :data:`_PACK_ROWS`
    rows and :data:`MAX_BATCH_TEXT_BYTES` (and no more than a shard, which closes after the
    batch that fills it): each becomes one row group of a final shard, of a good size
    whatever size the staged batches were, and no bigger than the byte budget."""
    limit = min(MAX_BATCH_TEXT_BYTES, shard_size)
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if pending and (rows + batch.num_rows > _PACK_ROWS or size + batch.nbytes > limit):
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, rows, size = [], 0, 0
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


# ---------------------------------------------------------------------------------------------


class LocalExecutor:
    """Runs ``config`` over ``inputs`` into ``out_dir``; see the module docstring."""

    def __init__(self, config: PipelineConfig, inputs: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
                 options: RunOptions = RunOptions(), progress: Progress | None = None) -> None:
        self.config = config
        self.inputs = [os.fspath(p) for p in inputs]
        self.out = Path(out_dir)
        self.state = self.out / _STATE
        self.options = options
        self.progress: Progress = progress or (lambda update: None)
        self.segments = _segments(config)
        self._lock: RunLock | None = None  # held from `_prepare` to `release`

    def _identity(self) -> dict[str, Any]:
        reader = asdict(self.options.reader)
        reader["strict"] = False  # strict only changes whether a run stops, not its output
        return {"config": self.config.to_dict(), "inputs": self.inputs, "reader": reader}

    def _prepare(self) -> list[Task]:
        """Takes the folder's lock (``engines.lock``), then starts the run's state or checks
        the one there (same config, inputs and reader options; inputs unchanged since). The
        lock is held until :meth:`release`."""
        fresh = not self.state.exists()
        self._lock = RunLock(self.state / _LOCK, str(self.out))
        self._lock.acquire()
        try:
            return self._start_or_resume()
        except BaseException:
            self.release()
            if fresh and self.state.is_dir() and not any(self.state.iterdir()):
                self.state.rmdir()  # refused before it began: leave the folder as it was
            raise

    def release(self) -> None:
        """Gives back the output folder's lock taken by :meth:`_prepare`."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def check_lock(self) -> None:
        """Stops the run (``LockHeld``) if another run took over its lock."""
        if self._lock is not None:
            self._lock.check()

    def _start_or_resume(self) -> list[Task]:
        identity = self._identity()
        run_file = self.state / "run.json"
        if self.options.overwrite:
            _clear(self.out)
        if run_file.exists():
            previous = json.loads(run_file.read_text(encoding="utf-8"))
            if previous != identity:
                raise PipelineError(f"{self.out} holds a run with a different config, inputs or reader options; "
                                    "use --overwrite to start over, or another output folder")
            tasks = [Task(**t) for t in json.loads((self.state / "tasks.json").read_text(encoding="utf-8"))]
            _check_inputs(self.state / _INPUTS, self.out)
            return tasks
        if any(_contents(self.out)):
            raise PipelineError(f"{self.out} is not empty and holds no tokpipe run; use --overwrite or another folder")
        tasks = plan_tasks(self.inputs, self.options.reader)
        for k in range(len(self.segments)):
            (self.state / f"seg{k}").mkdir(exist_ok=True)
            (self.state / f"global{k}").mkdir(exist_ok=True)
        (self.state / "pack").mkdir(exist_ok=True)
        _write_json(self.state / "tasks.json", [asdict(t) for t in tasks])
        _write_json(self.state / _INPUTS, _input_stats(tasks))
        _write_json(run_file, identity)
        return tasks

    def _map(self, pool: WorkerPool | None, phase: str, jobs: list[tuple[Callable[..., Any], tuple[Any, ...]]],
             sizes: list[int] | None = None) -> list[Any]:
        """Runs jobs in the pool (or here), reporting progress (by ``sizes`` in bytes when
        given, else by job); the first failure stops the run."""
        weights = sizes or [1] * len(jobs)
        update = ProgressUpdate(phase, 0, sum(weights), "bytes" if sizes else "units")
        place = str(self.out)

        def advance(weight: int, result: Any) -> None:
            self.check_lock()
            update.done += weight
            if sizes and isinstance(result, dict):  # a segment task's summary
                update.documents += int(result.get("kept", 0)) + int(result.get("rejected", 0)) + int(result.get("errors", 0))
            self.progress(update)

        self.progress(update)
        if pool is None:
            results = []
            for (fn, args), weight in zip(jobs, weights):
                results.append(run_unit(fn, args, unit_label(fn, args), place))
                advance(weight, results[-1])
            return results
        futures: dict[cf.Future[Any], int] = {}
        try:
            for (fn, args), weight in zip(jobs, weights):
                futures[pool.submit(fn, args, unit_label(fn, args), place)] = weight
            for future in cf.as_completed(futures):
                advance(futures[future], future.result())
        except BrokenProcessPool as error:  # a worker died, while units were submitted or ran
            raise pool.failure(error) from None
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return [f.result() for f in futures]

    def run(self) -> RunResult:
        tasks = self._prepare()
        try:
            # A full disk outside a work unit (a global decision, the manifest): one line too.
            with disk_full_in_one_line(str(self.out), "the run's own steps"):
                return self._run(tasks)
        finally:
            self.release()

    def _run(self, tasks: list[Task]) -> RunResult:
        reader = asdict(self.options.reader)
        reader["strict"] = self.options.strict
        workers = max(1, self.options.workers)
        rewriters = _rewriters(self.config)
        pool = self._pool(workers)
        tasks_run = 0
        try:
            previous_global: dict[str, Any] | None = None
            first = 0  # the place of segment k's first stage in the config
            for k, (stage_specs, global_spec) in enumerate(self.segments):
                specs = [{"type": s.type, "params": s.params} for s in stage_specs]
                closing = {"type": global_spec.type, "params": global_spec.params} if global_spec else None
                todo = _pending_tasks(self.state, k, tasks)
                tasks_run += len(todo)
                self._map(pool, f"segment {k + 1}/{len(self.segments)}", [
                    (_run_segment_task, (str(self.state), k, t, (specs, closing), previous_global, reader, "parquet",
                                         first, rewriters)) for t in todo],
                    sizes=[_task_bytes(t) for t in todo])
                if global_spec is not None:
                    self._decide(k, tasks, global_spec)
                previous_global = closing
                first += len(stage_specs) + (global_spec is not None)
            packs = self._pack(pool, tasks, workers)
        finally:
            if pool is not None:
                pool.shutdown()
        self.check_lock()
        return self._finish(tasks, packs, tasks_run)

    def _pool(self, workers: int) -> WorkerPool | None:
        """Where work units run: worker processes, or this process for one worker."""
        return WorkerPool(workers) if workers > 1 else None

    def _decide_stage(self, stage: GlobalStage, keys: Sequence[pa.Array], context: DecideContext,
                      files: list[list[Path]], sizes: list[int]) -> list[Any]:
        """A global stage's decision over every task's keys (another engine may distribute it)."""
        return stage.decide(keys, context)

    def _decide(self, k: int, tasks: list[Task], spec: StageSpec) -> None:
        done = self.state / f"global{k}" / "done.json"
        if done.exists():
            return
        self.progress(ProgressUpdate(f"{spec.type}: deciding", 0, 1, "units"))
        stage = spec.build()
        assert isinstance(stage, GlobalStage)
        files = [[self.state / f"seg{k}" / "kept" / name for name in _summary(self.state, k, t.index)["kept_files"]]
                 for t in tasks]
        keys = _LazyColumns(files, _KEY, stage.key_type())
        scratch = self.state / f"global{k}" / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        sizes = [_summary(self.state, k, t.index)["kept"] for t in tasks]

        def progress(phase: str, done: int, total: int) -> None:
            self.progress(ProgressUpdate(f"{spec.type}: {phase}", done, total, "units"))

        def column(name: str, positions: np.ndarray) -> pa.Array:
            return _gather(files, sizes, name, positions)

        decided = self._decide_stage(stage, keys, DecideContext(scratch, progress, column), files, sizes)
        shutil.rmtree(scratch, ignore_errors=True)
        decisions = [d if isinstance(d, Decision) else Decision(np.asarray(d)) for d in decided]
        del keys, decided
        keepers = [d.keeper for d in decisions]
        bounds = np.cumsum([0, *[len(x) for x in keepers]])
        own = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(files))]
        flat = np.concatenate(keepers) if keepers else np.zeros(0, dtype=np.int64)
        # Ids of the kept copies that have duplicates, read only from the tasks that hold them.
        clustered = np.zeros(0, dtype=np.int64)
        if stage.cluster_column is not None and len(flat):
            positions, counts = np.unique(flat, return_counts=True)
            clustered = positions[counts > 1]
        needed = np.union1d(np.concatenate([kp[kp != o] for kp, o in zip(keepers, own)]) if files else np.zeros(0, int),
                            clustered).astype(np.int64)
        # The ids of the needed positions, in the order of `needed` (sorted), looked up by
        # searchsorted and gathered with `take`: no Python object per document.
        needed_ids = _gather(files, [len(x) for x in keepers], ID, needed)

        def ids_of(positions: np.ndarray, wanted: np.ndarray) -> pa.Array:
            """The id at each position where `wanted`, else null."""
            slots = np.searchsorted(needed, positions[wanted])
            index = np.zeros(len(positions), dtype=np.int64)
            index[wanted] = slots
            return needed_ids.take(pa.array(index, mask=~wanted))

        stats = StageStats(spec.type)
        in_cluster = np.isin(flat, clustered)
        for i, t in enumerate(tasks):
            is_dup = keepers[i] != own[i]
            columns = {DUPLICATE_OF: ids_of(keepers[i], is_dup)}
            if stage.cluster_column is not None:
                columns[stage.cluster_column] = ids_of(keepers[i], in_cluster[bounds[i]:bounds[i + 1]])
            columns.update(decisions[i].columns)
            _write_table(self.state / f"global{k}" / f"{t.index:06d}.parquet", [pa.record_batch(columns)])
            stats.input += len(is_dup)
            stats.dropped["duplicate"] += int(is_dup.sum())
        stats.dropped.update(stage.stats.dropped)
        stats.extra.update(stage.stats.extra)
        stats.kept = stats.input - sum(stats.dropped.values())
        _write_json(done, {"stats": stats.as_dict()})
        self.progress(ProgressUpdate(f"{spec.type}: deciding", 1, 1, "units"))

    def _pack(self, pool: WorkerPool | None, tasks: list[Task], workers: int) -> list[dict[str, Any]]:
        pack_dir = self.state / "pack"
        params = {"workers": workers, "shard_size": self.options.shard_size}
        params_file = pack_dir / "params.json"
        if params_file.exists() and json.loads(params_file.read_text(encoding="utf-8")) != params:
            # Another cut of the final shards was begun: the packed files are redone, cheaply.
            for marker in pack_dir.glob("*.json"):
                marker.unlink()
        _write_json(params_file, params)
        kept_schema, rejected_schema = self._output_schemas(tasks)
        groups = [g for g in np.array_split(np.array([t.index for t in tasks], dtype=int), workers)]
        jobs = []
        for w, group in enumerate(groups):
            if (pack_dir / f"{w}.json").exists():
                continue
            # A group that did not finish may have left shards: they are redone from scratch.
            for stale in [*self.out.glob(f"part-{w:05d}-*.parquet"), *self.out.glob(f"rejected/part-{w:05d}-*.parquet")]:
                stale.unlink()
            jobs.append((_pack_group, (str(self.state), str(self.out), w, group.tolist(), len(self.segments),
                                       self.options.shard_size, kept_schema, rejected_schema)))
        self._map(pool, "writing shards", jobs)
        # Stale shards of a larger worker count from an earlier cut.
        for stale in [*self.out.glob("part-*.parquet"), *self.out.glob("rejected/part-*.parquet")]:
            if int(stale.name.split("-")[1]) >= workers:
                stale.unlink()
        return [json.loads((pack_dir / f"{w}.json").read_text(encoding="utf-8")) for w in range(len(groups))]

    def _output_schemas(self, tasks: list[Task]) -> tuple[pa.Schema, pa.Schema]:
        """One schema for all kept shards and one for all rejected shards: the union of the
        staging files' columns (inputs of different formats carry different fields), each
        field widened to one type by :func:`~tokpipe.pipeline.fields.union_schema`, so the
        output folder reads as one table (pyarrow.dataset, HF datasets) whatever the input
        held."""
        last = len(self.segments) - 1
        kept, rejected = [], []
        for t in tasks:
            for k in range(len(self.segments)):
                summary = _summary(self.state, k, t.index)
                rejected += [pq.read_schema(self.state / f"seg{k}" / "rejected" / n) for n in summary["rejected_files"]]
                if k == last:
                    kept += [pq.read_schema(self.state / f"seg{k}" / "kept" / n) for n in summary["kept_files"]]
        base = [pa.field(ID, pa.string()), pa.field(TEXT, pa.string())]
        return union_schema(kept, base), union_schema(rejected, base)

    def _finish(self, tasks: list[Task], packs: list[dict[str, Any]], tasks_run: int) -> RunResult:
        stats: dict[str, StageStats] = {}
        for k, (stage_specs, global_spec) in enumerate(self.segments):
            for t in tasks:
                summary = json.loads((self.state / f"seg{k}" / f"{t.index:06d}.json").read_text(encoding="utf-8"))
                for name, data in summary["stats"].items():
                    stats.setdefault(name, StageStats(name)).merge(StageStats.from_dict(name, data))
            if global_spec is not None:
                done = json.loads((self.state / f"global{k}" / "done.json").read_text(encoding="utf-8"))
                stats[global_spec.type] = StageStats.from_dict(global_spec.type, done["stats"])
        stats.setdefault(READ_STATS, StageStats(READ_STATS))
        # errors.jsonl: every task's read errors, in task order.
        errors = 0
        tmp = self.out / ".errors.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for t in tasks:
                lines = (self.state / "seg0" / f"{t.index:06d}.errors.jsonl").read_text(encoding="utf-8")
                f.write(lines)
                errors += lines.count("\n")
        os.replace(tmp, self.out / "errors.jsonl")
        shards = [ShardInfo(**s) for p in packs for s in p["shards"]]
        rejected = [ShardInfo(**s) for p in packs for s in p["rejected"]]
        _write_dataset_card(self.out)
        ordered = {READ_STATS: stats[READ_STATS], **{s.type: stats[s.type] for s in self.config.stages if s.type in stats}}
        write_manifest(self.out, shards=shards, rejected=rejected, config=self.config.to_dict(),
                       stats={name: s.as_dict() for name, s in ordered.items()},
                       extra={"inputs": self.inputs, "workers": self.options.workers, "errors": errors})
        return RunResult(self.out, ordered, shards, rejected, errors, tasks_run)


# HF `datasets` reads the YAML header of a folder's README.md to find the data: with it,
# `load_dataset(OUT)` gives the kept documents and `load_dataset(OUT, "rejected")` the rest,
# and the manifest, errors.jsonl and staging files are never mistaken for data.
_DATASET_CARD = """---
configs:
- config_name: default
  data_files: "part-*.parquet"
- config_name: rejected
  data_files: "rejected/part-*.parquet"
---
# Dataset written by tokpipe clean

- `part-*.parquet`: the kept documents (`id`, `text`, and the input's other fields).
- `rejected/part-*.parquet`: the dropped documents, with `reason`, `stage` and `duplicate_of`.
- `errors.jsonl`: input that could not be read (file, location, reason).
- `manifest.json`: every shard with rows, bytes and sha256; the config; per-stage stats.
"""


def _write_dataset_card(out: Path) -> None:
    tmp = out / ".README.md.tmp"
    tmp.write_text(_DATASET_CARD, encoding="utf-8")
    os.replace(tmp, out / "README.md")


def _contents(out: Path) -> Iterator[Path]:
    """What ``out`` holds besides the run lock (which a run takes before anything else)."""
    if not out.is_dir():
        return
    for entry in out.iterdir():
        if entry.name == _STATE and entry.is_dir():
            yield from (p for p in entry.iterdir() if p.name != _LOCK)
        else:
            yield entry


def _clear(out: Path) -> None:
    """Deletes what ``out`` holds (``--overwrite``) but the lock this run holds."""
    for entry in list(_contents(out)):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _input_stats(tasks: Sequence[Task]) -> dict[str, list[int]]:
    """Each input file's size and modification time (ns), as the run first read them."""
    stats: dict[str, list[int]] = {}
    for t in tasks:
        if t.path not in stats:
            try:
                info = os.stat(t.path)
            except OSError:
                continue  # unreadable: its task reports it
            stats[t.path] = [info.st_size, info.st_mtime_ns]
    return stats


def _check_inputs(recorded: Path, out: Path) -> None:
    """Refuses to resume over inputs that changed since the run began: the output would mix
    documents of the old and the new file. (A run begun by an older tokpipe recorded none.)"""
    if not recorded.exists():
        return
    for path, (size, mtime) in json.loads(recorded.read_text(encoding="utf-8")).items():
        try:
            info = os.stat(path)
        except OSError as error:
            raise PipelineError(f"{out} cannot resume: input {path} is gone or unreadable since the run began "
                                f"({error.strerror or error}); restore it, or start over with --overwrite") from None
        if (info.st_size, info.st_mtime_ns) != (size, mtime):
            raise PipelineError(f"{out} cannot resume: input {path} changed since the run began "
                                f"(size {size:,} -> {info.st_size:,} bytes, or its modification time); "
                                "restore it, or start over with --overwrite")


def unit_label(fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """A work unit as messages name it."""
    if fn is _run_segment_task:
        task: Task = args[2]
        where = "" if task.start == 0 and task.end is None else f", bytes {task.start:,}-{task.end or 'end'}"
        return f"task {task.index} ({task.path}{where})"
    if fn is _pack_group:
        return f"the final shards of worker group {args[2]}"
    return getattr(fn, "__name__", "a work unit")


def _task_bytes(task: Task) -> int:
    try:
        end = task.end if task.end is not None else os.path.getsize(task.path)
    except OSError:
        return 0
    return max(0, end - task.start)


class _LazyColumns(Sequence[pa.Array]):
    """One column of every task's staging shards, each task's read only when asked for, so
    a global stage can stream the keys instead of holding all of them."""

    def __init__(self, files: list[list[Path]], column: str, kind: pa.DataType) -> None:
        self.files, self.column, self.kind = files, column, kind

    def __len__(self) -> int:
        return len(self.files)

    @overload
    def __getitem__(self, i: int) -> pa.Array: ...

    @overload
    def __getitem__(self, i: slice) -> list[pa.Array]: ...

    def __getitem__(self, i: int | slice) -> pa.Array | list[pa.Array]:
        if isinstance(i, slice):
            return [_read_column(f, self.column, self.kind) for f in self.files[i]]
        return _read_column(self.files[i], self.column, self.kind)


def _gather(files: list[list[Path]], sizes: list[int], column: str, positions: np.ndarray) -> pa.Array:
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
            shard = pq.ParquetFile(f)
            for group in range(shard.num_row_groups):
                rows = shard.metadata.row_group(group).num_rows
                lo, hi = np.searchsorted(here, [start, start + rows])
                if hi > lo:
                    values = shard.read_row_group(group, columns=[column]).column(column)
                    parts.extend(values.take(pa.array(here[lo:hi] - start)).chunks)
                start += rows
    return pa.concat_arrays(parts) if parts else pa.array([], type=pa.string())


def _read_column(files: list[Path], column: str, kind: pa.DataType) -> pa.Array:
    """One column of a task's staging shards, in order, as one array."""
    parts = [pq.read_table(f, columns=[column]).column(column) for f in files]
    chunks = [c for part in parts for c in part.chunks]
    return pa.concat_arrays(chunks) if chunks else pa.array([], type=kind)
