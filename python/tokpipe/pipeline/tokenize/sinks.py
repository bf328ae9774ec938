"""Sinks: the documents of one split, in their final order, to each output format
(:class:`Split`: Parquet shards of documents or packed rows in ``OUT/{split}/``, the Megatron
pair ``OUT/megatron/{split}.bin``/``.idx`` and ``OUT/documents/{split}.parquet``), and where
each document's ids go in the Megatron ``.bin`` (:class:`BinLayout`).
"""

from __future__ import annotations

import concurrent.futures as cf
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe.errors import InternalError
from tokpipe.pipeline import fs
from tokpipe.pipeline.documents import ID
from tokpipe.pipeline.kernels import arrow_of, list_buffers
from tokpipe.pipeline.stages.tokenize import INPUT_IDS, LENGTH
from tokpipe.pipeline.tokenize.options import DOCUMENTS_DIR, MEGATRON_DIR, SPLITS, TokenizeOptions
from tokpipe.pipeline.writers import hash_path
from tokpipe.pipeline.writers.megatron import MegatronWriter, megatron_dtype
from tokpipe.pipeline.writers.parquet import ParquetShardWriter

__all__ = ["Split", "BinLayout"]

# Documents handed to the writers at a time: big enough for few, large Parquet row groups,
# small enough that a run of long documents stays a few tens of MB...
_WRITE_ROWS = 4096
# ... and tokens: a run closes at the document that reaches this many, so memory is bounded
# by bytes (4,096 documents of 1 MiB were a 4 GiB run).
_WRITE_TOKENS = 16 << 20
# Runs being written (Parquet encoding and compression release the GIL) while the next run
# is gathered: the write overlaps the shuffle's reads and takes on the second core.
_IN_FLIGHT = 2


