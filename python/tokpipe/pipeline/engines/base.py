"""The executor contract: what every engine does alike, and the two things an engine supplies.

An engine (``local``: worker processes; ``ray``: a Ray cluster) subclasses :class:`Executor`
and provides

* :meth:`Executor.map`: run a list of :class:`WorkUnit` (top-level functions and their
  arguments, see ``engines.units``) and return their results in order, reporting progress;
* optionally :meth:`Executor.pool` (what ``map`` runs on, set up once for several calls) and
  :meth:`Executor.decide_stage` (a global stage's decision, which the Ray engine distributes
  when the stage describes its join, ``GlobalStage.join``).

Everything else is shared: :meth:`Executor.plan` takes the output folder's lock and starts or
resumes the run's state (``engines.state``), :meth:`Executor.pending` and
:meth:`Executor.segment_units` give the work of a segment for a staging strategy, and
:meth:`Executor.run` is ``tokpipe clean``: the stage list is cut at each global stage
(``exact_dedup``...) into segments; each segment runs per task, in parallel; between segments
a global stage decides once, over the keys of every task (``engines.decide``); a last pack
step writes the final shards (``OUT/data``, ``OUT/rejected``, or with ``rejected_by_stage``
``OUT/rejected/STAGE``), then the merged stats,
``errors.jsonl``, the dataset card (``writers.card``) and the manifest, after which the
staging is removed unless ``keep_staging`` (``RunState.remove_staging``). A rerun of a run
finished so redoes nothing (:attr:`Executor.finished`). The manifest's ``wall_seconds`` is the
run's over all its calls: each call that ends with the staging still there records the total
so far in it (``RunState.record_wall_seconds``), and the next adds its own
(:meth:`Executor.wall_seconds`). A rerun replaces a failed run only by removing that run's own
files (``RunState.discard_unfinished``, ``RunState.discard_finished``), never a user's.
``tokpipe tokenize`` uses ``plan``, ``pending``, ``segment_units`` and ``map`` with a staging
of its own, then writes its shards itself.

Why this shape: every unit of work (a task in a segment, a global decision, a worker group's
pack) writes its files under temporary names and commits by writing its marker last, so a
killed run restarts exactly where it stopped, and a unit is either wholly there or redone.
Global stages see documents in task order, so the kept copy of a duplicate is the same for
any number of workers; only the cut of the final shards depends on ``workers``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe.errors import InvalidArgumentError, OutputConflictError, PipelineError
from tokpipe.pipeline import fs
from tokpipe.pipeline.base import DecideContext, GlobalStage, StageStats
from tokpipe.pipeline.config import PipelineConfig
from tokpipe.pipeline.documents import ID, TEXT
from tokpipe.pipeline.engines.decide import decide
from tokpipe.pipeline.engines.lock import RunLock
from tokpipe.pipeline.engines.state import (READ_STATS, RUN_KEY, STATE_DIR, RunState, identity_digest,
                                            local_staging, stage_folders)
from tokpipe.pipeline.engines.units import (STAGED_PLACE, ParquetStaging, Staging, pack_group, rewriters,
                                            run_segment_task, segments, task_bytes, task_label)
from tokpipe.pipeline.engines.workers import disk_full_in_one_line
from tokpipe.pipeline.fields import union_schema
from tokpipe.pipeline.readers import ReaderOptions, Task, plan_tasks
from tokpipe.pipeline.writers import ShardInfo, shard_suffix
from tokpipe.pipeline.writers.card import clean_card
from tokpipe.pipeline.writers.jsonl import check_output_format
from tokpipe.pipeline.writers.manifest import DATA_DIR, REJECTED_DIR, build_manifest, publish_manifest
from tokpipe.storage import Location, RemotePath, location

__all__ = ["Executor", "WorkUnit", "RunOptions", "RunResult", "ProgressUpdate", "Progress"]


@dataclass
class ProgressUpdate:
    """Where a run is: ``done`` of ``total`` in ``unit`` ("bytes" of input in the segment
    phases, "units" of work in the others), and the documents handled so far in this phase
    (by the units done). In bytes, ``done`` counts what the running units have read too
    (the local engine: ``readers.meter``; on Ray, whole units only)."""

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
    #: Where the run's state lives (a path or URL); None: the engine's default (see
    #: :meth:`Executor.default_staging`).
    staging_dir: str | None = None
    #: The final shards' format: one of ``writers.OUTPUT_FORMATS`` (parquet, jsonl, jsonl.gz,
    #: jsonl.zst).
    output_format: str = "parquet"
    #: Keep the run's staging after it succeeds (``--keep-staging``): by default it is
    #: removed once the manifest is written (``RunState.remove_staging``). Kept, a rerun of
    #: ``tokpipe tokenize`` with other write options (or of ``clean`` with another
    #: ``--shard-size``) rewrites the output from it without redoing the work.
    keep_staging: bool = False
    #: Each stage's rejected documents in a folder of its own, ``OUT/rejected/STAGE/``
    #: (``--rejected-by-stage``; ``state.stage_folders`` names them), instead of all of them
    #: in ``OUT/rejected/``: one stage's drops can then be sampled alone.
    rejected_by_stage: bool = False

    def __post_init__(self) -> None:
        # Refused before any work, as a bad config is.
        check_output_format(self.output_format)
        if not isinstance(self.rejected_by_stage, bool):
            raise InvalidArgumentError(f"rejected_by_stage must be true or false, got "
                                       f"{str(self.rejected_by_stage)[:100]!r}")


@dataclass
class RunResult:
    out_dir: Path
    stats: dict[str, StageStats]
    shards: list[ShardInfo]
    rejected: list[ShardInfo]
    errors: int
    #: Tasks done by this call (0 when everything was already done by an earlier run).
    tasks_run: int = 0
    #: The run's wall time, its earlier calls included (the manifest's ``wall_seconds``),
    #: when this call was not the whole run (a resume, a rerun); None when it was.
    run_wall_seconds: float | None = None

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


@dataclass(frozen=True)
class WorkUnit:
    """One unit of work: ``fn(*args)``, a top-level function (so any engine can ship it to
    another process), named ``label`` in messages. ``size``: its bytes of input, when
    progress counts bytes (segment tasks); None counts it as one unit."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    label: str
    size: int | None = None


