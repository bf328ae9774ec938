"""Small file-system helpers shared by the writers: durable, atomic publication of a file, and
the sha256 digests the manifests record.

A file is written under a hidden temporary name in its final directory, flushed to disk, then
renamed into place; the directory is flushed too so the rename itself survives a crash. Readers
therefore see either nothing or the complete file under the final name, never a prefix of it.

Digests: ``hash_file``/``hash_path`` read a finished file once; ``HashingWriter`` hashes bytes
on their way to a file (no second read); ``hash_in_background`` reads a finished file on a
thread of its own (hashlib releases the GIL), for a file whose bytes never passed through
Python (a hard link of a staging file).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO

from tokpipe import storage
from tokpipe.pipeline import fs
from tokpipe.pipeline.fs import temp_name
from tokpipe.storage import Location

__all__ = ["fsync_dir", "publish", "put_in_place", "temp_name", "hash_file", "hash_path", "hash_in_background", "HashingWriter"]

# Read size for hashing: large enough that per-call overhead vanishes next to the hash itself.
_CHUNK = 1 << 20
# Writes a background HashingWriter may be behind: enough to ride out an uneven write, few
# enough that the buffers it holds stay a few writes' worth.
_HASH_IN_FLIGHT = 2


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry table so a rename in it is durable.

    Not every platform can open a directory (Windows cannot); there the rename is as durable as
    the OS makes it and nothing more can be done, so the failure is ignored.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def publish(tmp: Path, final: Location) -> tuple[int, str]:
    """Flush ``tmp`` to disk, hash it, put it in place at ``final`` (a rename, or an upload
    to object storage: ``fs.publish``); return (size, sha256 hex).

    The hash is taken from the bytes on disk after the writer closed the file, in the same pass
    as the flush, so it describes exactly the published file.
    """
    # "r+b" rather than "rb": fsync needs a writable descriptor on some platforms.
    with open(tmp, "r+b") as f:
        size, sha256 = hash_file(f)
        put_in_place(f, tmp, final)
    return size, sha256


def put_in_place(f: BinaryIO, tmp: Path, final: Location) -> None:
    """Flushes ``tmp`` (open as ``f``, written) to disk, then puts it at ``final``
    (``fs.publish``) and flushes the folder: durable locally; an upload is durable when it
    returns, so a remote ``final`` needs neither flush."""
    f.flush()
    if isinstance(final, Path):
        os.fsync(f.fileno())
    fs.publish(tmp, final)
    if isinstance(final, Path):
        fsync_dir(final.parent)


def hash_file(f: BinaryIO) -> tuple[int, str]:
    """(size, hex SHA-256) of the rest of an open binary file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    while chunk := f.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def hash_path(path: Location) -> tuple[int, str]:
    """(size, hex SHA-256) of the file at ``path`` (local or remote), read once in chunks."""
    with storage.open_input(path) as f:
        return hash_file(f)


def hash_in_background(path: Path) -> cf.Future[tuple[int, str]]:
    """``hash_path(path)`` on a thread of its own; the future holds its result. ``path`` must
    not change, nor be renamed, before the future is done."""
    future: cf.Future[tuple[int, str]] = cf.Future()

    def run() -> None:
        try:
            future.set_result(hash_path(path))
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=run, name="tokpipe-hash", daemon=True).start()
    return future


class HashingWriter:
    """A binary file opened for writing that hashes what goes through ``write``: the digest
    of a file written in Python costs no second read. ``size`` and ``hexdigest()`` describe
    the bytes written so far.

    ``in_background``: each write's bytes are hashed on a thread of the writer's own, in
    order, while the caller goes on (at most ``_HASH_IN_FLIGHT`` writes behind): the hash of
    a large file written from one thread then takes the second core instead of adding to the
    writer's time. The bytes handed to ``write`` must not change until ``hexdigest``."""

    def __init__(self, f: BinaryIO, in_background: bool = False) -> None:
        self._f = f
        self._digest = hashlib.sha256()
        self._pool = cf.ThreadPoolExecutor(1, thread_name_prefix="tokpipe-hash") if in_background else None
        self._pending: deque[cf.Future[None]] = deque()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self._pool is None:
            self._digest.update(view)
        else:
            self._pending.append(self._pool.submit(self._digest.update, view))
            while len(self._pending) > _HASH_IN_FLIGHT:
                self._pending.popleft().result()
        self.size += len(view)
        return self._f.write(view)

    def hexdigest(self) -> str:
        while self._pending:
            self._pending.popleft().result()
        return self._digest.hexdigest()

    def close(self) -> None:
        self._f.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