class Split:
    """Everything written for one split: Parquet shards (documents or packed rows) alone in
    their folder (``OUT/{name}``, which ``pyarrow.dataset`` then opens as one table), the
    Megatron pair and the documents file, each in a folder of its own, with their counts."""

    def __init__(self, out: Path, name: str, options: TokenizeOptions, dtype: str, vocab_size: int,
                 eos: int | None, shard_size: int) -> None:
        self.out, self.name, self.options = out / name, name, options
        self.root = out
        #: The documents file, from OUT.
        self.documents_file = f"{DOCUMENTS_DIR}/{name}.parquet"
        self.dtype = np.dtype(dtype)
        self.value_type = pa.from_numpy_dtype(np.dtype(dtype))
        self.eos = eos
        self.documents = 0
        self.tokens = 0
        self.truncated_tokens = 0
        self.shards: list[dict[str, Any]] = []
        #: Every file published for the split: path (from OUT), bytes, sha256.
        self.files: list[dict[str, Any]] = []
        self._shard_tokens = 0
        # No dictionary pages: token ids are spread over the whole vocabulary, and building
        # (then dropping) a dictionary per column chunk doubled the cost of writing them.
        # Packed rows go through tokpipe's own writer of that one shape (see
        # `tokpipe_core::packed_parquet`): the same file, at a fraction of the work.
        self._parquet = ParquetShardWriter(self.out, 0, shard_size, use_dictionary=False,
                                           file_format="packed" if options.pack else "parquet") \
            if "parquet" in options.formats else None
        self.megatron = MegatronWriter(out / MEGATRON_DIR / name, megatron_dtype(vocab_size)) \
            if "megatron" in options.formats else None
        self._doc_writer: pq.ParquetWriter | None = None
        self._doc_tmp = fs.temp_name(out / self.documents_file)
        self._carry = np.zeros(0, dtype=self.dtype)
        self._pending: deque[tuple[pa.Array, pa.Array, np.ndarray | None]] = deque()
        # Two writer threads, each in order: the Parquet shards, and the documents file with the
        # Megatron pair. Encoding, compression and file writes release the GIL, so both run
        # beside the thread that gathers the next documents.
        self._io = cf.ThreadPoolExecutor(1, thread_name_prefix="tokpipe-write")
        self._in_flight: deque[tuple[cf.Future[Any], int]] = deque()
        self._side = cf.ThreadPoolExecutor(1, thread_name_prefix="tokpipe-write-side")
        self._side_flight: deque[cf.Future[Any]] = deque()
        self._pending_rows = 0
        self._pending_tokens = 0
        self.rows = 0
        self.dropped_tail_tokens = 0
        self.padded_tokens = 0

    def add(self, doc_ids: pa.Array, ids: pa.Array, pointers: np.ndarray | None = None) -> None:
        """Documents in output order: their ids, token lists (large_list) and, when a
        Megatron pair is written, their byte positions in its ``.bin`` (``BinLayout``).
        They are written in runs of ``_WRITE_ROWS`` documents, or fewer that reach
        ``_WRITE_TOKENS`` tokens, whatever the cut of the calls, so the files' bytes (row
        groups) do not depend on how the shuffle bucketed the documents."""
        if self.megatron is not None and pointers is None:
            raise InternalError("the Megatron index needs each document's pointer")
        self._pending.append((doc_ids, ids, pointers))
        self._pending_rows += len(doc_ids)
        self._pending_tokens += _token_count(ids)
        while True:
            rows = self._run_rows()
            if not rows:
                break
            self._drain(rows)

    def _run_rows(self) -> int:
        """The documents of the first complete run among the pending ones; 0 when they do not
        complete one yet."""
        if self._pending_rows < _WRITE_ROWS and self._pending_tokens < _WRITE_TOKENS:
            return 0
        rows = tokens = 0
        for _, ids, _ in self._pending:
            offsets, _ = list_buffers(ids)
            within = self.room_for(np.diff(offsets), rows, tokens)
            rows += within
            tokens += int(offsets[within] - offsets[0])
            if rows == _WRITE_ROWS or tokens >= _WRITE_TOKENS:
                return rows
        return rows

    def room_for(self, lengths: np.ndarray, rows: int | None = None, tokens: int | None = None) -> int:
        """How many of the next documents (token ``lengths``, in output order) complete the
        run being gathered, past ``rows`` documents and ``tokens`` tokens (by default, those
        pending): a caller that hands over that many first, then again as many as this says,
        has nothing concatenated. All of ``lengths`` when they do not complete it."""
        rows = self._pending_rows if rows is None else rows
        tokens = self._pending_tokens if tokens is None else tokens
        window = lengths[:max(1, _WRITE_ROWS - rows)]
        reached = int(np.searchsorted(np.cumsum(window), _WRITE_TOKENS - tokens))
        return min(len(window), reached + 1) if reached < len(window) else len(window)

    def _drain(self, rows: int) -> None:
        """Writes the first ``rows`` pending documents, concatenating only the pieces they
        span."""
        parts: list[tuple[pa.Array, pa.Array, np.ndarray | None]] = []
        need = rows
        while need:
            doc_ids, ids, pointers = self._pending[0]
            if len(doc_ids) <= need:
                parts.append(self._pending.popleft())
                need -= len(doc_ids)
            else:
                parts.append((doc_ids.slice(0, need), ids.slice(0, need), None if pointers is None else pointers[:need]))
                self._pending[0] = (doc_ids.slice(need), ids.slice(need), None if pointers is None else pointers[need:])
                need = 0
        self._pending_rows -= rows
        self._pending_tokens -= sum(_token_count(ids) for _, ids, _ in parts)
        if len(parts) == 1:
            self._add(*parts[0])
        else:
            pointers = None if parts[0][2] is None else np.concatenate([p for _, _, p in parts])  # type: ignore[misc]
            self._add(pa.concat_arrays([d for d, _, _ in parts]), pa.concat_arrays([i for _, i, _ in parts]), pointers)

    def _add(self, doc_ids: pa.Array, ids: pa.Array, pointers: np.ndarray | None) -> None:
        offsets, values = list_buffers(ids)
        lengths = np.diff(offsets)
        flat = values[offsets[0]:offsets[-1]]
        if self.options.truncate:
            assert self.options.seq_len is not None
            limit = self.options.seq_len + 1
            if (lengths > limit).any():
                starts = np.cumsum(lengths) - lengths
                within = np.arange(len(flat), dtype=np.int64) - np.repeat(starts, lengths)
                flat = flat[within < limit]
                self.truncated_tokens += int((lengths - limit).clip(min=0).sum())
                lengths = lengths.clip(max=limit)
                offsets = np.concatenate([[0], np.cumsum(lengths)])
                ids = pa.LargeListArray.from_arrays(arrow_of(offsets.astype(np.int64)), arrow_of(flat))
        self.documents += len(lengths)
        self.tokens += len(flat)
        if self._doc_writer is None:
            fs.make_dirs(self._doc_tmp.parent)
            self._doc_writer = pq.ParquetWriter(self._doc_tmp, pa.schema([(ID, pa.string()), (LENGTH, pa.int32())]),
                                                compression="zstd")
        doc_writer, megatron = self._doc_writer, self.megatron
        record = pa.record_batch([doc_ids.cast(pa.string()), arrow_of(lengths.astype(np.int32))], names=[ID, LENGTH])

        def write_documents() -> None:
            doc_writer.write_batch(record)
            if megatron is not None:
                megatron.add(lengths, pointers)

        self._side_flight.append(self._side.submit(write_documents))
        while len(self._side_flight) > _IN_FLIGHT:
            self._side_flight.popleft().result()
        if self._parquet is None:
            return
        if self.options.pack:
            self._pack(flat)
        else:
            batch = pa.record_batch([doc_ids.cast(pa.string()), ids.cast(pa.list_(self.value_type)),
                                     arrow_of(lengths.astype(np.int32))], names=[ID, INPUT_IDS, LENGTH])
            self._write(batch, len(flat))

    def _pack(self, flat: np.ndarray) -> None:
        assert self.options.seq_len is not None
        width = self.options.seq_len + 1
        flat = flat.astype(self.dtype, copy=False)
        if len(self._carry):
            # Only the row the carried tokens start is copied; the rest are views of `flat`.
            need = width - len(self._carry)
            if len(flat) < need:
                self._carry = np.concatenate([self._carry, flat])
                return
            first = np.concatenate([self._carry, flat[:need]])
            self._write_rows(first.reshape(1, width), np.full(1, width, dtype=np.int32))
            flat = flat[need:]
        full = len(flat) // width
        self._carry = flat[full * width:].copy()
        if full:
            self._write_rows(flat[: full * width].reshape(full, width), np.full(full, width, dtype=np.int32))

    def _write_rows(self, rows: np.ndarray, real: np.ndarray) -> None:
        n, width = rows.shape
        offsets = arrow_of(np.arange(0, (n + 1) * width, width, dtype=np.int32))
        values = arrow_of(rows.reshape(-1))
        batch = pa.record_batch([pa.ListArray.from_arrays(offsets, values), arrow_of(real.astype(np.int32))],
                                names=[INPUT_IDS, LENGTH])
        self.rows += n
        self._write(batch, n * width)

    def _write(self, batch: pa.RecordBatch, tokens: int) -> None:
        parquet = self._parquet
        assert parquet is not None
        self._submit(lambda: parquet.write(batch), tokens)

    def _submit(self, write: Any, tokens: int) -> None:
        """Runs ``write`` on the writer thread, in order; its shards get the tokens written
        since the last shard closed."""
        self._in_flight.append((self._io.submit(write), tokens))
        while len(self._in_flight) > _IN_FLIGHT:
            self._settle()

    def _settle(self) -> None:
        future, tokens = self._in_flight.popleft()
        self._shard_tokens += tokens
        for info in future.result():
            self._done(info, self._shard_tokens)
            self._shard_tokens = 0

    def _done(self, info: Any, tokens: int) -> None:
        self.shards.append({"path": f"{self.name}/{info.name}", "rows": info.rows, "tokens": tokens,
                            "bytes": info.bytes, "sha256": info.sha256})
        self._published(f"{self.name}/{info.name}", (info.bytes, info.sha256))

    def _published(self, path: str, digest: tuple[int, str]) -> None:
        """A file published for the split (``path`` from OUT)."""
        self.files.append({"path": path, "bytes": digest[0], "sha256": digest[1]})

    def close(self) -> dict[str, Any]:
        if self._pending_rows:
            self._drain(self._pending_rows)
        summary: dict[str, Any] = {}
        self._flush_tail()
        while self._in_flight:
            self._settle()
        while self._side_flight:
            self._side_flight.popleft().result()
        self._io.shutdown()
        self._side.shutdown()
        if self._parquet is not None:
            for info in self._parquet.close():
                self._done(info, self._shard_tokens)
                self._shard_tokens = 0
            summary["parquet"] = self.shards
            if self.options.pack:
                summary["packed"] = {"rows": self.rows, "row_tokens": (self.options.seq_len or 0) + 1,
                                     "dropped_tail_tokens": self.dropped_tail_tokens,
                                     "padded_tokens": self.padded_tokens}
        if self.megatron is not None:
            documents = self.megatron.close()
            assert self.megatron.bin_digest is not None and self.megatron.idx_digest is not None
            prefix = f"{MEGATRON_DIR}/{self.name}"
            summary["megatron"] = {"prefix": prefix, "dtype": self.megatron.dtype.name,
                                   "documents": documents, "tokens": self.megatron.tokens,
                                   "bin_bytes": self.megatron.bin_digest[0]}
            self._published(f"{prefix}.bin", self.megatron.bin_digest)
            self._published(f"{prefix}.idx", self.megatron.idx_digest)
        if self._doc_writer is None:
            fs.make_dirs(self._doc_tmp.parent)
            self._doc_writer = pq.ParquetWriter(self._doc_tmp, pa.schema([(ID, pa.string()), (LENGTH, pa.int32())]))
        self._doc_writer.close()
        self._published(self.documents_file, hash_path(self._doc_tmp))
        fs.publish(self._doc_tmp, self.root / self.documents_file)
        summary.update({"documents": self.documents, "tokens": self.tokens, "truncated_tokens": self.truncated_tokens,
                        "documents_file": self.documents_file})
        return summary

    def _flush_tail(self) -> None:
        """The last partial packed row: padded with EOS, or dropped and counted."""
        if self._parquet is None or not self.options.pack or not len(self._carry):
            return
        tail = len(self._carry)
        if self.options.pad_tail:
            assert self.options.seq_len is not None and self.eos is not None
            width = self.options.seq_len + 1
            row = np.full(width, self.eos, dtype=self.dtype)
            row[:tail] = self._carry
            self.padded_tokens = width - tail
            self._write_rows(row.reshape(1, width), np.array([tail], dtype=np.int32))
        else:
            self.dropped_tail_tokens = tail
        self._carry = self._carry[:0]

    def abort(self) -> None:
        self._io.shutdown(wait=True, cancel_futures=True)
        self._side.shutdown(wait=True, cancel_futures=True)
        if self._parquet is not None:
            self._parquet.abort()
        if self.megatron is not None:
            self.megatron.abort()
        if self._doc_writer is not None:
            self._doc_writer.close()
        fs.remove(self._doc_tmp)


