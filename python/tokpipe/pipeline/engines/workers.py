"""The processes that run work units: their set-up, their lives bound to the run, and the one
line a user reads when one of them dies or the disk fills.

* :func:`share_cores` sets a process up for tokpipe's kernels (with ``allocator.keep_freed_memory``).
* :class:`WorkerPool` is the local engine's pool of worker processes. Its workers exit when
  the run's process dies (``kill -9`` of the command left them running for most of an hour,
  holding memory and files), and when one of them is killed (by the kernel's out-of-memory
  killer, most often) the run fails with one line naming the task it was running, not a
  ``BrokenProcessPool`` traceback. They are fresh interpreters that do not run the user's
  main module again (:func:`worker_context`), and get the run's stage classes at their start
  (``engines.shipping``).
* :func:`run_unit` runs one work unit in any engine and turns the failures a user can act
  on (a strict-mode input error, a full disk) into a :class:`PipelineError` of one line.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import errno
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import pyarrow as pa

from tokpipe.errors import CorpusError, PipelineError
from tokpipe.pipeline.allocator import keep_freed_memory
from tokpipe.pipeline.readers import meter

__all__ = ["share_cores", "run_unit", "WorkerPool", "disk_full_in_one_line", "worker_context"]

# Set in a worker by `_start_worker`: where it says which unit it starts (see WorkerPool).
_journal: Any = None
# Set in a worker by `_start_worker` when the run's stage classes failed to load there: the
# first unit raises it, as one line the run reports (a failing initializer only breaks the pool).
_start_error: PipelineError | None = None


def share_cores(workers: int) -> None:
    """In a worker process, before any kernel runs: this worker's share of the cores for
    tokpipe's Rust thread pool and Arrow's. Each of ``workers`` processes would otherwise start
    a pool as large as the machine, and N workers on N cores ran N x N threads, which lost
    throughput past 8 workers on 16 cores. A ``RAYON_NUM_THREADS`` the user set is kept.
    Freed memory is kept for reuse (``keep_freed_memory``)."""
    keep_freed_memory()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, cores // max(1, workers))))
    if threads.isdigit() and int(threads) > 0:
        pa.set_cpu_count(int(threads))


def _disk_full(error: BaseException) -> bool:
    """Whether ``error`` is a write that found no space (pyarrow's I/O errors carry no errno,
    only the system's message)."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error)
    return "No space left on device" in text or "Disk quota exceeded" in text


def run_unit(fn: Callable[..., Any], args: tuple[Any, ...], label: str = "", place: str = "",
             size: int | None = None) -> Any:
    """Runs one work unit (``label`` names it in the pool's journal and in messages; ``place``
    is the output folder; ``size``: its bytes of input, which the readers' progress meter
    counts as they read, ``readers.meter``). A strict-mode input error and a full disk
    become the run's failure, in one line."""
    if _start_error is not None:
        raise _start_error
    _note(label)
    meter.start(size)
    try:
        with disk_full_in_one_line(place, label or "a work unit"):
            result = fn(*args)
        _note("")  # idle again: a death now is no unit's
        return result
    except CorpusError as e:
        raise PipelineError(str(e)) from None
    finally:
        meter.stop()


@contextmanager
def disk_full_in_one_line(place: str, what: str) -> Iterator[None]:
    """A full disk met inside becomes the run's failure, one line naming the output folder
    (``place``) and what was writing: pyarrow's "No space left on device" names no file."""
    try:
        yield
    except (OSError, pa.ArrowException) as error:
        if _disk_full(error):
            raise PipelineError(f"no space left on the device of {place or 'the output folder'} while running "
                                f"{what}; free some space and rerun the same command: the run resumes where it "
                                "stopped") from None
        raise


def _note(label: str) -> None:
    """Tells the pool which unit this worker starts ("" when it is done). One small message
    is one write to the pipe, which the system makes atomic (up to PIPE_BUF, 4 KiB), so
    workers share the pipe without a lock, and a worker killed while writing leaves none
    held (a lock held by a dead worker would hang the others, and the pool)."""
    if _journal is not None:
        _journal.send((os.getpid(), label[:1000]))


def _start_worker(workers: int, parent: int, journal: Any, stages: bytes | None = None,
                  reading: tuple[Any, Any] | None = None) -> None:
    """A worker's set-up: its share of the cores, its journal, its life bound to the run's
    process (``parent``), the run's stage classes (``stages``, from
    ``shipping.stage_payload``), and its slot of the pool's progress counters (``reading``:
    the counters and the next free index, see ``WorkerPool``)."""
    global _journal, _start_error
    share_cores(workers)
    _journal = journal
    if reading is not None:
        counters, claimed = reading
        with claimed.get_lock():
            index, claimed.value = claimed.value, claimed.value + 1
        if index < len(counters):
            meter.attach(counters, index)
    if stages is not None:
        from tokpipe.pipeline.engines.shipping import adopt_stages

        try:
            adopt_stages(stages)
        except Exception as error:  # noqa: BLE001 - reported by the first unit, in one line
            _start_error = PipelineError(f"a worker process could not load the run's stage classes: "
                                         f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
    if sys.platform.startswith("linux"):
        # The kernel sends SIGKILL to this worker when the thread that started it exits,
        # which for the pool's workers is the run's main thread.
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    # Everywhere, and in case the parent died before prctl took effect: a watch on the
    # parent's pid, which changes (to 1, or a subreaper) when the parent is gone.
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="tokpipe-parent-watch", daemon=True).start()


# One swap of `sys.modules["__main__"]` at a time (see `_WorkerProcess`): two interleaved
# swaps could leave the stand-in in place.
_MAIN_SWAP = threading.Lock()


class _WorkerProcess(SpawnProcess):
    """A spawned process that does not run the user's main module again.

    A spawned child normally re-runs the parent's main script (or module) before anything
    else, so that what it defines can be unpickled there. A script that runs a pipeline at
    its top level, with no ``if __name__ == "__main__":`` guard, then starts the run again in
    every worker, which fails (``BrokenProcessPool``) after re-running whatever the script
    did first; a guarded script still re-runs its top level (its imports, its data loading)
    once per worker. A worker needs nothing from the main module: units are tokpipe's
    functions, and the stage classes come with the pool (``engines.shipping``). So while
    the child's start-up data is made (``spawn.get_preparation_data``, which reads
    ``sys.modules["__main__"]`` for a ``__file__`` or ``__spec__``), the main module is
    swapped for an empty one: the child then imports no main module."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with _MAIN_SWAP:
            main = sys.modules.get("__main__")
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                return SpawnProcess._Popen(process_obj)
            finally:
                if main is not None:
                    sys.modules["__main__"] = main


class _WorkerContext(SpawnContext):
    Process = _WorkerProcess


def worker_context() -> SpawnContext:
    """The multiprocessing context of tokpipe's worker processes: "spawn" (a fresh
    interpreter: no threads or locks of the parent forked mid-use), without the user's
    main module (see ``_WorkerProcess``)."""
    return _WorkerContext()


class WorkerPool:
    """``workers`` spawned worker processes that run work units (:func:`run_unit`). Each
    worker notes in a journal (a queue to this process) which unit it starts, so when one is
    killed, :meth:`failure` can name that unit and how the worker died. ``stages``: the
    run's stage classes (``shipping.stage_payload``), which every worker adopts as it
    starts. Each worker also takes a counter of shared memory as it starts, where its
    readers count the bytes the unit it runs has read (``readers.meter``); :meth:`reading`
    sums them, for progress within units."""

    def __init__(self, workers: int, stages: bytes | None = None) -> None:
        context = worker_context()
        # The writing end stays open here too: the executor starts workers as units are
        # submitted, each given it anew. This process only reads.
        self._notes, self._journal = context.Pipe(duplex=False)
        # One counter per worker, each worker claiming the next free one; the executor
        # starts no more than `workers` processes and replaces none.
        self._reading = meter.slots(workers, context)
        claimed = context.Value("i", 0)
        self._executor = cf.ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                                initargs=(workers, os.getpid(), self._journal, stages,
                                                          (self._reading, claimed)))
        self._running: dict[int, str] = {}
        self._processes: dict[int, Any] = {}
        # Read as it is written: a pipe holds 64 KB, and a worker whose note finds it full
        # would wait.
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read_journal, name="tokpipe-journal", daemon=True)
        self._reader.start()

    def _read_journal(self) -> None:
        while True:
            try:
                if not self._notes.poll(0.1):
                    if self._stop.is_set():
                        return
                    continue
                pid, label = self._notes.recv()
            except (EOFError, OSError):
                return  # every worker is gone
            self._running[pid] = label

    def _close_journal(self) -> None:
        """Stops the reader once it has read every note written so far."""
        self._stop.set()
        self._reader.join()
        self._notes.close()
        self._journal.close()

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], label: str, place: str,
               size: int | None = None) -> cf.Future[Any]:
        future = self._executor.submit(run_unit, fn, args, label, place, size)
        # The executor starts workers as units are submitted and keeps them (pid -> Process)
        # in `_processes`, which it empties once broken: kept here for their exit codes.
        self._processes.update(getattr(self._executor, "_processes", None) or {})
        return future

    def reading(self) -> int:
        """The bytes the units running now have read so far (a unit's count is reset as it
        ends, before its result is handed back)."""
        return sum(self._reading)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._close_journal()

    def failure(self, error: BrokenProcessPool) -> PipelineError:
        """The one-line error for a pool broken by the death of a worker."""
        self._close_journal()
        # The worker that died first has its own exit code; the executor sent the others a
        # SIGTERM afterwards.
        for process in self._processes.values():
            process.join(timeout=5)
        dead = [(pid, p.exitcode) for pid, p in self._processes.items()
                if p.exitcode is not None and p.exitcode != -signal.SIGTERM]
        if not dead:
            return PipelineError("a worker process died unexpectedly; rerun the same command to resume where the run "
                                 "stopped")
        pid, code = dead[0]
        if code is not None and code < 0:
            how = f"was killed by signal {-code} ({signal.Signals(-code).name})"
            if -code == signal.SIGKILL:
                how += ", most likely by the system for lack of memory (fewer --workers, or a smaller --task-size, " \
                       "need less)"
        else:
            how = f"exited with code {code}"
        unit = self._running.get(pid)
        when = f"while running {unit}" if unit else "between work units" if unit == "" else "while starting"
        return PipelineError(f"worker process {pid} {how} {when}; rerun the same command to resume where the run "
                             "stopped")
