"""JSON Lines shards (``tokpipe clean --output-format jsonl|jsonl.gz|jsonl.zst``): record
batches to size-bounded, atomically published ``part-{worker:05d}-{shard:05d}.jsonl[.gz|.zst]``
files, the same shards as :class:`~tokpipe.pipeline.writers.ParquetShardWriter` writes in
another format.

The format, one line per row (:func:`json_lines`):

* one JSON object per row, ending in ``\\n``, UTF-8, compact (``,`` and ``:`` without
  spaces); its keys are the columns, in column order, every one on every line (``null``
  where a row has no value);
* strings are escaped as ``json.dumps(..., ensure_ascii=False)`` escapes them: ``"``, ``\\``
  and the control characters U+0000 to U+001F (``\\n``, ``\\r``, ``\\t``, ``\\b``, ``\\f``,
  else ``\\u00XX``); everything else, non-ASCII included, is written as it is;
* integers and booleans as JSON has them; floats in their shortest form that reads back to
  the same value, with ``.0`` on an integral one (so it reads back as a float); NaN and the
  infinities, which JSON lacks, as ``null``;
* a column of JSON text (Arrow's ``arrow.json`` extension type: the fields kept as JSON
  text, see ``pipeline.fields``) is written as the JSON value it holds, nested, not as a
  string (a line break in it, which valid JSON has only as white space, becomes a space); a
  value that is not valid JSON is written as a string of its text;
* structs as objects (keys in field order), lists as arrays, maps as arrays of
  ``{"key": ..., "value": ...}`` objects, dictionary-encoded columns as their values;
* binary as its base64 text (standard alphabet, padded); timestamps as ISO 8601 text
  (``2020-01-02T03:04:05.120``, as many fraction digits as the unit has; a timestamp with a
  time zone in UTC, ending in ``Z``); dates (``2020-01-02``) and times of day
  (``03:04:05``) as text; durations as the integer count of their unit; decimals as JSON
  numbers with their exact digits. A type outside these (a union) is written as
  ``json.dumps`` writes its Python value, with ``str`` for what JSON has no type for.

The lines are built column by column with Arrow's compute functions (escaping, casts, and
one join of the pieces of every row), never a Python call per row, except for binary and
JSON text columns (base64, the JSON check) and the rare types written through Python
(unions, list views): metadata, not documents. A per-row ``json.dumps`` measured at about a
third of this speed (see ``docs/pipeline.md``).

Compression: ``.gz`` is gzip at level 6 (zlib's and the ``gzip`` tool's default) with no
file name and a zero time in its header; ``.zst`` one zstd frame at level 3 (the ``zstd``
tool's default) with its checksum. The same rows give the same bytes, so a resumed run and
a run with another number of workers write the same lines (the workers only change where
the shards are cut).

A shard is cut where a Parquet shard would be (``shard_size`` of Arrow data). It is written
to ``fs.temp_name`` of its final name, hashed on its way (no second read), flushed to disk,
and put in place by ``fs.publish``: a reader sees nothing or the whole file.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline import fs
from tokpipe.pipeline.fields import is_json
from tokpipe.pipeline.writers._files import HashingWriter, put_in_place
from tokpipe.pipeline.writers.parquet import ShardInfo, ShardWriter, shard_name
from tokpipe.storage import Location, RemotePath

__all__ = ["OUTPUT_FORMATS", "JSONL_FORMATS", "shard_suffix", "check_output_format", "json_lines",
           "JsonlShardWriter", "count_lines"]

#: What ``tokpipe clean --output-format`` takes, the default first.
OUTPUT_FORMATS = ("parquet", "jsonl", "jsonl.gz", "jsonl.zst")
#: The JSON Lines formats (those :class:`JsonlShardWriter` writes).
JSONL_FORMATS = OUTPUT_FORMATS[1:]
GZIP_LEVEL = 6
ZSTD_LEVEL = 3
# Read size when counting the lines of a shard.
_CHUNK = 1 << 20

_TEXT = pa.large_string()


def shard_suffix(output_format: str) -> str:
    """The file suffix of an output format's shards: ``.parquet``, ``.jsonl``, ``.jsonl.gz``..."""
    return f".{check_output_format(output_format)}"


