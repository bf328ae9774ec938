"""Small file-system helpers shared by the writers: durable, atomic publication of a file.

A file is written under a hidden temporary name in its final directory, flushed to disk, then
renamed into place; the directory is flushed too so the rename itself survives a crash. Readers
therefore see either nothing or the complete file under the final name, never a prefix of it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import BinaryIO

__all__ = ["fsync_dir", "publish", "temp_name"]

# Read size for hashing: large enough that per-call overhead vanishes next to the hash itself.
_CHUNK = 1 << 20


def temp_name(final: Path) -> Path:
    """The hidden temporary path a file is written to before it is renamed to ``final``.

    Hidden (leading dot) and suffixed so that globs for finished files (``part-*.parquet``)
    and dataset loaders that skip dot-files never pick up a file still being written.
    """
    return final.with_name(f".{final.name}.tmp")


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


def publish(tmp: Path, final: Path) -> tuple[int, str]:
    """Flush ``tmp`` to disk, hash it, rename it to ``final``; return (size, sha256 hex).

    The hash is taken from the bytes on disk after the writer closed the file, in the same pass
    as the flush, so it describes exactly the published file.
    """
    # "r+b" rather than "rb": fsync needs a writable descriptor on some platforms.
    with open(tmp, "r+b") as f:
        size, sha256 = hash_file(f)
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(final.parent)
    return size, sha256


def hash_file(f: BinaryIO) -> tuple[int, str]:
    """(size, hex SHA-256) of the rest of an open binary file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    while chunk := f.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()
