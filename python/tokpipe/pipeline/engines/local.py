"""The local engine: work units on N worker processes of this machine (one worker: in this
process), resumable.

It is the executor contract (``engines.base``) with :meth:`LocalExecutor.map` on a
:class:`~tokpipe.pipeline.engines.workers.WorkerPool`: processes that take their share of the
cores, end with the run, and name the unit they were running when one of them dies. The run
folder's layout is ``engines.state``'s; the units are ``engines.units``'.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from tokpipe.pipeline.engines.base import Executor, Progress, ProgressUpdate, RunOptions, RunResult, WorkUnit
from tokpipe.pipeline.engines.shipping import stage_payload
from tokpipe.pipeline.engines.workers import WorkerPool, run_unit

__all__ = ["LocalExecutor", "RunOptions", "RunResult", "ProgressUpdate", "Progress"]


class LocalExecutor(Executor):
    """Runs ``config`` over ``inputs`` into ``out_dir`` on ``options.workers`` processes (see
    ``engines.base`` for what a run does)."""

    _workers: WorkerPool | None = None

    @contextmanager
    def pool(self, workers: int) -> Iterator[None]:
        """Worker processes for :meth:`map` inside the block, handed the config's stage
        classes (``engines.shipping``); for one worker, this process."""
        self._workers = WorkerPool(workers, stage_payload(self.config)) if workers > 1 else None
        try:
            yield
        finally:
            pool, self._workers = self._workers, None
            if pool is not None:
                pool.shutdown()

    def map(self, phase: str, units: Sequence[WorkUnit]) -> list[Any]:
        by_bytes = bool(units) and all(u.size is not None for u in units)
        weights = [u.size or 0 for u in units] if by_bytes else [1] * len(units)
        update = ProgressUpdate(phase, 0, sum(weights), "bytes" if by_bytes else "units")
        place = str(self.out)

        def advance(weight: int, result: Any) -> None:
            self.check_lock()
            update.done += weight
            if by_bytes and isinstance(result, dict):  # a segment task's summary
                update.documents += int(result.get("kept", 0)) + int(result.get("rejected", 0)) + int(result.get("errors", 0))
            self.progress(update)

        self.progress(update)
        pool = self._workers
        if pool is None:
            results = []
            for unit, weight in zip(units, weights):
                results.append(run_unit(unit.fn, unit.args, unit.label, place))
                advance(weight, results[-1])
            return results
        futures: dict[cf.Future[Any], int] = {}
        try:
            for unit, weight in zip(units, weights):
                futures[pool.submit(unit.fn, unit.args, unit.label, place)] = weight
            for future in cf.as_completed(futures):
                advance(futures[future], future.result())
        except BrokenProcessPool as error:  # a worker died, while units were submitted or ran
            raise pool.failure(error) from None
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return [f.result() for f in futures]
