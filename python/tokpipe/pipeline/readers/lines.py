"""Line streams for the line-based formats (JSON Lines, text): compression, byte ranges, numbering.

:func:`iter_blocks` yields the lines a task owns a block of whole lines at a time (what the
JSON Lines reader hands to its Rust parser), :func:`iter_lines` one line at a time, both
numbered 1-based as in the whole (decompressed) file, so a document's generated id does not
depend on how the file was split into tasks.

Byte ranges (plain files only): a range ``[start, end)`` owns the lines that *start* inside it,
so any partition of a file into ranges reads each line exactly once, aligned or not. The number
of the first owned line is one plus the newlines before it; they are counted with
``bytes.count`` over the file's head in large chunks, from the nearest checkpoint this process
already knows (the end of the previous range of the same file is one), so a worker reading
consecutive ranges of a file counts each byte once.

A corrupt or truncated compressed stream ends the stream with one ``corrupt_stream`` error at
the line where it broke; the lines before it have been yielded.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tempfile
import zlib
from collections import OrderedDict
from typing import BinaryIO, Callable, Iterator, Optional

from tokpipe import _core, storage

from . import meter
from .base import ErrorSink, Task

__all__ = ["UTF8_BOM", "BLOCK_BYTES", "compression_of", "open_decompressed", "iter_blocks", "iter_lines",
           "newlines_before", "line_start_at_or_after"]

_COUNT_CHUNK = 16 << 20
_REST_OF_LINE_CHUNK = 1 << 20
#: The size of a block of lines (see :func:`iter_blocks`): big enough that a call per block
#: costs nothing next to its lines, small enough to stay in cache-friendly, bounded memory.
BLOCK_BYTES = 8 << 20
_READ_CHUNK = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"
# What a broken gzip or zstd stream raises (the Rust zstd stream raises OSError).
_STREAM_ERRORS = (OSError, EOFError, zlib.error)

# (real path, size, mtime_ns) -> {offset of a line start: newlines before it}. Bounded: a
# worker only ever needs the checkpoints of the few files it is reading.
_checkpoints: OrderedDict[tuple[str, int, int | str], dict[int, int]] = OrderedDict()
_MAX_CHECKPOINT_FILES = 64


def compression_of(path: str) -> Optional[str]:
    """``"gzip"``, ``"zstd"`` or ``None`` (plain), from the file name."""
    lower = path.lower()
    if lower.endswith(".gz"):
        return "gzip"
    if lower.endswith(".zst") or lower.endswith(".zstd"):
        return "zstd"
    return None


class _ZstdStream(io.RawIOBase):
    """A zstd file as a raw stream, decompressed in Rust a read at a time
    (``tokpipe_core::zstd_file``): a frame is never decompressed whole, so a small file of
    repeated bytes cannot fill memory, a corrupt frame loses only the bytes after the last
    whole read, and a file that ends inside a frame raises ``OSError`` where
    ``zstandard``'s stream readers would end quietly."""

    def __init__(self, path: str) -> None:
        self._file = _core.ZstdFile(path)
        #: The compressed file's size (progress counts its bytes).
        self.size = os.path.getsize(path)

    def compressed_position(self) -> int:
        """The bytes of the compressed file read so far."""
        return self._file.compressed_position()  # type: ignore[no-any-return]

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._file.close()
        super().close()

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        return self._file.readinto(buffer)  # type: ignore[no-any-return]


def open_decompressed(path: str | os.PathLike[str]) -> BinaryIO:
    """``path``'s bytes, decompressed by its suffix (``.gz``, ``.zst``): the one way tokpipe
    opens compressed input, so a truncated or damaged stream raises everywhere."""
    return _open_decompressed(os.fspath(path), compression_of(os.fspath(path)))


def _open_decompressed(path: str, compression: Optional[str]) -> BinaryIO:
    if compression == "zstd":
        if storage.is_remote(path):
            return io.BufferedReader(_spooled_zstd(path), buffer_size=1 << 20)  # type: ignore[return-value]
        return io.BufferedReader(_ZstdStream(path), buffer_size=1 << 20)  # type: ignore[return-value]
    raw = storage.open_input(path)
    if compression == "gzip":
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
        stream.myfileobj = raw  # type: ignore[attr-defined]  # closed with the stream, as gzip.open does
        return stream  # type: ignore[return-value]
    return raw