class Executor:
    """Runs ``config`` over ``inputs`` into ``out_dir`` (see the module docstring); engines
    implement :meth:`map`."""

    def __init__(self, config: PipelineConfig, inputs: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
                 options: RunOptions = RunOptions(), progress: Progress | None = None) -> None:
        self.config = config
        self.inputs = [str(p) if isinstance(p, RemotePath) else os.fspath(p) for p in inputs]
        self.out = location(out_dir)
        self.options = options
        self.state = RunState(self.out, options.staging_dir if options.staging_dir is not None
                              else self.default_staging(self.out))
        self.progress: Progress = progress or (lambda update: None)
        self.segments = segments(config)
        self._rewriters: list[tuple[int, dict[str, Any]]] | None = None
        self._lock: RunLock | None = None  # held from `plan` to `release`
        #: The manifest of the run found finished by :meth:`plan` (its staging removed): a
        #: rerun of the same command, which redoes nothing. None otherwise.
        self.finished: dict[str, Any] | None = None
        self._started = time.perf_counter()
        #: The wall time of the run's earlier calls (``RunState.wall_seconds``), known once
        #: :meth:`plan` succeeded (None before): the manifest's ``wall_seconds`` adds this call's.
        self._earlier: float | None = None

    # -- What an engine provides.

    def default_staging(self, out: Location) -> Location | None:
        """The state folder when none is given (None: ``OUT/.tokpipe``): for an output in a
        bucket, local disk (``state.local_staging``), since this engine's workers share it."""
        return local_staging(out)

    def map(self, phase: str, units: Sequence[WorkUnit]) -> list[Any]:
        """Runs ``units`` and returns their results in order, reporting progress as
        ``phase`` (by bytes when every unit has a ``size``, else by unit) and checking the
        lock (:meth:`check_lock`) as each finishes; the first failure stops the run."""
        raise NotImplementedError(f"{type(self).__name__} must implement map()")

    @contextmanager
    def pool(self, workers: int) -> Iterator[None]:
        """What :meth:`map` runs on inside the block, for up to ``workers`` units at a time
        (worker processes, say); by default nothing to set up."""
        yield

    def decide_stage(self, stage: GlobalStage, keys: Sequence[pa.Array], context: DecideContext,
                     files: list[list[Location]], sizes: list[int]) -> list[Any]:
        """A global stage's decision over every task's keys (``files``: each task's staged
        files, which hold the keys too; ``sizes``: its documents). Another engine may
        distribute it (``GlobalStage.join``)."""
        return stage.decide(keys, context)

    # -- The run's state.

    def plan(self) -> list[Task]:
        """Takes the folder's lock (``engines.lock``), then starts the run's state or checks
        the one there (same config, inputs and reader options; inputs unchanged since), and
        returns every task of the run. The lock is held until :meth:`release`."""
        fresh = not self.state.exists()
        self._lock = self.state.lock()
        self._lock.acquire()
        try:
            tasks = self._start_or_resume()
            self._earlier = self.state.wall_seconds()
            return tasks
        except BaseException:
            self.release()
            if fresh:
                self.state.discard_if_empty()  # refused before it began: leave the folder as it was
            raise

    def release(self) -> None:
        """Gives back the output folder's lock taken by :meth:`plan` (and removes
        ``OUT/.tokpipe`` when the lock was all the removed staging left there)."""
        lock, self._lock = self._lock, None
        if lock is not None and self._earlier is not None and self.state.identity() is not None:
            # The run's staging is there (it did not finish, or keeps its staging): its
            # wall time so far, for the next call's manifest.
            self.state.record_wall_seconds(self.wall_seconds())
        if lock is not None:
            lock.release()
            if self.state.identity() is None:
                self.state.discard_if_empty()

    def identity_digest(self) -> str:
        """The digest of what this run is (``state.identity_digest``), recorded in its
        manifest so that a rerun of the same command finds it finished."""
        return identity_digest(self._identity())

    def wall_seconds(self, since: float | None = None) -> float:
        """The run's wall time so far: its earlier calls' (recorded in its staging) and this
        call's, from ``since`` (a ``time.perf_counter()``; by default this executor's start)."""
        this_call = time.perf_counter() - (self._started if since is None else since)
        return round((self._earlier or 0.0) + this_call, 3)

    def run_wall_seconds(self) -> float | None:
        """For a result: the run's wall time when earlier calls took part in it, else None."""
        return self.wall_seconds() if self._earlier else None

    def finish_staging(self) -> None:
        """After the manifest is written: the staging goes, unless ``keep_staging``."""
        if not self.options.keep_staging:
            self.state.remove_staging()

    def check_lock(self) -> None:
        """Stops the run (``LockHeld``) if another run took over its lock."""
        if self._lock is not None:
            self._lock.check()

    def _identity(self) -> dict[str, Any]:
        reader = asdict(self.options.reader)
        reader["strict"] = False  # strict only changes whether a run stops, not its output
        identity = {"config": self.config.to_dict(), "inputs": self.inputs, "reader": reader}
        if self.options.output_format != "parquet":
            # Another format is another output: a resume with another one is refused as another
            # config is. (Absent for Parquet, so that runs begun before the option resume.)
            identity["output_format"] = self.options.output_format
        if self.options.rejected_by_stage:
            # Another layout of rejected/, and staged rejected documents that carry their
            # stage's place: a resume without the option is refused as another format is.
            identity["rejected_by_stage"] = True
        return identity

    def _start_or_resume(self) -> list[Task]:
        identity = self._identity()
        if self.options.overwrite:
            self.state.clear()
        previous = self.state.identity()
        if previous is not None and previous != identity and self.state.begun_for_this_output() \
                and not self.state.committed_anything():
            # The run there, begun for this output, never committed a unit of work (a stage
            # that failed at its first task, a run stopped at once): nothing of it would be
            # reused, so the corrected command starts over rather than being refused as
            # another config. Only what tokpipe wrote goes (RunState.discard_unfinished); a
            # staging folder holding another output's run is refused below, as before.
            self.state.discard_unfinished()
            previous = None
        if previous is not None:
            if previous != identity:
                raise OutputConflictError(f"{self.out} holds a run with a different config, inputs, reader options or "
                                          "output format; use --overwrite to start over, or another output folder")
            tasks = self.state.tasks()
            self.state.check_inputs()
            return tasks
        finished = self.state.finished_manifest()
        if finished is not None and finished[RUN_KEY] != identity_digest(identity) and _read_nothing(finished):
            # A finished run that read no document failed (engines.outcome): the corrected
            # command (another --text-field, say) replaces it. Only the files it wrote go
            # (RunState.discard_finished): a folder that holds anything else is refused below.
            self.state.discard_finished(finished)
            finished = None
        if finished is not None:
            if finished[RUN_KEY] != identity_digest(identity):
                raise OutputConflictError(f"{self.out} holds a finished run with a different config, inputs, reader "
                                          "options or output format; use --overwrite to start over, or another output "
                                          "folder")
            self.state.check_inputs(finished.get("input_files", {}), finished=True)
            self.finished = finished  # a rerun of the same command: nothing to redo
            return []
        if self.state.holds_anything():
            if self.state.root != self.out / STATE_DIR:
                raise OutputConflictError(f"{self.out} is not empty, and the staging folder {self.state.root} holds no "
                                          "run of it (was it begun on another machine, or with another --staging-dir?); "
                                          "give that --staging-dir to resume, or use --overwrite or another folder")
            raise OutputConflictError(f"{self.out} is not empty and holds no tokpipe run; use --overwrite or another "
                                      "folder")
        tasks = plan_tasks(self.inputs, self.options.reader)
        self.state.begin(identity, tasks, len(self.segments))
        return tasks

    def pending(self, k: int, tasks: Sequence[Task], staging: Staging) -> list[Task]:
        """The tasks whose segment ``k`` is still to do (``RunState.pending``)."""
        return self.state.pending(k, tasks, staging.accepts)

    def segment_units(self, k: int, tasks: Sequence[Task], staging: Staging) -> list[WorkUnit]:
        """Segment ``k`` of each of ``tasks`` as work units, staging with ``staging``."""
        def spec(s: Any) -> dict[str, Any] | None:
            return s.to_wire() if s is not None else None

        if self._rewriters is None:
            self._rewriters = rewriters(self.config)
        stage_specs, global_spec = self.segments[k]
        documents = [s.to_wire() for s in stage_specs]
        previous_global = spec(self.segments[k - 1][1]) if k else None
        # The place of the segment's first stage in the config.
        first = sum(len(specs) + (closing is not None) for specs, closing in self.segments[:k])
        reader = asdict(self.options.reader)
        reader["strict"] = self.options.strict
        sizes = self.state.input_sizes()
        return [WorkUnit(run_segment_task, (self.state, k, t, (documents, spec(global_spec)), previous_global, reader,
                                            staging, first, self._rewriters, self.options.rejected_by_stage),
                         task_label(t), task_bytes(t, sizes.get(t.path)))
                for t in tasks]

    # -- tokpipe clean.

    def run(self) -> RunResult:
        tasks = self.plan()
        try:
            if self.finished is not None:
                return self._finished_result(self.finished)
            # A full disk outside a work unit (a global decision, the manifest): one line too.
            with disk_full_in_one_line(str(self.out), "the run's own steps"):
                return self._run(tasks)
        finally:
            self.release()

    def _run(self, tasks: list[Task]) -> RunResult:
        workers = max(1, self.options.workers)
        staging = ParquetStaging()
        tasks_run = 0
        with self.pool(workers):
            for k, (_, global_spec) in enumerate(self.segments):
                todo = self.pending(k, tasks, staging)
                tasks_run += len(todo)
                self.map(f"segment {k + 1}/{len(self.segments)}", self.segment_units(k, todo, staging))
                if global_spec is not None:
                    decide(self.state, k, tasks, global_spec, self._report_units, self.decide_stage)
            packs = self._pack(tasks, workers)
        self.check_lock()
        return self._finish(tasks, packs, tasks_run)

    def _report_units(self, phase: str, done: int, total: int) -> None:
        self.progress(ProgressUpdate(phase, done, total, "units"))

    def _pack(self, tasks: list[Task], workers: int) -> list[dict[str, Any]]:
        # `layout`: the kept shards' folder; a run begun by a tokpipe that packed into OUT itself
        # has its packed groups redone into OUT/data (its shards there are stale shards).
        self.state.begin_pack({"workers": workers, "shard_size": self.options.shard_size, "layout": DATA_DIR})
        kept_schema, rejected_schema = self._output_schemas(tasks)
        folders = stage_folders([s.type for s in self.config.stages]) if self.options.rejected_by_stage else None
        groups = [g for g in np.array_split(np.array([t.index for t in tasks], dtype=int), workers)]
        units = []
        for w, group in enumerate(groups):
            if self.state.packed(w):
                continue
            # A group that did not finish may have left shards: they are redone from scratch.
            self.state.remove_group_shards(w)
            units.append(WorkUnit(pack_group, (self.state, w, group.tolist(), len(self.segments),
                                               self.options.shard_size, kept_schema, rejected_schema,
                                               self.options.output_format, folders),
                                  f"the final shards of worker group {w}"))
        self.map("writing shards", units)
        self.state.remove_shards_past(workers)
        return [self.state.pack(w) for w in range(len(groups))]

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
                summary = self.state.summary(k, t.index)
                rejected += [_without(fs.read_schema(path), STAGED_PLACE)
                             for path in self.state.staged_files(k, summary, "rejected")]
                if k == last:
                    kept += [fs.read_schema(path) for path in self.state.staged_files(k, summary, "kept")]
        base = [pa.field(ID, pa.string()), pa.field(TEXT, pa.string())]
        return union_schema(kept, base), union_schema(rejected, base)

    def _finish(self, tasks: list[Task], packs: list[dict[str, Any]], tasks_run: int) -> RunResult:
        stats = self.state.merged_stats(tasks, [g.run_name if g is not None else None for _, g in self.segments])
        errors, _ = self.state.merge_errors(tasks)
        # Kept shards are named from OUT (data/part-...), as the manifest lists them; rejected
        # ones from OUT/rejected, as write_manifest takes them.
        shards = [ShardInfo(**{**s, "name": f"{DATA_DIR}/{s['name']}"}) for p in packs for s in p["shards"]]
        rejected = [ShardInfo(**s) for p in packs for s in p["rejected"]]
        ordered = {READ_STATS: stats[READ_STATS],
                   **{s.run_name: stats[s.run_name] for s in self.config.stages if s.run_name in stats}}
        manifest = build_manifest(shards=shards, rejected=rejected, config=self.config.to_dict(),
                                  stats={name: s.as_dict() for name, s in ordered.items()},
                                  extra={"inputs": self.inputs, "workers": self.options.workers, "errors": errors,
                                         "wall_seconds": self.wall_seconds(),  # every call's
                                         "shard_size": self.options.shard_size, RUN_KEY: self.identity_digest(),
                                         "input_files": self.state.recorded_inputs()})
        card = clean_card(manifest, shard_suffix(self.options.output_format),
                          [(s.type, dict(s.params)) for s in self.config.stages], DATA_DIR, REJECTED_DIR)
        fs.write_text(self.out / "README.md", card)
        publish_manifest(self.out, manifest)  # last: the run is finished
        self.finish_staging()
        return RunResult(self.out, ordered, shards, rejected, errors, tasks_run,
                         manifest["wall_seconds"] if self._earlier else None)

    def _finished_result(self, manifest: dict[str, Any]) -> RunResult:
        """A rerun of a finished run whose staging was removed: its result, from its
        manifest, with nothing redone. Refused when it asks for another cut of the shards,
        which needs the staging."""
        cut = {"workers": self.options.workers, "shard_size": self.options.shard_size}
        recorded = {key: manifest.get(key) for key in cut}
        if recorded != cut:
            raise OutputConflictError(f"{self.out} holds this run, finished with workers={recorded['workers']} and "
                                      f"shard_size={recorded['shard_size']}; its staging was removed, so its shards "
                                      f"cannot be cut again for workers={cut['workers']} and "
                                      f"shard_size={cut['shard_size']}: give the same options, or use --overwrite to "
                                      "run it again (--keep-staging keeps what a new cut needs)")
        self.state.remove_staging()  # what a removal cut short by a crash may have left
        stats = {name: StageStats.from_dict(name, data) for name, data in manifest["stats"].items()}
        shards = [ShardInfo(e["path"], e["rows"], e["bytes"], e["sha256"]) for e in manifest["shards"]]
        rejected = [ShardInfo(e["path"].removeprefix(f"{REJECTED_DIR}/"), e["rows"], e["bytes"], e["sha256"])
                    for e in manifest["rejected"]]
        errors = manifest.get("errors", 0)
        wall = manifest.get("wall_seconds")
        return RunResult(self.out, stats, shards, rejected, errors if isinstance(errors, int) else 0, 0,
                         float(wall) if isinstance(wall, (int, float)) else None)


def _without(schema: pa.Schema, name: str) -> pa.Schema:
    """``schema`` without its field ``name``, if it has one."""
    index = schema.get_field_index(name)
    return schema.remove(index) if index >= 0 else schema


def _read_nothing(manifest: dict[str, Any]) -> bool:
    """Whether a finished run's manifest records that its readers yielded no document."""
    read = manifest.get("stats", {}).get(READ_STATS)
    return isinstance(read, dict) and read.get("kept") == 0
