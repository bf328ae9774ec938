"""From inputs to tasks, and from a task to its reader.

:func:`plan_tasks` expands files, folders and glob patterns into a numbered list of
:class:`~.base.Task`; big plain line-based files become several byte-range tasks so that one
file can be read by several workers. :func:`read_task` picks the reader by file name.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Callable, Iterator, Optional, Sequence, Union

import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import CorpusError
from tokpipe.storage import RemotePath

from .base import ErrorSink, ReadError, ReaderOptions, Task
from .jsonl import read_jsonl
from .lines import compression_of, line_start_at_or_after
from .parquet import read_parquet
from .text import read_text
from .warc import read_warc

__all__ = ["plan_tasks", "read_task", "format_of", "KNOWN_SUFFIXES"]

_JSONL = (".jsonl", ".json", ".ndjson")
_COMPRESSIONS = ("", ".gz", ".zst", ".zstd")
KNOWN_SUFFIXES = (
    (".txt",)
    + tuple(base + compression for base in _JSONL for compression in _COMPRESSIONS)
    + (".parquet", ".warc", ".warc.gz", ".wet", ".wet.gz")
)
_GLOB_CHARACTERS = frozenset("*?[")

Reader = Callable[[Task, ReaderOptions, Callable[[ReadError], None]], Iterator[pa.RecordBatch]]
_READERS: dict[str, Reader] = {"text": read_text, "jsonl": read_jsonl, "parquet": read_parquet, "warc": read_warc}


def format_of(path: str) -> Optional[str]:
    """``"text"``, ``"jsonl"``, ``"parquet"`` or ``"warc"`` from the file name; ``None`` if unknown."""
    lower = path.lower()
    if lower.endswith(".txt"):
        return "text"
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith((".warc", ".warc.gz", ".wet", ".wet.gz")):
        return "warc"
    for compression in _COMPRESSIONS:
        if lower.endswith(tuple(base + compression for base in _JSONL)):
            return "jsonl"
    return None


def plan_tasks(inputs: Sequence[Union[str, "os.PathLike[str]"]], options: ReaderOptions) -> list[Task]:
    """The tasks that read ``inputs``, numbered from 0 in a stable order.

    An input is a file (which must have a known suffix), a folder (walked recursively in sorted
    order, hidden files and folders skipped, files of unknown suffixes ignored) or a glob
    pattern (``**`` allowed; matches sorted). A file named twice is read once, where it first
    appears. Plain ``.jsonl``/``.json``/``.ndjson`` files, and ``.txt`` files with
    ``split="lines"``, bigger than ``options.task_bytes`` are split into byte ranges of about
    that size, each starting at a line start. Raises ``CorpusError`` for an input that does not
    exist (or a pattern that matches nothing), a file of unknown format, or no files at all.
    """
    files: list[str] = []
    seen: set[str] = set()
    for given in inputs:
        text = str(given) if isinstance(given, RemotePath) else os.fspath(given)
        where = storage.location(text)
        expanded = _expand_remote(text) if isinstance(where, RemotePath) else _expand(os.fspath(where) if storage.is_url(text) else text)
        for path in expanded:
            key = path if storage.is_remote(path) else os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                files.append(path)
    if not files:
        raise CorpusError(f"no input files found in {', '.join(map(os.fspath, inputs)) or '(no inputs)'}; known suffixes: {' '.join(KNOWN_SUFFIXES)}")
    tasks: list[Task] = []
    for path in files:
        for start, end in _ranges(path, options):
            tasks.append(Task(index=len(tasks), path=path, start=start, end=end))
    return tasks


def read_task(task: Task, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> Iterator[pa.RecordBatch]:
    """The documents of ``task`` as record batches with ``id`` and ``text`` first.

    Bad input units are passed to ``on_error`` (or raise ``CorpusError`` when
    ``options.strict``); see each format's module for what a unit and its id are. Without
    ``options.extra_fields`` the batches hold ``id`` and ``text`` only.
    """
    file_format = format_of(task.path)
    if file_format is None:
        # Planning makes such a task only for a folder it could not list (see `_walk`).
        _report_unlisted(task, options, on_error)
        return iter(())
    batches = _READERS[file_format](task, options, on_error)
    if options.extra_fields:
        return batches
    return (batch if batch.num_columns == 2 else batch.select([0, 1]) for batch in batches)


def _expand(given: str) -> list[str]:
    try:
        mode: int | None = os.stat(given).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None  # absent: a pattern, or a mistake
    except OSError:
        # It may exist but cannot be reached (a folder above it is not searchable): its task
        # records it as unreadable, rather than the run calling it absent.
        return [given]
    if mode is not None and stat.S_ISDIR(mode):
        return _walk(given)
    if mode is not None:
        if format_of(given) is None:
            raise CorpusError(f"{given}: unknown input format; known suffixes: {' '.join(KNOWN_SUFFIXES)}")
        return [given]
    if _GLOB_CHARACTERS & set(given):
        matches = _glob(given)
        files: list[str] = []
        for match in matches:
            if os.path.isdir(match):
                files.extend(_walk(match))
            elif format_of(match) is not None:
                files.append(match)
        if not matches:
            raise CorpusError(f"input pattern matches nothing: {given}")
        return files
    raise CorpusError(f"input does not exist: {given}")


def _expand_remote(given: str) -> list[str]:
    """The input files a URL names: one object, every object under a prefix (sorted, hidden
    names and unknown suffixes skipped, as for a folder) or a glob's matches."""
    where = storage.RemotePath(given)
    try:
        found = storage.objects(where, lambda key: format_of(key) is not None)
    except FileNotFoundError:
        if storage.is_pattern(where.key):
            raise CorpusError(f"input pattern matches nothing: {storage.redact(given)}") from None
        raise CorpusError(f"input does not exist: {storage.redact(given)}") from None
    if list(found) == [where.key] and format_of(where.key) is None:
        raise CorpusError(f"{storage.redact(given)}: unknown input format; known suffixes: {' '.join(KNOWN_SUFFIXES)}")
    return [f"{where.scheme}://{key}" for key in found]