def _spooled_zstd(url: str) -> _ZstdStream:
    """A remote zstd file, copied to a local temporary file first: the Rust decoder, which
    bounds memory and catches truncation, reads files. The copy is unlinked once open (it
    lives while the stream does), so a killed worker leaves nothing behind but in $TMPDIR
    during the copy."""
    fd, tmp = tempfile.mkstemp(prefix="tokpipe-input-", suffix=".zst")
    os.close(fd)
    try:
        with storage.open_input(url) as source, open(tmp, "wb") as copy:
            shutil.copyfileobj(source, copy, 8 << 20)
        return _ZstdStream(tmp)
    finally:
        os.unlink(tmp)


def _compressed_progress(stream: BinaryIO, compression: str) -> Optional[Callable[[], None]]:
    """For a compressed stream: a call that reports to the progress meter how much of the
    compressed file has been read (None when the meter counts nothing now). Progress counts
    file bytes, which for a compressed file are not the bytes the reader gets."""
    if not meter.active():
        return None
    if compression == "gzip":
        raw = stream.myfileobj  # type: ignore[attr-defined]
        size = storage.open_size(raw)
        return lambda: meter.report(raw.tell(), size)
    zstd = getattr(stream, "raw", None)
    if isinstance(zstd, _ZstdStream):
        return lambda: meter.report(zstd.compressed_position(), zstd.size)
    return None


def _checkpoint_key(path: str) -> tuple[str, int, int | str]:
    size, version = storage.version(path)
    return (path if storage.is_remote(path) else os.path.realpath(path), size, version)


def _remember(path: str, offset: int, newlines: int) -> None:
    key = _checkpoint_key(path)
    _checkpoints.setdefault(key, {})[offset] = newlines
    _checkpoints.move_to_end(key)
    while len(_checkpoints) > _MAX_CHECKPOINT_FILES:
        _checkpoints.popitem(last=False)


def newlines_before(path: str, offset: int) -> int:
    """How many ``\\n`` bytes a plain file holds before ``offset``."""
    known = _checkpoints.get(_checkpoint_key(path), {})
    base = max((at for at in known if at <= offset), default=0)
    count = known.get(base, 0)
    with storage.open_input(path) as f:
        f.seek(base)
        remaining = offset - base
        while remaining > 0:
            chunk = f.read(min(_COUNT_CHUNK, remaining))
            if not chunk:
                break
            count += count_newlines(chunk)
            remaining -= len(chunk)
    _remember(path, offset, count)
    return count


def _skip_rest_of_line(f: BinaryIO) -> int:
    """Reads up to and including the next newline (or EOF); returns the bytes read."""
    skipped = 0
    while True:
        piece = f.readline(_REST_OF_LINE_CHUNK)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def line_start_at_or_after(f: BinaryIO, offset: int) -> int:
    """The offset of the first line that starts at or after ``offset`` in a seekable plain file."""
    if offset == 0:
        return 0
    f.seek(offset - 1)
    if f.read(1) == b"\n":
        return offset
    return offset + _skip_rest_of_line(f)