def _token_count(ids: pa.Array) -> int:
    """The tokens of a ``large_list`` column of token lists."""
    offsets, _ = list_buffers(ids)
    return int(offsets[-1] - offsets[0])


class BinLayout:
    """Where each document's ids are in its split's Megatron ``.bin``: the split's documents
    in input order, back to back (each cut to a row, ``seq_len + 1`` tokens, when
    truncating), at the ``.bin``'s dtype (``width`` bytes an id; 0 when no Megatron pair is
    written, and no pointer is used). ``pointers`` takes the documents of a split in input
    order, a run at a time, and returns their byte positions."""

    def __init__(self, options: TokenizeOptions, splits: dict[str, Split]) -> None:
        self.limit = options.seq_len + 1 if options.truncate and options.seq_len else None
        megatron = splits["train"].megatron
        self.width = megatron.dtype.itemsize if megatron is not None else 0
        self.next = {name: 0 for name in SPLITS}

    def lengths(self, lengths: np.ndarray) -> np.ndarray:
        return lengths if self.limit is None else np.minimum(lengths, self.limit)

    def pointers(self, split: str, lengths: np.ndarray) -> np.ndarray:
        ends = np.cumsum(self.lengths(lengths), dtype=np.int64) * self.width + self.next[split]
        pointers = np.empty_like(ends)
        pointers[:1] = self.next[split]
        pointers[1:] = ends[:-1]
        if len(ends):
            self.next[split] = int(ends[-1])
        return pointers
