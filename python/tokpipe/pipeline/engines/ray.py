"""The Ray engine: the same pipeline on a Ray cluster, for corpora past one machine.

It is the local engine with two parts swapped out, so its output (shards, ``rejected/``,
``errors.jsonl``, ``manifest.json``) and its resume are the local engine's, byte for byte:

- Work units run as Ray tasks instead of local processes. A unit is one input task through a
  segment's stages (its Arrow batches, batch after batch) or one worker's share of the final
  shards; each writes its own files and a summary, so a run killed halfway resumes where it
  stopped, on Ray or locally.
- The global join of the deduplication stages runs on Ray Data: the staged keys are read task
  by task in parallel and shuffled by ``groupby``. ``exact_dedup`` groups documents by key and
  keeps each group's first; ``minhash_dedup`` groups band values and pairs each bucket's
  members as the core's ``LshIndex`` does, then checks and clusters those pairs on the driver
  (``MinhashDedup.decide_with_candidates``), so the clusters are the local engine's. Other
  global stages decide on the driver.

Every node must see the inputs and the output folder at the same path: a shared filesystem
(NFS, Lustre, a FUSE-mounted bucket). The driver reports progress as units finish; stage
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

from tokpipe.errors import InvalidArgumentError, PipelineError
from tokpipe.pipeline.base import DecideContext, GlobalStage
from tokpipe.pipeline.config import PipelineConfig
from tokpipe.pipeline.engines.local import (
    _KEY,
    LocalExecutor,
    Progress,
    ProgressUpdate,
    RunOptions,
    RunResult,
    _read_column,
    unit_label,
)
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


class RayExecutor(LocalExecutor):
    """Runs ``config`` over ``inputs`` into ``out_dir`` on Ray (see the module docstring).
    ``address``: the cluster to join (``"auto"``, ``"ray://head:10001"``), or None for the
    Ray instance already started in this process, else a new local one. ``options.workers``
    caps the work units in flight."""

    def __init__(self, config: PipelineConfig, inputs: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
                 options: RunOptions = RunOptions(), progress: Progress | None = None,
                 address: str | None = None) -> None:
        super().__init__(config, inputs, out_dir, options, progress)
        self.address = address

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

    def _pool(self, workers: int) -> None:
        return None

    def _map(self, pool: Any, phase: str, jobs: list[tuple[Callable[..., Any], tuple[Any, ...]]],
             sizes: list[int] | None = None) -> list[Any]:
        ray = _ray()
        weights = sizes or [1] * len(jobs)
        update = ProgressUpdate(phase, 0, sum(weights), "bytes" if sizes else "units")
        self.progress(update)
        run = ray.remote(num_cpus=1, max_retries=0)(_one_cpu_task)
        in_flight: dict[Any, int] = {}
        results: list[Any] = [None] * len(jobs)
        limit = max(1, self.options.workers)
        next_job = 0
        try:
            while next_job < len(jobs) or in_flight:
                while next_job < len(jobs) and len(in_flight) < limit:
                    fn, args = jobs[next_job]
                    in_flight[run.remote(fn, args, str(self.out))] = next_job
                    next_job += 1
                done, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in done:
                    self.check_lock()
                    i = in_flight.pop(ref)
                    results[i] = _get(ray, ref)
                    update.done += weights[i]
                    if sizes and isinstance(results[i], dict):
                        summary = results[i]
                        update.documents += sum(int(summary.get(k, 0)) for k in ("kept", "rejected", "errors"))
                    self.progress(update)
        except BaseException:
            for ref in in_flight:
                ray.cancel(ref, force=True)
            raise
        return results

    def _decide_stage(self, stage: GlobalStage, keys: Sequence[pa.Array], context: DecideContext,
                      files: list[list[Path]], sizes: list[int]) -> list[Any]:
        from tokpipe.pipeline.stages.dedup import ExactDedup
        from tokpipe.pipeline.stages.minhash import MinhashDedup

        if isinstance(stage, ExactDedup):
            context.progress("key join (ray)", 0, 1)
            keeper = _exact_keepers(files, sizes)
            context.progress("key join (ray)", 1, 1)
            bounds = np.cumsum([0, *sizes])
            return [keeper[bounds[i]:bounds[i + 1]] for i in range(len(sizes))]
        if isinstance(stage, MinhashDedup) and stage.verify != "signature":
            context.progress("band join (ray)", 0, 1)
            pairs = _minhash_candidates(stage, files, sizes)
            context.progress("band join (ray)", 1, 1)
            return stage.decide_with_candidates(keys, pairs, context)
        return stage.decide(keys, context)


def _one_cpu_task(fn: Callable[..., Any], args: tuple[Any, ...], place: str = "") -> Any:
    """A work unit in a Ray worker: Ray gave the task one CPU, so tokpipe's Rust pool and
    Arrow's get one thread (set before the worker's first kernel builds them; later tasks in
    the same worker find them built)."""
    share_cores(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    return run_unit(fn, args, unit_label(fn, args), place)


def _get(ray: Any, ref: Any) -> Any:
    """A task's result; its exception as the task raised it (not wrapped in Ray's)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise PipelineError(" ".join(str(e).split())) from None