def _walk(folder: str) -> list[str]:
    """The input files under ``folder``, sorted; a folder that cannot be listed is in the
    list too, so its task reports it (``unreadable_folder``) instead of it vanishing."""
    files: list[str] = []

    def unlisted(error: OSError) -> None:
        files.append(error.filename if error.filename is not None else folder)

    for root, folders, names in os.walk(folder, onerror=unlisted):
        # Sorted in place so os.walk descends in a stable order; hidden folders pruned.
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and format_of(name) is not None:
                files.append(os.path.join(root, name))
    return sorted(files)


def _report_unlisted(task: Task, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> None:
    """The one error of a folder (or an input path) that could not be listed or reached."""
    try:
        os.listdir(task.path)
    except OSError as error:
        detail = f"{type(error).__name__}: {error.strerror or error}; its files are unread"
    else:
        detail = "the folder could not be listed when the run was planned; its files are unread"
    ErrorSink(task.path, options, on_error).report("", "unreadable_folder", detail)


def _glob(pattern: str) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, sorted, but walked here: each folder is visited
    once (``glob`` follows symbolic links into folders without end when they form a loop: two
    links to ``..`` made it list 2**40 paths, growing in memory), in sorted order (so which of
    two ways into a folder counts does not depend on the filesystem), and a folder that could
    hold matches but cannot be listed is matched too, so planning records it as unreadable
    (``glob`` skips it silently). Links are followed, as ``glob`` follows them."""
    parts = pattern.split(os.sep)
    magic = next(i for i, part in enumerate(parts) if _GLOB_CHARACTERS & set(part))
    root = os.sep.join(parts[:magic]) or (os.sep if pattern.startswith(os.sep) else "")
    rest = parts[magic:]
    matcher = _pattern_regex(rest)
    # A folder k names deep may hold matches if the pattern goes deeper than k names and its
    # first k components match the folder (any folder, past a "**": but not a hidden one).
    prefixes = [_pattern_regex(rest[:k]) for k in range(len(rest))]
    matches: list[str] = []
    visited: set[tuple[int, int]] = set()

    def worth_entering(path: str, depth: int) -> bool:
        if "**" in rest[:depth]:
            return not path.rsplit("/", 1)[-1].startswith(".")
        if depth >= len(rest):
            return False
        return prefixes[depth].fullmatch(path) is not None

    def unlisted(error: OSError) -> None:
        if error.filename is not None:
            matches.append(error.filename)

    if root and matcher.fullmatch(""):
        matches.append(os.path.join(root, ""))  # "dir/**" matches "dir/" itself, as in glob
    for folder, folders, names in os.walk(root or os.curdir, onerror=unlisted, followlinks=True):
        try:
            info = os.stat(folder)
        except OSError:
            folders[:] = []
            continue
        if (info.st_dev, info.st_ino) in visited:
            folders[:] = []  # reached again through a link: a loop, or a second way in
            continue
        visited.add((info.st_dev, info.st_ino))
        relative = os.path.relpath(folder, root or os.curdir)
        prefix = "" if relative == os.curdir else relative.replace(os.sep, "/") + "/"
        depth = prefix.count("/") + 1  # of the entries of this folder
        for name in folders + names:
            path = prefix + name
            # A folder matches a pattern that ends with "/" written with one, as in glob.
            for candidate in ((path, path + "/") if name in folders else (path,)):
                if matcher.fullmatch(candidate):
                    matches.append(os.path.join(root, candidate) if root else candidate)
                    break
        folders[:] = sorted(name for name in folders if worth_entering(prefix + name, depth))
    return sorted(matches)


def _pattern_regex(parts: list[str]) -> re.Pattern[str]:
    """A regex over ``/``-separated relative paths for glob pattern components ``parts``
    (``**`` any number of folders, ``*`` and ``?`` within one name, ``[...]`` a class; names
    starting with a dot matched only by a component that starts with one, as in ``glob``)."""
    regex = ""
    for n, part in enumerate(parts):
        last = n == len(parts) - 1
        if part == "**":
            regex += "(?:[^/.][^/]*(?:/|$))*" if last else "(?:[^/.][^/]*/)*"
            continue
        regex += _name_regex(part) + ("" if last else "/")
    return re.compile(regex)


def _name_regex(part: str) -> str:
    """One glob component as a regex for one name (``fnmatch``'s rules, within a name)."""
    if not part:
        return ""  # after a pattern's trailing "/"
    # A name is never empty ("*" alone must not match the "" after a folder's "/"), and a
    # leading dot is matched only by one written, as in glob.
    out = r"(?=[^/])" if part.startswith(".") else r"(?=[^/])(?!\.)"
    i = 0
    while i < len(part):
        c = part[i]
        i += 1
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            # A class runs to the next "]" after its first character ("[]a]" holds "]").
            end = part.find("]", i + 1 if part[i:i + 1] in ("!", "]") else i)
            if end < 0:
                out += re.escape(c)
                continue
            body = part[i:end]
            negated = body.startswith("!")
            body = re.sub(r"([\\^\[\]])", r"\\\1", body[1:] if negated else body)
            # Negated, it still never matches the "/" between names.
            out += "[^/" + body + "]" if negated else "[" + body + "]"
            i = end + 1
        else:
            out += re.escape(c)
    return out


def _splittable(path: str, options: ReaderOptions) -> bool:
    if compression_of(path) is not None:
        return False  # a compressed stream can only be read from its start
    file_format = format_of(path)
    return file_format == "jsonl" or (file_format == "text" and options.split == "lines")


def _ranges(path: str, options: ReaderOptions) -> list[tuple[int, Optional[int]]]:
    """The byte ranges of ``path``'s tasks: ``[(0, None)]`` unless the file is split."""
    if not _splittable(path, options):
        return [(0, None)]
    try:
        size, _ = storage.version(path)
    except OSError:
        return [(0, None)]  # the reader reports it as unreadable
    if size <= options.task_bytes:
        return [(0, None)]
    # Cut every task_bytes, each cut moved forward to the next line start, so ranges never
    # split a line (the reader would cope, but aligned ranges make each worker's share exact).
    cuts = [0]
    with storage.open_input(path) as f:
        while True:
            cut = line_start_at_or_after(f, cuts[-1] + options.task_bytes)
            if cut >= size:
                break
            cuts.append(cut)
    bounds: list[tuple[int, Optional[int]]] = [(start, end) for start, end in zip(cuts, cuts[1:])]
    bounds.append((cuts[-1], None))
    return bounds
