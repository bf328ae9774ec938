"""The Ray engine: the same pipeline on a Ray cluster, for corpora past one machine.

It is the local engine with two parts swapped out, so its output (shards, ``rejected/``,
``errors.jsonl``, ``manifest.json``) and its resume are the local engine's, byte for byte:

- Work units run as Ray tasks instead of local processes. A unit is one input task through a
  segment's stages (its Arrow batches, batch after batch) or one worker's share of the final
  shards; each writes its own files and a summary, so a run killed halfway resumes where it
  stopped, on Ray or locally.
- The join of a global stage that describes one (``GlobalStage.join``, a ``GroupJoin``) runs
  on Ray Data: the staged keys are read task by task in parallel, made into the stage's rows
  and shuffled by ``groupby``. A join of keepers gives each document its group's first
  (``exact_dedup``: documents grouped by key); a join of pairs pairs each group's members as
  the core's ``LshIndex`` does (``minhash_dedup``: groups of equal band values), and the stage
  checks and clusters those pairs on the driver, so the clusters are the local engine's.
  Other global stages decide on the driver.

Every node must reach the inputs and the output: in object storage (``s3://``..., then the
run's state is kept in the bucket too, under ``OUT/.tokpipe``, and the nodes share nothing
else) or on a shared filesystem (NFS, Lustre) at the same path. The driver reports progress as units finish; stage
statistics come back in the units' summaries, as locally. ``ray`` is an optional dependency:
``pip install 'tokpipe[ray]'``.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import InvalidArgumentError, PipelineError
from tokpipe.storage import Location, location
from tokpipe.pipeline.base import DecideContext, GlobalStage, GroupJoin
from tokpipe.pipeline.config import PipelineConfig
from tokpipe.pipeline.engines.base import Executor, Progress, ProgressUpdate, RunOptions, RunResult, WorkUnit
from tokpipe.pipeline.engines.decide import read_column
from tokpipe.pipeline.engines.shipping import adopt_stages, stage_payload
from tokpipe.pipeline.engines.units import STAGED_KEY
from tokpipe.pipeline.engines.workers import run_unit, share_cores

__all__ = ["RayExecutor", "ray_available", "RAY_INSTALL_HINT"]

RAY_INSTALL_HINT = "the Ray engine needs Ray: pip install 'tokpipe[ray]'"


def ray_available() -> bool:
    try:
        _ray()
    except InvalidArgumentError:
        return False
    return True


def _ray() -> Any:
    """The ``ray`` module, with ``ray.data`` loaded."""
    try:
        ray = importlib.import_module("ray")
        importlib.import_module("ray.data")
    except ImportError:
        raise InvalidArgumentError(RAY_INSTALL_HINT) from None
    return ray


class RayExecutor(Executor):
    """Runs ``config`` over ``inputs`` into ``out_dir`` on Ray (see the module docstring).
    ``address``: the cluster to join (``"auto"``, ``"ray://head:10001"``), or None for the
    Ray instance already started in this process, else a new local one. ``options.workers``
    caps the work units in flight."""

    def __init__(self, config: PipelineConfig, inputs: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
                 options: RunOptions = RunOptions(), progress: Progress | None = None,
                 address: str | None = None) -> None:
        super().__init__(config, inputs, out_dir, options, progress)
        self.address = address

    def default_staging(self, out: Location) -> Location | None:
        """``OUT/.tokpipe`` wherever OUTPUT is: Ray's workers on other nodes must see the
        state, and a bucket (or a shared filesystem) is what they share."""
        return None

    def run(self) -> RunResult:
        ray = _ray()
        started = False
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            started = True
        try:
            return super().run()
        finally:
            if started:
                ray.shutdown()

    def map(self, phase: str, units: Sequence[WorkUnit]) -> list[Any]:
        ray = _ray()
        by_bytes = bool(units) and all(u.size is not None for u in units)
        weights = [u.size or 0 for u in units] if by_bytes else [1] * len(units)
        update = ProgressUpdate(phase, 0, sum(weights), "bytes" if by_bytes else "units")
        self.progress(update)
        run = ray.remote(num_cpus=1, max_retries=0)(_one_cpu_task)
        stages = stage_payload(self.config)  # a Ray worker finds a class of __main__ by no name
        in_flight: dict[Any, int] = {}
        results: list[Any] = [None] * len(units)
        limit = max(1, self.options.workers)
        next_job = 0
        try:
            while next_job < len(units) or in_flight:
                while next_job < len(units) and len(in_flight) < limit:
                    unit = units[next_job]
                    in_flight[run.remote(unit.fn, unit.args, unit.label, str(self.out), stages,
                                         storage.storage_options())] = next_job
                    next_job += 1
                done, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in done:
                    self.check_lock()
                    i = in_flight.pop(ref)
                    results[i] = _get(ray, ref)
                    update.done += weights[i]
                    if by_bytes and isinstance(results[i], dict):
                        summary = results[i]
                        update.documents += sum(int(summary.get(k, 0)) for k in ("kept", "rejected", "errors"))
                    self.progress(update)
        except BaseException:
            for ref in in_flight:
                ray.cancel(ref, force=True)
            raise
        return results

    def decide_stage(self, stage: GlobalStage, keys: Sequence[pa.Array], context: DecideContext,
                     files: list[list[Location]], sizes: list[int]) -> list[Any]:
        """The stage's join on Ray Data when it describes one (``GlobalStage.join``), else
        its ``decide`` on the driver."""
        join = stage.join()
        if join is None:
            return stage.decide(keys, context)
        phase = f"{join.name} (ray)"
        context.progress(phase, 0, 1)
        found = _keepers(join, files, sizes) if join.representatives is None else _pairs(join, files, sizes)
        context.progress(phase, 1, 1)
        return join.finish(found, keys, sizes, context)


def _one_cpu_task(fn: Callable[..., Any], args: tuple[Any, ...], label: str, place: str = "",
                  stages: bytes | None = None, storage_options: dict[str, Any] | None = None) -> Any:
    """A work unit in a Ray worker: Ray gave the task one CPU, so tokpipe's Rust pool and
    Arrow's get one thread (set before the worker's first kernel builds them; later tasks in
    the same worker find them built). ``stages``: the run's stage classes
    (``engines.shipping``)."""
    share_cores(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    if stages is not None:
        adopt_stages(stages)
    _adopt_storage(storage_options)
    return run_unit(fn, args, label, place)


def _adopt_storage(options: dict[str, Any] | None) -> None:
    """The driver's ``--storage-option`` values, in a Ray worker (which may run on another
    node, started without the driver's environment)."""
    if options and options != storage.storage_options():
        storage.configure(options)


