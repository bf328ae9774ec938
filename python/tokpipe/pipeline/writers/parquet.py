"""``ParquetShardWriter``: record batches to size-bounded, atomically published Parquet shards.

Each worker owns one writer and one range of shard numbers, so workers never contend for a file
name: shards are named ``part-{worker:05d}-{shard:05d}.parquet``. A shard is written under a
hidden temporary name (``.part-....parquet.tmp``) and renamed into place only once it is
complete and flushed to disk, so a crash leaves at worst a hidden temp file, never a truncated
file under a final name. Kept and rejected documents use the same class; the caller points the
second one at ``OUT/rejected/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Optional, TypeVar, Union

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe import __version__, _core
from tokpipe.errors import ArgumentTypeError, InvalidArgumentError
from tokpipe.pipeline import fs
from tokpipe.pipeline.writers._files import publish, temp_name
from tokpipe.storage import Location, RemotePath, location

__all__ = ["ShardWriter", "ShardInfo", "ParquetShardWriter", "shard_name"]

StrPath = Union[str, "os.PathLike[str]"]


def shard_name(worker: int, shard: int, suffix: str = ".parquet") -> str:
    """The file name of shard ``shard`` of worker ``worker``."""
    return f"part-{worker:05d}-{shard:05d}{suffix}"


@dataclass(frozen=True)
class ShardInfo:
    """One completed shard, as published on disk."""

    #: File name relative to the writer's directory, e.g. ``"part-00000-00003.parquet"``.
    name: str
    rows: int
    #: File size on disk.
    bytes: int
    #: Hex SHA-256 digest of the file ("" for a writer made with ``checksum=False``).
    sha256: str


_W = TypeVar("_W", bound="ShardWriter")


class ShardWriter:
    """What every shard writer of the pipeline shares, whatever the format: shards named
    :func:`shard_name` in one folder (local or in a bucket), numbered from ``first_shard``, a
    new one begun once the Arrow size written reaches ``shard_size``, each written to a
    temporary file and put in place whole. ``close`` completes the open shard; ``abort``
    deletes it (completed shards stay: they are whole). As a context manager, a writer closes
    on normal exit and aborts on an exception, which propagates. Subclasses write the bytes:
    ``_is_open``, ``_finish`` (complete the open shard) and ``_discard`` (drop it)."""

    def __init__(self, directory: Union[StrPath, RemotePath], worker: int, shard_size: int, first_shard: int) -> None:
        if worker < 0:
            raise InvalidArgumentError(f"worker must be >= 0, got {worker}")
        if shard_size <= 0:
            raise InvalidArgumentError(f"shard_size must be > 0, got {shard_size}")
        if first_shard < 0:
            raise InvalidArgumentError(f"first_shard must be >= 0, got {first_shard}")
        self._directory: Location = location(directory)
        fs.make_dirs(self._directory)
        self._worker = worker
        self._shard_size = shard_size
        self._next_shard = first_shard
        self._closed = False

    @property
    def directory(self) -> Location:
        """The folder the shards are written to."""
        return self._directory

    @property
    def next_shard(self) -> int:
        """The number the next new shard will get (the open shard, if any, already has one)."""
        return self._next_shard

    def _has_rows(self, batch: pa.RecordBatch) -> bool:
        """Whether ``batch``, given to ``write``, has rows to write (the writer must be open
        and the batch a record batch)."""
        if self._closed:
            raise InvalidArgumentError(f"write() on a closed {type(self).__name__}")
        if not isinstance(batch, pa.RecordBatch):
            raise ArgumentTypeError(f"expected a pyarrow.RecordBatch, got {type(batch).__name__}")
        return batch.num_rows > 0

    def close(self) -> list[ShardInfo]:
        """Complete the open shard, if it holds rows, and return it; later calls return ``[]``."""
        if self._closed:
            return []
        self._closed = True
        return [self._finish()] if self._is_open() else []

    def abort(self) -> None:
        """Drop the shard being written (its temp file is deleted) and close the writer.

        Completed shards stay. Safe to call more than once and after ``close()``.
        """
        self._closed = True
        self._discard()

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _is_open(self) -> bool:
        raise NotImplementedError

    def _finish(self) -> ShardInfo:
        raise NotImplementedError

    def _discard(self) -> None:
        raise NotImplementedError


class ParquetShardWriter(ShardWriter):
    """Writes record batches to Parquet shards ``part-{worker:05d}-{shard:05d}.parquet`` (zstd),
    starting a new shard once the current one holds at least ``shard_size`` bytes.

    The size is measured as the Arrow buffer size of the batches written into the shard
    (``RecordBatch.nbytes``), not the compressed file size, so the check costs nothing: the
    shard closes after the write that reached ``shard_size``. A batch is never split, so one
    batch larger than ``shard_size`` makes one shard of its own (together with whatever the
    open shard already held).

    Schema changes: batches may differ in their extra columns (``id`` and ``text`` come first).
    A Parquet file has one schema, so when a batch's schema differs from the open shard's
    (field names, order, types or nullability; schema metadata is ignored) the open shard is
    closed and the batch starts a new one. No column is dropped or padded with nulls; a reader
    that wants one table must unify the schemas itself. Empty batches are ignored.

    Used as a context manager, the writer is closed on normal exit; on an exception the shard
    being written is deleted (shards already completed stay: they are whole) and the exception
    propagates.

    ``file_format="arrow"`` writes uncompressed Arrow IPC files (``part-....arrow``) instead:
    the pipeline's staging, written once and read back through a memory map at no decoding
    cost. ``file_format="packed"`` writes Parquet too, for one table shape only: packed token
    rows (``input_ids``, a list<uint16|uint32> of the same length in every row, and
    ``length``, int32), through ``tokpipe_core::packed_parquet`` instead of pyarrow's general
    writer; the files read back as pyarrow's would (``compression`` zstd or none). ``checksum=False`` publishes a shard by rename alone, without its sha256 or an
    fsync: for staging files, which a later marker file commits and nothing verifies.
    ``use_dictionary`` is Parquet's (a bool or the columns to dictionary-encode);
    ``large_columns`` (the documents' text) get neither a dictionary nor statistics.
    """

    def __init__(
        self,
        directory: Union[StrPath, RemotePath],
        worker: int,
        shard_size: int = 256 << 20,
        first_shard: int = 0,
        compression: str = "zstd",
        file_format: str = "parquet",
        checksum: bool = True,
        use_dictionary: Union[bool, list[str]] = True,
        large_columns: tuple[str, ...] = (),
    ) -> None:
        if file_format not in ("parquet", "arrow", "packed"):
            raise InvalidArgumentError(f"file_format must be parquet, arrow or packed, got {file_format!r}")
        super().__init__(directory, worker, shard_size, first_shard)
        self._compression = compression
        self._format = file_format
        self._checksum = checksum
        self._use_dictionary = use_dictionary
        self._large_columns = large_columns
        # The open shard, if any: its Parquet writer, paths, schema, rows and Arrow size so far.
        self._writer: Optional[Union[pq.ParquetWriter, pa.ipc.RecordBatchFileWriter, PackedRowsFile]] = None
        self._final: Optional[Location] = None
        self._tmp: Optional[Path] = None
        self._schema: Optional[pa.Schema] = None
        self._rows = 0
        self._size = 0

    def write(self, batch: pa.RecordBatch) -> list[ShardInfo]:
        """Append ``batch``; return the shards this call completed (usually none).

        Up to two shards can complete in one call: the open one because the batch's schema
        differs, and the new one because the batch alone reached ``shard_size``.
        """
        if not self._has_rows(batch):
            return []
        done: list[ShardInfo] = []
        if self._writer is not None and not batch.schema.equals(self._schema, check_metadata=False):
            done.append(self._finish())
        if self._writer is None:
            self._open(batch.schema)
        assert self._writer is not None
        self._writer.write_batch(batch)
        self._rows += batch.num_rows
        self._size += batch.nbytes
        if self._size >= self._shard_size:
            done.append(self._finish())
        return done

    def _is_open(self) -> bool:
        return self._writer is not None

    def _discard(self) -> None:
        writer, tmp = self._writer, self._tmp
        self._reset()
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the file is being thrown away; the caller's error matters
                pass
        if tmp is not None:
            tmp.unlink(missing_ok=True)

    def _open(self, schema: pa.Schema) -> None:
        suffix = ".parquet" if self._format == "packed" else f".{self._format}"
        final = self._directory / shard_name(self._worker, self._next_shard, suffix)
        tmp = temp_name(final)
        # State changes only once the file exists, so a failed open leaves the writer as it was.
        try:
            if self._format == "arrow":
                self._writer = pa.ipc.new_file(str(tmp), schema)
            elif self._format == "packed":
                self._writer = PackedRowsFile(tmp, schema, self._compression)
            else:
                self._writer = pq.ParquetWriter(tmp, schema, compression=self._compression,
                                                **self._encodings(schema))
        except BaseException:
            # pyarrow creates the file before it checks its options (an unknown codec).
            tmp.unlink(missing_ok=True)
            raise
        self._final, self._tmp, self._schema = final, tmp, schema
        self._next_shard += 1

    def _encodings(self, schema: pa.Schema) -> dict[str, Union[bool, list[str]]]:
        """Dictionaries and statistics for every column but the large ones: a column of
        documents' texts is unique values (a dictionary is built, then dropped) and its
        min/max statistics are copies of whole documents, which cost as much memory as the
        document itself (a 200 MB text took 950 MB to write, 570 MB without them)."""
        if not self._large_columns:
            return {"use_dictionary": self._use_dictionary}
        others = [name for name in schema.names if name not in self._large_columns]
        dictionary = self._use_dictionary
        if dictionary is True:
            dictionary = others
        elif dictionary:
            dictionary = [name for name in dictionary if name not in self._large_columns]
        return {"use_dictionary": dictionary, "write_statistics": others}

    def _finish(self) -> ShardInfo:
        writer, tmp, final, rows = self._writer, self._tmp, self._final, self._rows
        assert writer is not None and tmp is not None and final is not None
        self._reset()
        try:
            writer.close()
            # An existing file of the same name (a rerun over the same folder) is replaced.
            if self._checksum:
                size, sha256 = publish(tmp, final)
            else:
                size, sha256 = tmp.stat().st_size, ""
                fs.publish(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return ShardInfo(name=final.name, rows=rows, bytes=size, sha256=sha256)

    def _reset(self) -> None:
        self._writer = None
        self._final = None
        self._tmp = None
        self._schema = None
        self._rows = 0
        self._size = 0


#: Columns of a packed-rows file, in order.
PACKED_COLUMNS = ("input_ids", "length")


class PackedRowsFile:
    """The writer of one ``file_format="packed"`` shard, with the two methods of pyarrow's
    writers the shard writer calls (``write_batch``, ``close``). The width of the rows is the
    first batch's; every batch must have rows of that width."""

    def __init__(self, path: Path, schema: pa.Schema, compression: str) -> None:
        if tuple(schema.names) != PACKED_COLUMNS or not pa.types.is_int32(schema.field("length").type) \
                or not (pa.types.is_list(schema.field("input_ids").type)
                        or pa.types.is_large_list(schema.field("input_ids").type)) \
                or schema.field("input_ids").type.value_type not in (pa.uint16(), pa.uint32()):
            raise InvalidArgumentError(f"packed rows are input_ids (list<uint16|uint32>) and length (int32), not {schema}")
        if compression not in ("zstd", "none"):
            raise InvalidArgumentError(f"packed rows are written with zstd or none, not {compression!r}")
        self._path = path
        self._bits = schema.field("input_ids").type.value_type.bit_width
        self._compression = compression
        self._writer: Optional[_core.PackedParquetWriter] = None
        self._width = 0
        # The file exists from the start, as with pyarrow's writers (the shard writer deletes
        # it on abort).
        path.touch()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        ids = batch.column("input_ids")
        rows = batch.num_rows
        offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64 if pa.types.is_large_list(ids.type) else np.int32)
        offsets = offsets[ids.offset: ids.offset + rows + 1]
        widths = np.diff(offsets)
        width = int(widths[0])
        if ids.null_count or (widths != width).any():
            raise InvalidArgumentError("packed rows must all hold the same number of ids (and none be null)")
        values = ids.values
        start = values.offset + int(offsets[0])
        data = np.frombuffer(values.buffers()[1], dtype=f"uint{self._bits}")[start: start + rows * width]
        lengths = batch.column("length")
        lengths_np = np.frombuffer(lengths.buffers()[1], dtype=np.int32)[lengths.offset: lengths.offset + rows]
        if self._writer is None:
            self._width = width
            self._writer = _core.PackedParquetWriter(str(self._path), width, self._bits, self._compression,
                                                     created_by=f"tokpipe version {__version__}")
        elif width != self._width:
            raise InvalidArgumentError(f"rows of {width} ids in a file of rows of {self._width}")
        self._writer.write(data, lengths_np)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
