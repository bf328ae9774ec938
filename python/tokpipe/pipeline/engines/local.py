"""The local engine: work units on N worker processes of this machine (one worker: in this
process), resumable.

It is the executor contract (``engines.base``) with :meth:`LocalExecutor.map` on a
:class:`~tokpipe.pipeline.engines.workers.WorkerPool`: processes that take their share of the
cores, end with the run, and name the unit they were running when one of them dies. The run
folder's layout is ``engines.state``'s; the units are ``engines.units``'.

Progress moves within units: the readers count the bytes each running unit has read
(``readers.meter``, a counter per worker), and a ticker thread reports finished plus
in-flight bytes a few times a second, so a single large file moves the bar from its first
block, and the elapsed time moves while nothing finishes. The progress callback is then
called from that thread too, never at the same time as from the run's.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from tokpipe.pipeline.engines.base import Executor, Progress, ProgressUpdate, RunOptions, RunResult, WorkUnit
from tokpipe.pipeline.engines.shipping import stage_payload
from tokpipe.pipeline.engines.workers import WorkerPool, run_unit
from tokpipe.pipeline.readers import meter

__all__ = ["LocalExecutor", "RunOptions", "RunResult", "ProgressUpdate", "Progress"]

#: How often progress is reported while units run (a terminal redraws its line as often).
TICK_SECONDS = 0.25


class _Ticker:
    """Calls ``tick`` every :data:`TICK_SECONDS` on a thread of its own while in a ``with``
    block. What ``tick`` raises (a progress callback's failure) stops the ticking and is
    raised in the run's thread by :meth:`check`."""

    def __init__(self, tick: Callable[[], None]) -> None:
        self._tick = tick
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tokpipe-progress", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            try:
                self._tick()
            except BaseException as error:  # noqa: BLE001 - raised in the run's thread by check()
                self.error = error
                return

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def __enter__(self) -> _Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class LocalExecutor(Executor):
    """Runs ``config`` over ``inputs`` into ``out_dir`` on ``options.workers`` processes (see
    ``engines.base`` for what a run does)."""

    _workers: WorkerPool | None = None
    _own_reading: Any = None  # with one worker: the counter of this process's reads

    @contextmanager
    def pool(self, workers: int) -> Iterator[None]:
        """Worker processes for :meth:`map` inside the block, handed the config's stage
        classes (``engines.shipping``); for one worker, this process."""
        self._workers = WorkerPool(workers, stage_payload(self.config)) if workers > 1 else None
        if self._workers is None:
            self._own_reading = meter.slots(1)
            meter.attach(self._own_reading, 0)  # the units run here: their reader counts here
        try:
            yield
        finally:
            pool, self._workers = self._workers, None
            if pool is not None:
                pool.shutdown()
            else:
                meter.detach()
                self._own_reading = None

    def _reading(self) -> int:
        """The bytes the running units have read so far."""
        if self._workers is not None:
            return self._workers.reading()
        return int(self._own_reading[0]) if self._own_reading is not None else 0

    def map(self, phase: str, units: Sequence[WorkUnit]) -> list[Any]:
        by_bytes = bool(units) and all(u.size is not None for u in units)
        weights = [u.size or 0 for u in units] if by_bytes else [1] * len(units)
        update = ProgressUpdate(phase, 0, sum(weights), "bytes" if by_bytes else "units")
        place = str(self.out)
        finished = 0
        reporting = threading.Lock()  # the ticker's reports and the run's, one at a time

        def report() -> None:
            # The finished units and the bytes the running ones have read, never past the
            # total and never back (a unit's count is reset before its result arrives, so
            # for a moment it counts in neither).
            reading = self._reading() if by_bytes else 0
            update.done = max(update.done, min(update.total, finished + reading))
            self.progress(update)

        def tick() -> None:
            with reporting:
                report()

        def advance(weight: int, result: Any) -> None:
            nonlocal finished
            self.check_lock()
            ticker.check()
            with reporting:
                finished += weight
                if by_bytes and isinstance(result, dict):  # a segment task's summary
                    update.documents += (int(result.get("kept", 0)) + int(result.get("rejected", 0))
                                         + int(result.get("errors", 0)))
                report()

        self.progress(update)
        with _Ticker(tick) as ticker:
            results = self._run_units(units, weights, place, advance)
        ticker.check()
        return results

    def _run_units(self, units: Sequence[WorkUnit], weights: list[int], place: str,
                   advance: Callable[[int, Any], None]) -> list[Any]:
        pool = self._workers
        if pool is None:
            results = []
            for unit, weight in zip(units, weights):
                results.append(run_unit(unit.fn, unit.args, unit.label, place, unit.size))
                advance(weight, results[-1])
            return results
        futures: dict[cf.Future[Any], int] = {}
        try:
            for unit, weight in zip(units, weights):
                futures[pool.submit(unit.fn, unit.args, unit.label, place, unit.size)] = weight
            for future in cf.as_completed(futures):
                advance(futures[future], future.result())
        except BrokenProcessPool as error:  # a worker died, while units were submitted or ran
            raise pool.failure(error) from None
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return [f.result() for f in futures]