def iter_blocks(task: Task, sink: ErrorSink, max_line_bytes: int) -> Iterator[tuple[int, Optional[memoryview]]]:
    """The lines ``task`` owns, a block of whole lines at a time, as ``(number of the block's
    first line, block)``.

    A block is about :data:`BLOCK_BYTES` of whole lines with their line endings (the last
    line of the file may lack its ``\\n``); a byte-order mark at the start of line 1 is
    removed. It is a read-only view into the reader's buffer, valid until the next block is
    asked for: a consumer that keeps bytes of it copies them. ``block`` is ``None`` for one line longer than ``max_line_bytes`` (without its
    line ending) that does not fit in a block: it was skipped without being held in memory,
    and the caller reports it. Lines over ``max_line_bytes`` that do fit in a block are in
    it; the caller checks their length. An unreadable file, an empty one and a broken
    compressed stream are reported here, through ``sink``; the lines before a break are
    yielded first.
    """
    compression = compression_of(task.path)
    try:
        stream = _open_decompressed(task.path, compression)
    except OSError as error:
        sink.report("", "unreadable_file", f"{type(error).__name__}: {error.strerror or error}")
        return
    with stream:
        if compression is None:
            try:
                size = storage.open_size(stream)
            except OSError as error:
                sink.report("", "unreadable_file", f"{type(error).__name__}: {error.strerror or error}")
                return
            if size == 0:
                sink.report("", "empty_file", "the file has no bytes")
                return
            position = line_start_at_or_after(stream, task.start)
            stream.seek(position)
            number = newlines_before(task.path, position) + 1 if position else 1
            counted = meter.active()
            owned = (task.end if task.end is not None else size) - task.start
            progress = None
        else:
            position, number = 0, 1
            counted = False
            progress = _compressed_progress(stream, compression)
        end = task.end
        # `buffer[:filled]` holds the bytes read from file offset `position` on (a line start):
        # whole lines up to `line_start`, then the start of a line still being read. Reads go
        # straight into it (`readinto1`), and blocks are views of it: no byte is copied on
        # the way from the file to the consumer.
        buffer = bytearray(2 * BLOCK_BYTES)
        filled = line_start = 0
        any_bytes = False
        while end is None or position < end:
            if filled == len(buffer):
                # Full and not one whole line in it: a long line, which gets more room, but
                # never more than it can take before it is known to be too long (and is then
                # skipped without being held).
                buffer = _grown(buffer, filled, line_start + max_line_bytes + 2 + BLOCK_BYTES)
            try:
                with memoryview(buffer) as free:
                    # No more than a block at a time: a decompressing stream builds what it
                    # returns as one object first (a whole GiB, for a read that large).
                    got = stream.readinto1(free[filled:filled + BLOCK_BYTES])
            except _STREAM_ERRORS as error:
                # The whole lines read before the break are the task's; the break is at the next.
                consumed, block = _whole_lines(buffer, line_start, position, number, end)
                if block is not None:
                    yield number, block
                    number += count_newlines(block)
                sink.report(f"line {number}", "corrupt_stream", _describe_stream_error(error))
                return
            if not got:
                break
            # Once a read (up to a block), never per line: a few calls per 8 MB.
            if counted:
                meter.report(position + filled + got - task.start, owned)
            elif progress is not None:
                progress()
            any_bytes = True
            last_newline = buffer.rfind(b"\n", filled, filled + got)
            if last_newline >= 0:
                line_start = last_newline + 1
            filled += got
            overlong = filled - line_start > max_line_bytes + 1  # too long whatever follows
            if not overlong and filled < BLOCK_BYTES and (end is None or position + filled < end):
                continue
            if line_start:
                consumed, block = _whole_lines(buffer, line_start, position, number, end)
                if block is not None:
                    yield number, block
                    number += count_newlines(block)
                    del block
                position += consumed
                # The partial line moves to the front (same size: allowed while the consumer
                # may still hold a view of the block, which it is done with).
                buffer[: filled - consumed] = buffer[consumed:filled]
                filled -= consumed
                line_start -= consumed
                if len(buffer) > 2 * BLOCK_BYTES and filled <= BLOCK_BYTES:
                    # A long line is gone: its room goes back to the system, not kept for
                    # the rest of the file beside the batches built from it.
                    try:
                        del buffer[2 * BLOCK_BYTES:]
                    except BufferError:
                        pass  # the consumer still holds a view: it goes at the next long line
                if line_start:
                    break  # the lines left start at or after `end`: another task's
            if overlong and (end is None or position < end):
                try:
                    skipped, rest = _skip_line(stream, filled)
                except _STREAM_ERRORS as error:
                    sink.report(f"line {number}", "corrupt_stream", _describe_stream_error(error))
                    return
                yield number, None
                position += skipped
                number += 1
                buffer[: len(rest)] = rest
                filled = len(rest)
                line_start = buffer.rfind(b"\n", 0, filled) + 1
        if filled and (end is None or position < end):
            consumed, block = _whole_lines(buffer, filled, position, number, end)
            if block is not None:
                yield number, block
                number += count_newlines(block) + (block[-1:] != b"\n")
            position += consumed
        if compression is None and end is not None and position >= end:
            # The next range of this file starts here (when ranges are aligned): remember how
            # many newlines precede it, so that range need not count them again.
            _remember(task.path, position, number - 1)
        if compression is not None and not any_bytes:
            sink.report("", "empty_file", "the decompressed stream has no bytes")