def check_output_format(output_format: str) -> str:
    """``output_format`` if it is one of :data:`OUTPUT_FORMATS`, else ``InvalidArgumentError``."""
    if output_format not in OUTPUT_FORMATS:
        raise InvalidArgumentError(f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, "
                                   f"got {str(output_format)[:100]!r}")
    return output_format


# ---------------------------------------------------------------------------------------------
# Rows to JSON text, a column at a time.


def json_lines(batch: pa.RecordBatch) -> pa.Buffer:
    """``batch``'s rows as JSON Lines (the module docstring's format), UTF-8 bytes."""
    pieces = _Pieces()
    for i, (name, column) in enumerate(zip(batch.schema.names, batch.columns)):
        pieces.text(("{" if i == 0 else ",") + json.dumps(name, ensure_ascii=False) + ":")
        _add_value(pieces, column)
    pieces.text("}\n" if batch.num_columns else "{}\n")
    lines = pieces.join(batch.num_rows)
    # The lines are one run of bytes in the result's data buffer: that run is the file's part.
    first, last = _data_range(lines)
    data = lines.buffers()[2]
    return data.slice(first, last - first) if data is not None else pa.py_buffer(b"")


def _data_range(texts: pa.Array) -> tuple[int, int]:
    """Where a ``large_string`` array's values start and end in its data buffer."""
    offsets = pa.Array.from_buffers(pa.int64(), len(texts) + 1, [None, texts.buffers()[1]], offset=texts.offset)
    return offsets[0].as_py(), offsets[-1].as_py()


class _Pieces:
    """The pieces of one JSON text per row, in order: literal text (the same on every row)
    and arrays of text (one value per row, no nulls), joined row by row in one pass."""

    def __init__(self) -> None:
        self._items: list[Union[str, pa.Array]] = []

    def text(self, literal: str) -> None:
        if self._items and isinstance(self._items[-1], str):
            self._items[-1] += literal
        else:
            self._items.append(literal)

    def array(self, values: pa.Array) -> None:
        self._items.append(values)

    def join(self, rows: int) -> pa.Array:
        if not any(isinstance(item, pa.Array) for item in self._items):
            return pa.repeat(pa.scalar("".join(self._items), _TEXT), rows)  # type: ignore[arg-type]
        args = [pa.scalar(item, _TEXT) if isinstance(item, str) else item for item in self._items]
        return pc.binary_join_element_wise(*args, pa.scalar("", _TEXT))


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)


def _add_value(pieces: _Pieces, column: pa.Array) -> None:
    """``column``'s JSON texts as pieces: a string or struct column without nulls is written
    in place (its quotes and keys are literal pieces), anything else as one array of texts."""
    kind = column.type
    if column.null_count == 0 and _is_text(kind):
        pieces.text('"')
        pieces.array(_escaped(column))
        pieces.text('"')
    elif column.null_count == 0 and pa.types.is_struct(kind) and kind.num_fields:
        _add_fields(pieces, [kind.field(i).name for i in range(kind.num_fields)], column.flatten())
    else:
        pieces.array(_json_texts(column))


def _add_fields(pieces: _Pieces, names: list[str], columns: list[pa.Array]) -> None:
    for i, (name, column) in enumerate(zip(names, columns)):
        pieces.text(("{" if i == 0 else ",") + json.dumps(name, ensure_ascii=False) + ":")
        _add_value(pieces, column)
    pieces.text("}")


