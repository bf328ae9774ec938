"""The process's allocators, as tokpipe sets them: glibc's malloc keeps what a batch frees for
the next batch (:func:`keep_freed_memory`, in the processes tokpipe runs itself), and a phase
that held a lot hands what it freed back to the system when it ends (:func:`release_memory`),
so that the next phase's memory does not come on top of it.

Both go through the C library with ``ctypes`` and do nothing where it has no ``mallopt`` or
``malloc_trim`` (not glibc).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pyarrow as pa

__all__ = ["keep_freed_memory", "release_memory"]


def _libc_function(name: str) -> Any:
    """The C library's function ``name``, or None when it has none."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def keep_freed_memory() -> None:
    """Has glibc's malloc keep the memory a process frees for its next allocations, in the
    processes tokpipe runs itself (the command line's and its workers). A batch's buffers
    (texts, token ids: a few MB each) were otherwise mapped fresh from the kernel and handed
    back when freed, so every batch paid a page fault and a zeroed page per 4 KiB it wrote:
    reading 280 MB of JSON Lines took 0.75 CPU-s, 0.63 with this (``bench_reader_malloc.py``).
    Blocks up to 32 MiB come from the heap instead of a mapping of their own, and the heap
    keeps up to 1 GiB of free memory. No effect where the C library has no ``mallopt``."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 1 << 30)


def release_memory() -> None:
    """Hands the memory freed so far back to the system: Arrow's pool's free memory, and the
    free pages of every glibc arena (``malloc_trim``). For the end of a phase that held much
    more than the next one needs (a global stage's band buffers, a slice of texts): with
    :func:`keep_freed_memory` glibc would keep up to 1 GiB of it, and a phase whose blocks
    come from other arenas (other threads) or sizes would not reuse it: the process that had
    decided ``minhash_dedup`` over 6M documents kept 526 MiB it no longer used while the
    workers wrote the final shards (benches/RESULTS.md, "Memory of the minhash decide,
    bounded")."""
    pa.default_memory_pool().release_unused()
    malloc_trim = _libc_function("malloc_trim")
    if malloc_trim is not None:
        malloc_trim(0)
