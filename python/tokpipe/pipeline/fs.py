"""The filesystem seam of a run: every file the engines and ``tokpipe tokenize`` read, write,
list or remove in an output folder goes through these few functions (the shards themselves
go through ``writers``; the lock keeps its own two atomic operations, see ``engines.lock``).

Why one module: the next storage (an object store) changes what "write a file so that it
appears whole" and "list a folder" mean. Written here, that is one place to change.

A file is made atomic by writing it under :func:`temp_name` in its final folder and renaming
it into place (:func:`atomic`): a reader sees nothing or the whole file, never a prefix.
These writes are not fsynced: a run's state files are committed by a marker written last,
and what a crash cuts short is found and redone on resume (``engines.state``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["temp_name", "atomic", "publish", "write_json", "read_json", "write_text", "read_text", "exists", "is_dir",
           "size", "read_ends", "make_dirs", "listing", "remove", "remove_tree", "remove_empty_dir"]


def temp_name(final: Path) -> Path:
    """The hidden temporary path a file is written to before it is renamed to ``final``.

    Hidden (leading dot) and suffixed so that globs for finished files (``part-*.parquet``)
    and dataset loaders that skip dot-files never pick up a file still being written.
    """
    return final.with_name(f".{final.name}.tmp")


@contextmanager
def atomic(path: Path) -> Iterator[Path]:
    """Yields the temporary path to write ``path``'s content to; when the block ends without
    an error, that file is renamed to ``path`` (else removed)."""
    tmp = temp_name(path)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def publish(tmp: Path, path: Path) -> None:
    """Renames a file written under ``temp_name(path)`` into place (for a file whose writer
    stays open across calls, where :func:`atomic` does not fit)."""
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON (indented by one, keys sorted), written atomically."""
    write_text(path, json.dumps(data, indent=1, sort_keys=True))


def read_json(path: Path) -> Any:
    return json.loads(read_text(path))


def write_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) written atomically."""
    with atomic(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def exists(path: Path) -> bool:
    return path.exists()


def is_dir(path: Path) -> bool:
    return path.is_dir()


def size(path: Path) -> int:
    """The file's size in bytes (``OSError`` when it cannot be read)."""
    return path.stat().st_size


def read_ends(path: Path, n: int) -> tuple[bytes, bytes]:
    """The first and the last ``n`` bytes of a file (for magic bytes)."""
    with open(path, "rb") as f:
        head = f.read(n)
        f.seek(-n, os.SEEK_END)
        return head, f.read(n)


def make_dirs(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


def listing(directory: Path, pattern: str = "*") -> list[Path]:
    """The entries of ``directory`` whose names match ``pattern`` (a glob; nothing when the
    folder does not exist)."""
    return list(directory.glob(pattern))


def remove(path: Path) -> None:
    """Removes a file (or a symbolic link); nothing when it is not there."""
    path.unlink(missing_ok=True)


def remove_tree(path: Path, ignore_errors: bool = True) -> None:
    """Removes a folder and everything in it; nothing when it is not there. With
    ``ignore_errors`` False, what cannot be removed raises."""
    if not ignore_errors and not os.path.lexists(path):
        return
    shutil.rmtree(path, ignore_errors=ignore_errors)


def remove_empty_dir(path: Path) -> None:
    """Removes ``path`` if it is a folder with nothing in it."""
    if path.is_dir() and not any(path.iterdir()):
        path.rmdir()