def _json_texts(column: pa.Array) -> pa.Array:
    """Each value of ``column`` as its JSON text (``null`` for a null): a string array
    without nulls."""
    kind = column.type
    if isinstance(kind, pa.JsonType):
        return _spliced_json(column)
    if isinstance(kind, pa.ExtensionType):
        return _json_texts(column.storage)
    if pa.types.is_dictionary(kind):
        return _json_texts(column.dictionary_decode())
    if pa.types.is_null(kind):
        return pa.repeat(pa.scalar("null", _TEXT), len(column))
    if _is_text(kind):
        texts = _quoted(_escaped(column))
    elif pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        texts = column.cast(_TEXT)
    elif pa.types.is_floating(kind):
        texts = _floats(column)
    elif pa.types.is_timestamp(kind):
        naive = column.cast(pa.timestamp(kind.unit)) if kind.tz is not None else column
        texts = pc.replace_substring(naive.cast(_TEXT), " ", "T", max_replacements=1)
        texts = _quoted(pc.binary_join_element_wise(texts, pa.scalar("Z" if kind.tz is not None else "", _TEXT),
                                                    pa.scalar("", _TEXT)))
    elif pa.types.is_date(kind) or pa.types.is_time(kind):
        texts = _quoted(column.cast(_TEXT))
    elif pa.types.is_duration(kind):
        texts = column.cast(pa.int64()).cast(_TEXT)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind) \
            or pa.types.is_binary_view(kind):
        texts = pa.array([None if v is None else '"' + base64.b64encode(v).decode("ascii") + '"'
                          for v in column.to_pylist()], type=_TEXT)
    elif pa.types.is_struct(kind):
        pieces = _Pieces()
        if kind.num_fields:
            _add_fields(pieces, [kind.field(i).name for i in range(kind.num_fields)], column.flatten())
        else:
            pieces.text("{}")
        texts = pieces.join(len(column))
    elif pa.types.is_map(kind):
        entries = pa.struct([pa.field("key", kind.key_type), pa.field("value", kind.item_type)])
        return _json_texts(column.cast(pa.large_list(entries)))
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        texts = _arrays(column.cast(pa.large_list(kind.value_type)))
    else:
        # Unions, list views (whose cast to a list loses values in pyarrow 26): their Python values.
        texts = pa.array([None if v is None else json.dumps(_finite(v), ensure_ascii=False, default=str)
                          for v in column.to_pylist()], type=_TEXT)
    if column.null_count:
        texts = pc.if_else(column.is_null(), pa.scalar("null", _TEXT), texts)
    return texts


def _finite(value: Any) -> Any:
    """A Python value with ``None`` for the floats JSON cannot write (NaN, the infinities)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _quoted(texts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar('"', _TEXT), texts, pa.scalar('"', _TEXT), pa.scalar("", _TEXT))


def _floats(column: pa.Array) -> pa.Array:
    if pa.types.is_float16(column.type):
        column = column.cast(pa.float32())
    texts = column.cast(_TEXT)  # the shortest text that reads back as the same float
    integral = pc.invert(pc.match_substring_regex(texts, "[.en]"))  # "1", "-0", "1e+20", "nan", "inf"
    texts = pc.if_else(integral, pc.binary_join_element_wise(texts, pa.scalar(".0", _TEXT), pa.scalar("", _TEXT)),
                       texts)
    return pc.if_else(pc.is_finite(column), texts, pa.scalar("null", _TEXT))


def _arrays(lists: pa.Array) -> pa.Array:
    """A ``large_list`` column's values as JSON arrays (a null list's text is unused)."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0)
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(lengths)])
    # `flatten` leaves out what a null list covers, as its length of 0 above does.
    items = pa.LargeListArray.from_arrays(offsets, _json_texts(lists.flatten()))
    joined = pc.binary_join(items, pa.scalar(",", _TEXT))
    return pc.binary_join_element_wise(pa.scalar("[", _TEXT), joined, pa.scalar("]", _TEXT), pa.scalar("", _TEXT))