def _grown(buffer: bytearray, filled: int, cap: int) -> bytearray:
    """``buffer`` (its first ``filled`` bytes kept) with up to twice its room, but no more
    than ``cap`` (and at least one byte more). Grown in place where it can be: a buffer this
    large is its own mapping, which realloc extends (mremap) without moving its bytes, so the
    old and the new buffer never both exist and a line of N bytes costs about N. A consumer
    still holding a view of the last block forbids that, and then the bytes are copied into a
    new buffer through a view (a slice would be a third copy)."""
    size = max(min(2 * len(buffer), cap), len(buffer) + 1)
    try:
        # The zeros are copied in, so the new room is memory at once; bytes(n) itself is
        # calloc'ed and costs nothing.
        buffer.extend(bytes(size - len(buffer)))
        return buffer
    except BufferError:
        bigger = bytearray(size)
        with memoryview(buffer) as held:
            bigger[:filled] = held[:filled]
        return bigger


def count_newlines(data: bytes | memoryview) -> int:
    """The ``\\n`` bytes in ``data`` (in Rust: ``bytes.count`` goes a byte at a time)."""
    return _core.count_newlines(data)


def _whole_lines(buffer: bytearray, cut: int, position: int, number: int,
                 end: Optional[int]) -> tuple[int, Optional[memoryview]]:
    """A view of the lines of ``buffer[:cut]`` (read from file offset ``position``, where line
    ``number`` starts) that start before ``end``, and the bytes of the buffer they take.
    ``cut`` ends a line (or the file). A byte-order mark at the start of line 1 is left out
    of the view."""
    if end is not None and position + cut > end:
        # Only the lines that start before `end` (the one that straddles it included).
        straddling = buffer.find(b"\n", max(0, end - position - 1), cut)
        if straddling >= 0:
            cut = straddling + 1
    if cut <= 0:
        return 0, None
    skip = len(UTF8_BOM) if number == 1 and position == 0 and buffer.startswith(UTF8_BOM) else 0
    return cut, memoryview(buffer).toreadonly()[skip:cut]


def _skip_line(stream: BinaryIO, held: int) -> tuple[int, bytes]:
    """Reads past the end of the line being read, of which ``held`` bytes were read already:
    (the line's bytes with its newline, what was read after it). Stream errors propagate."""
    skipped = held
    while True:
        chunk = stream.read1(_READ_CHUNK)
        if not chunk:
            return skipped, b""
        newline = chunk.find(b"\n")
        if newline >= 0:
            return skipped + newline + 1, chunk[newline + 1:]
        skipped += len(chunk)


def iter_lines(task: Task, sink: ErrorSink, max_line_bytes: int) -> Iterator[tuple[int, Optional[bytes]]]:
    """The lines ``task`` owns as ``(number, content without its line ending)``.

    ``content`` is ``None`` for a line longer than ``max_line_bytes``: the caller reports it.
    Reported through ``sink`` as in :func:`iter_blocks`, which this splits.
    """
    for first, view in iter_blocks(task, sink, max_line_bytes):
        if view is None:
            yield first, None
            continue
        block = bytes(view)
        lines = block.split(b"\n")
        if block.endswith(b"\n"):
            lines.pop()  # the empty piece after the last newline is no line
        last = len(lines) - 1
        whole = block.endswith(b"\n")
        for i, line in enumerate(lines):
            # "\r\n" endings lose their "\r"; a last line without a newline keeps all its bytes.
            if (i < last or whole) and line.endswith(b"\r"):
                line = line[:-1]
            yield first + i, (line if len(line) <= max_line_bytes else None)


def _describe_stream_error(error: BaseException) -> str:
    # An OSError from Rust carries the path as its filename: the detail names the problem only.
    what = error.strerror if isinstance(error, OSError) and error.strerror else error
    return f"{type(error).__name__}: {what}; the rest of the file is unread"