def _task_items(files: list[list[Path]], sizes: list[int]) -> list[dict[str, Any]]:
    """One item per task with documents: its staged files and its first global position."""
    bounds = np.cumsum([0, *sizes])
    return [{"files": [str(f) for f in task_files], "start": int(bounds[i])}
            for i, task_files in enumerate(files) if sizes[i]]


def _keys_of(item: dict[str, Any]) -> tuple[pa.Array, np.ndarray]:
    """A task's staged keys and their global positions."""
    keys = _read_column([Path(f) for f in item["files"]], _KEY, pa.binary())
    return keys, np.arange(item["start"], item["start"] + len(keys), dtype=np.int64)


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


def _exact_keepers(files: list[list[Path]], sizes: list[int]) -> np.ndarray:
    """For every document, the position of the first document with its key, by Ray Data:
    a hash aggregation of the keys (count and first position per key) finds the keys held
    more than once; a second pass over the keys gives the documents holding them their
    keeper. Nothing runs per document in Python."""
    from ray.data.aggregate import Count, Min

    total = int(sum(sizes))
    keeper = np.arange(total, dtype=np.int64)
    items = _task_items(files, sizes)
    if not items:
        return keeper

    def keys(batch: pa.Table) -> pa.Table:
        tables = []
        for item in batch.to_pylist():
            k, positions = _keys_of(item)
            tables.append(pa.table({"key": k.cast(pa.binary()), "pos": positions}))
        return pa.concat_tables(tables)

    keyed = _items_dataset(items).map_batches(keys, batch_size=1, batch_format="pyarrow").materialize()
    firsts = keyed.groupby("key", num_partitions=_partitions(items)).aggregate(Count(), Min("pos", alias_name="first"))
    shared, first = [np.zeros(0, "S16")], [np.zeros(0, np.int64)]
    for batch in firsts.iter_batches(batch_format="pyarrow", batch_size=None):
        many = batch.column("count()").to_numpy() > 1
        shared.append(_fixed16(batch.column("key"))[many])
        first.append(batch.column("first").to_numpy()[many])
    shared_keys = np.concatenate(shared)
    if not len(shared_keys):
        return keeper
    first_of = np.concatenate(first)
    order = np.argsort(shared_keys)
    wanted = _ray().put((shared_keys[order], first_of[order]))

    def keepers(batch: pa.Table) -> pa.Table:
        sorted_keys, sorted_first = _ray().get(wanted)
        k = _fixed16(batch.column("key"))
        hit = np.isin(k, sorted_keys)
        return pa.table({"pos": batch.column("pos").to_numpy()[hit],
                         "keeper": sorted_first[np.searchsorted(sorted_keys, k[hit])]})

    for batch in keyed.map_batches(keepers, batch_format="pyarrow").iter_batches(batch_format="pyarrow",
                                                                                 batch_size=None):
        keeper[batch.column("pos").to_numpy()] = batch.column("keeper").to_numpy()
    return keeper


def _fixed16(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A binary column of 16-byte keys as a numpy ``S16`` array, from its data buffer."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0:
        return np.zeros(0, "S16")
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset:column.offset + len(column) + 1]
    if not (np.diff(offsets) == 16).all():
        raise ValueError("exact_dedup keys must be 16 bytes")
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    return data.view("S16")