def _get(ray: Any, ref: Any) -> Any:
    """A task's result; its exception as the task raised it (not wrapped in Ray's)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise PipelineError(" ".join(str(e).split())) from None


def _task_items(files: list[list[Location]], sizes: list[int]) -> list[dict[str, Any]]:
    """One item per task with documents: its staged files and its first global position."""
    bounds = np.cumsum([0, *sizes])
    return [{"files": [str(f) for f in task_files], "start": int(bounds[i])}
            for i, task_files in enumerate(files) if sizes[i]]


def _rows_of(join: GroupJoin, item: dict[str, Any]) -> pa.Table:
    """A task's rows for ``join``: of its staged keys and their global positions."""
    keys = read_column([location(f) for f in item["files"]], STAGED_KEY, pa.binary())
    return join.rows(keys, np.arange(item["start"], item["start"] + len(keys), dtype=np.int64))


def _rows(join: GroupJoin, items: list[dict[str, Any]]) -> Any:
    """Every task's rows for ``join``, as a materialised Ray dataset."""
    options = storage.storage_options()

    def rows(batch: pa.Table) -> pa.Table:
        _adopt_storage(options)  # the staged keys may be in a bucket
        return pa.concat_tables([_rows_of(join, item) for item in batch.to_pylist()])

    return _items_dataset(items).map_batches(rows, batch_size=1, batch_format="pyarrow").materialize()


def _items_dataset(items: list[dict[str, Any]]) -> Any:
    ray = _ray()
    # Progress is the driver's to show (one line per phase); Ray Data's own bars and
    # per-dataset logs would interleave with it.
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.enable_operator_progress_bars = False
    context.enable_auto_log_stats = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray.data.from_items(items, override_num_blocks=max(1, len(items)))


def _partitions(items: list[dict[str, Any]]) -> int:
    """Shuffle partitions: a few per CPU of the cluster, no more than there are tasks' worth."""
    cpus = int(_ray().cluster_resources().get("CPU", 1))
    return max(1, min(len(items), 4 * cpus))


