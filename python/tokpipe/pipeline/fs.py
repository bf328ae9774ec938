"""The filesystem seam of a run: every file the engines and ``tokpipe tokenize`` read, write,
list or remove in an output folder goes through these few functions (the shards themselves
go through ``writers``; the lock keeps its own two atomic operations, see ``engines.lock``).

Each function takes a local :class:`~pathlib.Path` or an object-storage
:class:`~tokpipe.storage.RemotePath` (see ``tokpipe.storage``), so an output folder, and a
run's staging, can live in a bucket.

A file is made atomic by writing it under :func:`temp_name` and then putting it in place
(:func:`atomic`, :func:`publish`): a reader sees nothing or the whole file, never a prefix.
Locally, the temporary file sits in the final folder and is renamed. An object store has no
rename, so for a remote file the temporary file is local, and putting it in place is one
upload, which an object store makes visible whole or not at all (a multipart upload appears
when it completes). These writes are not fsynced: a run's state files are committed by a
marker written last, and what a crash cuts short is found and redone on resume
(``engines.state``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Union, overload

import pyarrow.parquet as pq

from tokpipe import storage
from tokpipe.storage import Location, RemotePath

__all__ = ["temp_name", "atomic", "publish", "publish_copy", "write_json", "read_json", "write_text", "read_text",
           "read_bytes", "is_file", "exists", "is_dir", "is_link", "size", "read_ends", "make_dirs", "listing", "remove",
           "remove_tree", "remove_empty_dir", "open_read", "parquet_file", "read_parquet", "read_schema",
           "arrow_filesystem"]


def temp_name(final: Location) -> Path:
    """The local temporary path a file is written to before it is put in place at ``final``.

    Locally, a hidden (leading dot), suffixed sibling of ``final``, so that globs for finished
    files (``part-*.parquet``) and dataset loaders that skip dot-files never pick up a file
    still being written. For a remote ``final``, a file in this process's own temporary
    folder, named after the URL (the same name every time this process asks).
    """
    if isinstance(final, RemotePath):
        digest = hashlib.sha256(str(final).encode()).hexdigest()[:16]
        return _upload_dir() / f"{digest}-{final.name}"
    return final.with_name(f".{final.name}.tmp")


_UPLOAD_DIRS: dict[int, Path] = {}


def _upload_dir() -> Path:
    """This process's folder of files on their way to object storage (under ``$TMPDIR``;
    keyed by pid, since a forked worker must not share its parent's)."""
    pid = os.getpid()
    folder = _UPLOAD_DIRS.get(pid)
    if folder is None:
        folder = Path(tempfile.gettempdir()) / f"tokpipe-uploads-{pid}"
        folder.mkdir(parents=True, exist_ok=True)
        _UPLOAD_DIRS[pid] = folder
    return folder


@contextmanager
def atomic(path: Location) -> Iterator[Path]:
    """Yields the local temporary path to write ``path``'s content to; when the block ends
    without an error, that file is put in place at ``path`` (else removed)."""
    tmp = temp_name(path)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    publish(tmp, path)