def _band_keys(signatures: np.ndarray, band: int, rows: int) -> np.ndarray:
    """A 64-bit key of each signature's band ``band``: its values chained through a
    multiply-xorshift mix. Documents group by it as the core's ``LshIndex`` groups them by
    its own 64-bit band hash: equal bands always meet, unequal ones collide with odds of
    2^-64 a pair."""
    values = signatures[:, band * rows:(band + 1) * rows].astype(np.uint64)
    h = np.full(len(values), np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(band), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in values.T:
            h ^= column
            h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xC4CEB9FE1A85EC53)
            h ^= h >> np.uint64(29)
    return h.view(np.int64)


def _minhash_candidates(stage: Any, files: list[list[Path]], sizes: list[int]) -> np.ndarray:
    """Candidate pairs of ``minhash_dedup`` by a Ray Data band join: every document's band
    keys, grouped once to find the buckets with more than one member, then again to pair
    those buckets' members (each with the bucket's first ``REPRESENTATIVES``, in position
    order), as ``LshIndex`` pairs them. Empty documents take no part, as there."""
    from tokpipe.pipeline.stages.minhash import REPRESENTATIVES

    bands, rows = stage.lsh_params()
    width = 8 + 4 * stage.num_perm
    items = _task_items(files, sizes)
    if not items:
        return np.zeros((0, 2), dtype="<u4")

    def band_rows(batch: pa.Table) -> pa.Table:
        tables = []
        for item in batch.to_pylist():
            k, positions = _keys_of(item)
            if not len(k):
                continue
            raw = np.frombuffer(k.buffers()[1], dtype=np.uint8)[k.offset * width:(k.offset + len(k)) * width]
            signatures = raw.reshape(-1, width)[:, 8:].copy().view("<u4")
            live = (signatures != np.uint32(0xFFFFFFFF)).any(axis=1)
            signatures, positions = signatures[live], positions[live]
            for band in range(bands):
                tables.append(pa.table({"band": np.full(len(positions), band, dtype=np.int32),
                                        "key": _band_keys(signatures, band, rows), "pos": positions}))
        if not tables:
            return pa.table({"band": pa.array([], pa.int32()), "key": pa.array([], pa.int64()),
                             "pos": pa.array([], pa.int64())})
        return pa.concat_tables(tables)

    def pairs_of(group: pa.Table) -> pa.Table:
        members = np.sort(group.column("pos").to_numpy())
        firsts, seconds = [], []
        for k in range(1, len(members)):
            reps = members[:min(k, REPRESENTATIVES)]
            firsts.append(reps)
            seconds.append(np.full(len(reps), members[k]))
        a = np.concatenate(firsts) if firsts else np.zeros(0, np.int64)
        b = np.concatenate(seconds) if seconds else np.zeros(0, np.int64)
        return pa.table({"a": a.astype(np.uint32), "b": b.astype(np.uint32)})

    keyed = _items_dataset(items).map_batches(band_rows, batch_size=1, batch_format="pyarrow").materialize()
    counts = keyed.groupby(["band", "key"], num_partitions=_partitions(items)).count()
    shared_keys = np.unique(np.concatenate(
        [batch.column("key").to_numpy()[batch.column("count()").to_numpy() > 1]
         for batch in counts.iter_batches(batch_format="pyarrow", batch_size=None)] or [np.zeros(0, np.int64)]))
    if not len(shared_keys):
        return np.zeros((0, 2), dtype="<u4")
    wanted = _ray().put(shared_keys)

    def in_shared_bucket(batch: pa.Table) -> pa.Table:
        # The key alone (seeded with the band) picks the rows; the groupby below by band
        # and key makes the exact buckets, and a row let through by a cross-band collision
        # only makes a bucket of one, which pairs nothing.
        return batch.filter(pa.array(np.isin(batch.column("key").to_numpy(), _ray().get(wanted))))

    paired = keyed.map_batches(in_shared_bucket, batch_format="pyarrow") \
        .groupby(["band", "key"], num_partitions=_partitions(items)).map_groups(pairs_of, batch_format="pyarrow")
    parts = [np.stack([batch.column("a").to_numpy(), batch.column("b").to_numpy()], axis=1)
             for batch in paired.iter_batches(batch_format="pyarrow", batch_size=None) if batch.num_rows]
    if not parts:
        return np.zeros((0, 2), dtype="<u4")
    pairs = np.unique(np.concatenate(parts), axis=0)
    return np.ascontiguousarray(pairs, dtype="<u4")