def _keepers(join: GroupJoin, files: list[list[Location]], sizes: list[int]) -> np.ndarray:
    """For every document, the position of the first document of its group (``join`` of
    keepers: one key column), by Ray Data: a hash aggregation of the keys (count and first
    position per key) finds the keys held more than once; a second pass over the keys gives
    the documents holding them their keeper. Nothing runs per document in Python."""
    from ray.data.aggregate import Count, Min

    (key,) = join.by
    total = int(sum(sizes))
    keeper = np.arange(total, dtype=np.int64)
    items = _task_items(files, sizes)
    if not items:
        return keeper
    keyed = _rows(join, items)
    firsts = keyed.groupby(key, num_partitions=_partitions(items)).aggregate(Count(), Min("pos", alias_name="first"))
    shared, first = [], []
    for batch in firsts.iter_batches(batch_format="pyarrow", batch_size=None):
        many = batch.column("count()").to_numpy() > 1
        shared.append(_fixed_width(batch.column(key))[many])
        first.append(batch.column("first").to_numpy()[many])
    shared_keys = np.concatenate(shared) if shared else np.zeros(0, "S1")
    if not len(shared_keys):
        return keeper
    first_of = np.concatenate(first)
    order = np.argsort(shared_keys)
    wanted = _ray().put((shared_keys[order], first_of[order]))

    def keepers(batch: pa.Table) -> pa.Table:
        sorted_keys, sorted_first = _ray().get(wanted)
        k = _fixed_width(batch.column(key))
        hit = np.isin(k, sorted_keys)
        return pa.table({"pos": batch.column("pos").to_numpy()[hit],
                         "keeper": sorted_first[np.searchsorted(sorted_keys, k[hit])]})

    for batch in keyed.map_batches(keepers, batch_format="pyarrow").iter_batches(batch_format="pyarrow",
                                                                                 batch_size=None):
        keeper[batch.column("pos").to_numpy()] = batch.column("keeper").to_numpy()
    return keeper


def _fixed_width(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A binary column of keys of one length n as a numpy ``S{n}`` array, from its data
    buffer."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0:
        return np.zeros(0, "S1")
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset:column.offset + len(column) + 1]
    widths = np.diff(offsets)
    if not (widths == widths[0]).all() or widths[0] < 1:
        raise PipelineError("a join's keys must all have the same length, of at least one byte")
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    return data.view(f"S{widths[0]}")


def _pairs(join: GroupJoin, files: list[list[Location]], sizes: list[int]) -> np.ndarray:
    """Candidate pairs by a Ray Data join (``join`` of pairs): every document's rows, grouped
    once to find the groups with more than one member, then again to pair those groups'
    members (each with the group's first ``join.representatives``, in position order). The
    rows are first narrowed to the values of the last ``by`` column found in such groups
    (see ``GroupJoin``)."""
    representatives = join.representatives
    assert representatives is not None
    by = list(join.by)
    items = _task_items(files, sizes)
    if not items:
        return np.zeros((0, 2), dtype="<u4")

    def pairs_of(group: pa.Table) -> pa.Table:
        members = np.sort(group.column("pos").to_numpy())
        firsts, seconds = [], []
        for k in range(1, len(members)):
            reps = members[:min(k, representatives)]
            firsts.append(reps)
            seconds.append(np.full(len(reps), members[k]))
        a = np.concatenate(firsts) if firsts else np.zeros(0, np.int64)
        b = np.concatenate(seconds) if seconds else np.zeros(0, np.int64)
        return pa.table({"a": a.astype(np.uint32), "b": b.astype(np.uint32)})

    keyed = _rows(join, items)
    counts = keyed.groupby(by, num_partitions=_partitions(items)).count()
    shared_keys = np.unique(np.concatenate(
        [batch.column(by[-1]).to_numpy()[batch.column("count()").to_numpy() > 1]
         for batch in counts.iter_batches(batch_format="pyarrow", batch_size=None)] or [np.zeros(0, np.int64)]))
    if not len(shared_keys):
        return np.zeros((0, 2), dtype="<u4")
    wanted = _ray().put(shared_keys)

    def in_shared_group(batch: pa.Table) -> pa.Table:
        return batch.filter(pa.array(np.isin(batch.column(by[-1]).to_numpy(), _ray().get(wanted))))

    paired = keyed.map_batches(in_shared_group, batch_format="pyarrow") \
        .groupby(by, num_partitions=_partitions(items)).map_groups(pairs_of, batch_format="pyarrow")
    parts = [np.stack([batch.column("a").to_numpy(), batch.column("b").to_numpy()], axis=1)
             for batch in paired.iter_batches(batch_format="pyarrow", batch_size=None) if batch.num_rows]
    if not parts:
        return np.zeros((0, 2), dtype="<u4")
    pairs = np.unique(np.concatenate(parts), axis=0)
    return np.ascontiguousarray(pairs, dtype="<u4")