def _spliced_json(column: pa.Array) -> pa.Array:
    """A JSON text column's values as the JSON they hold: spliced in, on one line."""
    values = []
    for text in column.storage.to_pylist():
        if text is None:
            values.append("null")
        elif _strict_json(text):
            values.append(text.replace("\n", " ").replace("\r", " "))
        else:
            values.append(json.dumps(text, ensure_ascii=False))
    return pa.array(values, type=_TEXT)


def _refuse(constant: str) -> Any:
    raise InvalidArgumentError(f"{constant} is not JSON")  # a ValueError, as json.loads's own


def _strict_json(text: str) -> bool:
    """Whether ``text`` is one JSON value (NaN and Infinity, which Python's reader takes, are
    not); a value nested too deep for ``json.loads`` is checked without recursion."""
    try:
        json.loads(text, parse_constant=_refuse)
    except RecursionError:
        return is_json(text) and not any(word in text for word in ("NaN", "Infinity"))
    except ValueError:
        return False
    return True


# The escape of each control character, as json.dumps writes it; `"` and `\` get a backslash.
_CONTROL_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


def _escaped(column: pa.Array) -> pa.Array:
    """A string column's values escaped for a JSON string (without the quotes): one pass of
    Arrow's replace per special character the column holds, none for those it lacks."""
    texts = column.cast(_TEXT)
    for code in _special_bytes(texts):
        char = chr(code)
        if char in '"\\':
            escape = "\\" + char
        else:
            escape = _CONTROL_ESCAPES.get(code, f"\\u{code:04x}")
        # RE2's rewrite string takes a backslash as `\\`; the pattern is the byte in hex.
        texts = pc.replace_substring_regex(texts, f"\\x{code:02x}", escape.replace("\\", "\\\\"))
    return texts


def _special_bytes(texts: pa.Array) -> list[int]:
    """The bytes a JSON string escapes that ``texts`` (large_string) holds, backslash first
    (its escape adds backslashes), found by a scan of the data buffer (an ASCII byte is never
    part of a longer UTF-8 character)."""
    data = texts.buffers()[2]
    if data is None or len(texts) == 0:
        return []
    first, last = _data_range(texts)
    raw = memoryview(data)[first:last]
    # A regex search for one byte runs at memchr's speed and stops at the first match.
    found = [code for code in (0x5C, 0x22) if re.search(re.escape(bytes([code])), raw)]
    view = np.frombuffer(raw, dtype=np.uint8)
    return found + np.unique(view[view < 0x20]).tolist()


# ---------------------------------------------------------------------------------------------
# The shards.


