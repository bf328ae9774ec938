"""How far the work unit running in this process has read its input: what a run's progress
shows before the unit is done. Counted in whole units, a single 40 MB file (one task) showed
0.0 MB for as long as it took.

A reader says how far it is in its task with :func:`report` (a part ``done`` of ``total``, in
what it can count cheaply: bytes of the file, compressed ones for a compressed file, since a
task's size is its file's; rows of a Parquet file), once per block or batch it reads, never
per document. The engine points the meter at a counter it polls (:func:`attach`: a slot of
shared memory in a worker process, a plain one in the run's own process) and tells it the
size in bytes of each unit it starts (:func:`start`); the meter keeps the unit's bytes read so
far in that slot. With no slot (a Ray worker, a reader used on its own) a report costs a test.
Nothing in a run reads the meter back: progress never changes what a run computes.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

__all__ = ["slots", "attach", "detach", "start", "stop", "report", "active"]

# The counters this process writes to and its own index among them; the size in bytes of the
# unit running (0: none, or one that counts no bytes).
_slots: Any = None
_index = 0
_size = 0


def slots(count: int, context: Optional[Any] = None) -> Any:
    """``count`` zeroed 64-bit counters: in shared memory made by ``context`` (a
    multiprocessing context) for worker processes to write to, or plain for this process."""
    if context is not None:
        return context.Array("q", count, lock=False)
    return (ctypes.c_int64 * count)()


def attach(counters: Any, index: int) -> None:
    """This process writes its units' bytes read to ``counters[index]``."""
    global _slots, _index
    _slots, _index = counters, index


def detach() -> None:
    global _slots, _size
    _slots, _size = None, 0


def active() -> bool:
    """Whether a report now counts (a reader may skip the work of measuring otherwise)."""
    return _slots is not None and _size > 0


def start(size: Optional[int]) -> None:
    """A unit of ``size`` bytes of input starts (None: one that is not counted in bytes)."""
    global _size
    _size = max(0, size or 0)
    if _slots is not None:
        _slots[_index] = 0


def stop() -> None:
    """The unit is done: its bytes are counted by the engine from now on, not here. Called
    before its result is handed back, so the driver never counts it twice."""
    global _size
    _size = 0
    if _slots is not None:
        _slots[_index] = 0


def report(done: int, total: int) -> None:
    """The running unit has read ``done`` of the ``total`` (bytes, rows...) of its input."""
    size = _size
    if _slots is None or size <= 0 or total <= 0:
        return
    _slots[_index] = min(size, size * max(0, done) // total)