def publish(tmp: Path, path: Location) -> None:
    """Puts a file written under ``temp_name(path)`` in place: a rename, or for a remote
    ``path`` an upload, after which the local file is removed (for a file whose writer stays
    open across calls, where :func:`atomic` does not fit)."""
    if isinstance(path, RemotePath):
        try:
            storage.upload(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        os.replace(tmp, path)


def publish_copy(local: Path, path: Location) -> None:
    """Puts a copy of the local file ``local`` at ``path``, atomically (:func:`atomic`)."""
    if isinstance(path, RemotePath):
        storage.upload(local, path)
        return
    with atomic(path) as tmp:
        shutil.copyfile(local, tmp)


def write_json(path: Location, data: Any) -> None:
    """``data`` as JSON (indented by one, keys sorted), written atomically."""
    write_text(path, json.dumps(data, indent=1, sort_keys=True))


def read_json(path: Location) -> Any:
    return json.loads(read_text(path))


def write_text(path: Location, text: str) -> None:
    """``text`` (UTF-8) written atomically."""
    with atomic(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_text(path: Location) -> str:
    if isinstance(path, RemotePath):
        return read_bytes(path).decode("utf-8")
    return path.read_text(encoding="utf-8")


def read_bytes(path: Location) -> bytes:
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            return fs.cat_file(key)  # type: ignore[no-any-return]
    return path.read_bytes()


def is_file(path: Location) -> bool:
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            return bool(fs.isfile(key))
    return path.is_file()


def exists(path: Location) -> bool:
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            return bool(fs.exists(key))
    return path.exists()


def is_dir(path: Location) -> bool:
    """Whether ``path`` is a folder (for object storage: a prefix with objects under it)."""
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            return bool(fs.isdir(key))
    return path.is_dir()


def is_link(path: Location) -> bool:
    """Whether ``path`` is a symbolic link (never, in object storage)."""
    return isinstance(path, Path) and path.is_symlink()


def size(path: Location) -> int:
    """The file's size in bytes (``OSError`` when it cannot be read)."""
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            return int(fs.size(key))
    return path.stat().st_size


def read_ends(path: Location, n: int, total: Union[int, None] = None) -> tuple[bytes, bytes]:
    """The first and the last ``n`` bytes of a file (for magic bytes). ``total``: its size,
    when the caller has it (for an object, that spares a request)."""
    if isinstance(path, RemotePath):
        total = size(path) if total is None else total
        with storage.calling(path) as (fs, key):
            return fs.cat_file(key, 0, n), fs.cat_file(key, max(total - n, 0), total)
    with open(path, "rb") as f:
        head = f.read(n)
        f.seek(-n, os.SEEK_END)
        return head, f.read(n)


def open_read(path: Location) -> IO[bytes]:
    """A seekable binary file over ``path`` (see ``storage.open_input``)."""
    return storage.open_input(path)


def parquet_file(path: Union[str, Location]) -> pq.ParquetFile:
    """``path`` (a location, or a path or URL as text) as a
    :class:`pyarrow.parquet.ParquetFile`, local or remote; closing it closes its source."""
    where = storage.location(path)
    if isinstance(where, RemotePath):
        return pq.ParquetFile(where.key, filesystem=arrow_filesystem(where))
    return pq.ParquetFile(where)


def read_schema(path: Location) -> Any:
    """The Arrow schema of the Parquet file at ``path``."""
    if isinstance(path, RemotePath):
        return pq.read_schema(path.key, filesystem=arrow_filesystem(path))
    return pq.read_schema(path)


def read_parquet(path: Location, columns: Union[list[str], None] = None) -> Any:
    """The whole Parquet file at ``path`` as a table (``columns`` only, when given). Read as
    one file: ``pq.read_table`` goes through ``pyarrow.dataset``, whose import imports pandas
    (0.8 s of CPU in each process that reads a global stage's keys)."""
    with parquet_file(path) as f:
        return f.read(columns=columns)


def arrow_filesystem(path: RemotePath) -> Any:
    """``path``'s fsspec filesystem as pyarrow sees one (reads go through fsspec, the one
    layer; pyarrow only drives them)."""
    import pyarrow.fs as pafs

    return pafs.PyFileSystem(pafs.FSSpecHandler(storage.filesystem(path.scheme)))


def make_dirs(path: Location) -> None:
    """Makes a folder and its parents (nothing to do in object storage, which has none)."""
    if isinstance(path, Path):
        path.mkdir(parents=True, exist_ok=True)


@overload
def listing(directory: Path, pattern: str = "*") -> list[Path]: ...
@overload
def listing(directory: RemotePath, pattern: str = "*") -> list[RemotePath]: ...
@overload
def listing(directory: Location, pattern: str = "*") -> list[Location]: ...


def listing(directory: Location, pattern: str = "*") -> Any:
    """The entries of ``directory`` whose names match ``pattern`` (a glob; nothing when the
    folder does not exist)."""
    if isinstance(directory, RemotePath):
        with storage.calling(directory) as (fs, key):
            try:
                names = fs.ls(key, detail=False)
            except FileNotFoundError:
                return []
        found = []
        for name in names:
            base = name.rstrip("/").rsplit("/", 1)[-1]
            if name.rstrip("/") != key and fnmatch.fnmatchcase(base, pattern):
                found.append(directory / base)
        return sorted(found)
    return list(directory.glob(pattern))


def remove(path: Location) -> None:
    """Removes a file (or a symbolic link); nothing when it is not there."""
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            try:
                fs.rm_file(key)
            except FileNotFoundError:
                pass
        return
    path.unlink(missing_ok=True)


def remove_tree(path: Location, ignore_errors: bool = True) -> None:
    """Removes a folder and everything in it; nothing when it is not there. With
    ``ignore_errors`` False, what cannot be removed raises."""
    if isinstance(path, RemotePath):
        with storage.calling(path) as (fs, key):
            try:
                fs.rm(key, recursive=True)
            except FileNotFoundError:
                pass
            except Exception:
                if not ignore_errors:
                    raise
        return
    if not ignore_errors and not os.path.lexists(path):
        return
    shutil.rmtree(path, ignore_errors=ignore_errors)


def remove_empty_dir(path: Location) -> None:
    """Removes ``path`` if it is a folder with nothing in it (object storage has no empty
    folders)."""
    if isinstance(path, Path) and path.is_dir() and not any(path.iterdir()):
        path.rmdir()