class JsonlShardWriter(ShardWriter):
    """Writes record batches to JSON Lines shards ``part-{worker:05d}-{shard:05d}.jsonl``
    (``.jsonl.gz``, ``.jsonl.zst`` as ``output_format`` says), starting a new shard once the
    current one holds at least ``shard_size`` bytes of Arrow data (``RecordBatch.nbytes``,
    as :class:`~tokpipe.pipeline.writers.ParquetShardWriter` counts them, so the shards are
    cut alike). A JSON Lines file has no schema, so batches of different schemas share a
    shard. Empty batches are ignored.

    Used as a context manager, the writer is closed on normal exit; on an exception the shard
    being written is deleted (shards already completed stay: they are whole).
    """

    def __init__(self, directory: Union[str, os.PathLike[str], RemotePath], worker: int,
                 shard_size: int = 256 << 20, first_shard: int = 0, output_format: str = "jsonl") -> None:
        if output_format not in JSONL_FORMATS:
            raise InvalidArgumentError(f"output_format must be one of {', '.join(JSONL_FORMATS)}, "
                                       f"got {str(output_format)[:100]!r}")
        super().__init__(directory, worker, shard_size, first_shard)
        self._format = output_format
        # The open shard, if any: its files (the local one, the hashing layer over it, the
        # compressor over that), paths, rows and Arrow size so far.
        self._file: Optional[BinaryIO] = None
        self._hashing: Optional[HashingWriter] = None
        self._stream: Optional[IO[bytes]] = None
        self._final: Optional[Location] = None
        self._tmp: Optional[Path] = None
        self._rows = 0
        self._size = 0

    def write(self, batch: pa.RecordBatch) -> list[ShardInfo]:
        """Append ``batch``; return the shards this call completed (none, or the open one
        once it reached ``shard_size``)."""
        if not self._has_rows(batch):
            return []
        lines = json_lines(batch)
        if self._stream is None:
            self._open()
        assert self._stream is not None
        self._stream.write(lines)  # type: ignore[arg-type]
        self._rows += batch.num_rows
        self._size += batch.nbytes
        return [self._finish()] if self._size >= self._shard_size else []

    def _is_open(self) -> bool:
        return self._stream is not None

    def _discard(self) -> None:
        files, tmp = (self._stream, self._hashing), self._tmp
        self._reset()
        for f in files:
            if f is not None:
                try:
                    f.close()
                except Exception:  # noqa: BLE001 - the file is being thrown away; the caller's error matters
                    pass
        if tmp is not None:
            tmp.unlink(missing_ok=True)

    def _open(self) -> None:
        final = self._directory / shard_name(self._worker, self._next_shard, f".{self._format}")
        tmp = fs.temp_name(final)
        raw = open(tmp, "wb")
        # The sha256 is taken on a thread of its own, beside the next batch's serialising.
        hashing = HashingWriter(raw, in_background=True)
        stream: IO[bytes]
        if self._format == "jsonl.gz":
            stream = gzip.GzipFile(filename="", mode="wb", compresslevel=GZIP_LEVEL,
                                   fileobj=hashing, mtime=0)  # type: ignore[arg-type]
        elif self._format == "jsonl.zst":
            compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
            stream = compressor.stream_writer(hashing, closefd=False)
        else:
            stream = hashing  # type: ignore[assignment]
        self._file, self._hashing, self._stream = raw, hashing, stream
        self._final, self._tmp = final, tmp
        self._next_shard += 1

    def _finish(self) -> ShardInfo:
        raw, hashing, stream = self._file, self._hashing, self._stream
        tmp, final, rows = self._tmp, self._final, self._rows
        assert raw is not None and hashing is not None and stream is not None and tmp is not None and final is not None
        self._reset()
        try:
            if stream is not hashing:
                stream.close()  # the compressor's last block and trailer; the file stays open
            size, sha256 = hashing.size, hashing.hexdigest()
            # An existing file of the same name (a rerun over the same folder) is replaced.
            put_in_place(raw, tmp, final)
            hashing.close()
        except BaseException:
            raw.close()
            tmp.unlink(missing_ok=True)
            raise
        return ShardInfo(name=final.name, rows=rows, bytes=size, sha256=sha256)

    def _reset(self) -> None:
        self._file = None
        self._hashing = None
        self._stream = None
        self._final = None
        self._tmp = None
        self._rows = 0
        self._size = 0


# ---------------------------------------------------------------------------------------------
# Reading a shard back, for the manifest's checks.


def count_lines(path: Location) -> int:
    """The lines of a JSON Lines shard (``\\n`` bytes, after decompressing a ``.gz`` or
    ``.zst``), read once in chunks. A damaged compressed stream raises (``OSError``,
    ``EOFError``, ``zstandard.ZstdError``)."""
    lines = 0
    for chunk in _decompressed(path):
        lines += chunk.count(b"\n")
    return lines


def _decompressed(path: Location) -> Iterator[bytes]:
    with fs.open_read(path) as raw:
        stream: IO[bytes]
        if path.name.endswith(".gz"):
            stream = gzip.GzipFile(fileobj=raw, mode="rb")
        elif path.name.endswith(".zst"):
            stream = zstandard.ZstdDecompressor().stream_reader(raw,  # type: ignore[assignment]
                                                                 read_across_frames=True)
        else:
            stream = raw
        with stream:
            while chunk := stream.read(_CHUNK):
                yield chunk
