"""Tokenize and pack: text in, pretraining shards out (``tokpipe tokenize``).

(Over 500 lines: options, shuffle, sinks and the run share this file until the architecture
issue makes it a ``pipeline/tokenize/`` package.)

Two phases.

1. **Tokenize** (parallel, resumable): the local executor runs the ``tokenize`` stage over
   the input tasks on the worker processes. Each task's token ids are appended raw (2 or 4
   bytes a token) to its process's ids file in ``OUT/.tokpipe/seg0/kept/``, and its
   documents' ``id`` and ``length`` go to small Arrow IPC files beside it
   (``writers.ids_staging``); the task's marker, written last, records them and the byte
   range of its ids, and commits them. A rerun after a crash redoes only the tasks that had
   not finished.
2. **Shuffle, split, write** (one process, bounded memory): documents are numbered by their
   position in task order (fixed by the inputs, not by the worker count), and each gets

       key   = splitmix64(position + splitmix64(seed))       its place in the shuffled order
       split = val  when  splitmix64(key ^ C) / 2**64 < val_fraction,  else train

   The output is the documents sorted by ``key``: a uniform, seeded permutation, the same
   for any number of workers. It is computed without holding the corpus. When the staged
   ids fit in the page cache (half the machine's memory), an index of the documents (key,
   staged file, byte range, ``.bin`` pointer: about 80 bytes a document) is sorted by key
   and each run of documents is read from the staged files in that order, straight into the
   buffer the writers take (``tokpipe_core::tokens::StagedFiles``): no copy on disk, no
   memory map of the whole staging; past ``shuffle_buffer`` bytes of index this goes key
   range by key range. Larger staging is scattered by key range into B buckets (temporary
   Arrow files, written and read sequentially; B is chosen so a bucket's ids fit
   ``shuffle_buffer``), then each bucket is sorted and written out. Every gather copies a document's ids once.
   Without shuffling, documents are written in input order, and while phase 1 still runs:
   a thread takes each task's staged documents as soon as that task and all before it are
   done.

   The Megatron pair is not rewritten in shuffled order: its ``.bin`` holds each split's
   documents in input order and its ``.idx`` lists them in shuffled order, each at its byte
   position (``_BinLayout``). When one process staged every task in order (one worker) and
   there is no validation split and no truncation, the staged ids file *is* the train
   ``.bin``, published as a hard link: the ids are written once. Otherwise (several
   workers, a resumed run, ``val_fraction``, ``truncate``) the ``.bin`` is copied together
   in input order, to the same bytes (``_write_bins``).

   Staging files and task markers are not fsynced: a killed process resumes exactly, and
   after a power loss a task whose staging came back short (the marker records each meta
   file's size and the end of its ids range) or whose meta files came back zero-filled is
   found on resume and redone (``engines.local._committed``). The raw ids have no magic
   bytes to check: ids zero-filled within the file's length are not detected (ext4's default
   ``data=ordered`` mode writes data before the size that exposes it).

Outputs, per split (``OUT/train``, ``OUT/val``):

* ``part-00000-NNNNN.parquet``: ``id``, ``input_ids`` (list<uint16> when vocab_size <= 65536,
  else list<uint32>) and ``length`` per document; or, with ``pack``, rows of exactly
  ``seq_len + 1`` tokens (``input_ids``; ``length`` = real tokens in the row; written by
  ``tokpipe_core::packed_parquet``, the same file pyarrow writes), so a training
  step takes ``inputs = row[:-1]`` and ``targets = row[1:]``. Rows are disjoint consecutive
  slices of the stream of documents, each followed by its EOS; a document longer than a row
  runs on into the next rows (or, with ``truncate``, is cut to ``seq_len + 1`` tokens first).
  The last partial row is dropped and its tokens counted (``dropped_tail_tokens``), or with
  ``pad_tail`` filled with EOS (the ``length`` column says how many tokens are real).
* ``megatron.bin`` / ``megatron.idx``: Megatron-LM's indexed dataset, one sequence per
  document (Megatron's GPTDataset packs documents into samples itself, so packing does not
  apply to it; truncation does), listed in output order over a ``.bin`` in input order
  (see above; megatron-core reads each sequence at its pointer).
* ``documents.parquet``: ``id`` and ``length`` of every document in output order (what
  ``tokpipe stats`` reads, and the provenance of each row).

``OUT/manifest.json`` (written last) has per shard and per split the documents and tokens,
the dtype, the tokenizer file and its sha256, the EOS id, seq_len, seed and split fraction,
and under ``files`` every file the run published (the shards, each split's
``documents.parquet`` and Megatron pair, ``errors.jsonl``) with its size and sha256, which
``verify_tokenized`` (``tokpipe stats --verify``) checks. The digests cost no second pass where
the bytes go through Python anyway: the ``.idx``, and a ``.bin`` copied into place (hashed on a
thread beside the copy). Parquet files are read once after they are closed, and a ``.bin``
linked to the staging is read once on a thread of its own while the shuffle writes the rest.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe import __version__, _core
from tokpipe.errors import ConfigError, PipelineError
from tokpipe.pipeline.base import StageStats
from tokpipe.pipeline.config import PipelineConfig, StageSpec
from tokpipe.pipeline.documents import ID
from tokpipe.pipeline.engines.workers import disk_full_in_one_line
from tokpipe.pipeline.engines.local import (READ_STATS, LocalExecutor, Progress, ProgressUpdate, RunOptions,
                                            _pending_tasks, _run_segment_task, _summary, _task_bytes, _write_json)
from tokpipe.pipeline.readers import Task
from tokpipe.pipeline.kernels import arrow_of, list_buffers, numpy_of
from tokpipe.pipeline.stages.tokenize import INPUT_IDS, LENGTH, file_sha256, find_eos, ids_dtype, load_tokenizer
from tokpipe.pipeline.writers import hash_path
from tokpipe.pipeline.writers.manifest import check_file, check_parquet_rows, is_plain_relative
from tokpipe.pipeline.writers.megatron import MAGIC, MegatronWriter, megatron_dtype
from tokpipe.pipeline.writers.ids_staging import close_ids_files
from tokpipe.pipeline.writers.parquet import ParquetShardWriter

__all__ = ["TokenizeOptions", "TokenizeResult", "tokenize_corpus", "shuffle_keys", "val_mask", "FORMAT",
           "SPLITS", "read_tokenized_manifest"]

FORMAT = "tokpipe-tokenized"
FORMAT_VERSION = 1
#: The unreadable inputs, one JSON line each (in OUT).
ERRORS_FILE = "errors.jsonl"
SPLITS = ("train", "val")
_MASK = (1 << 64) - 1
_VAL_SALT = 0xD1B54A32D192ED03
# Documents handed to the writers at a time: big enough for few, large Parquet row groups,
# small enough that a run of long documents stays a few tens of MB...
_WRITE_ROWS = 4096
# ... and tokens: a run closes at the document that reaches this many, so memory is bounded
# by bytes (4,096 documents of 1 MiB were a 4 GiB run).
_WRITE_TOKENS = 16 << 20
# Documents a batch of phase 1 holds at least (or MAX_BATCH_TEXT_BYTES of text, whichever
# comes first).
_ENCODE_BATCH_ROWS = 8192
# Runs being written (Parquet encoding and compression release the GIL) while the next run
# is gathered: the write overlaps the shuffle's reads and takes on the second core.
_IN_FLIGHT = 2


@dataclass(frozen=True)
class TokenizeOptions:
    tokenizer: str
    formats: tuple[str, ...] = ("parquet",)
    append_eos: bool = True
    eos_token: str | None = None
    seq_len: int | None = None
    pack: bool = False
    truncate: bool = False
    pad_tail: bool = False
    shuffle: bool = True
    seed: int = 0
    val_fraction: float = 0.0
    #: Bytes the shuffle may hold in memory for one key range: its index of documents (about
    #: 80 bytes each), or its token ids when the staging is spilled to buckets.
    shuffle_buffer: int = 256 << 20
    threads: int | None = None

    def __post_init__(self) -> None:
        unknown = set(self.formats) - {"parquet", "megatron"}
        if unknown or not self.formats:
            raise ConfigError(f"formats must be parquet and/or megatron, not {', '.join(sorted(unknown)) or 'none'}")
        if (self.pack or self.truncate) and not self.seq_len:
            raise ConfigError("packing and truncation need a sequence length (--seq-len N)")
        if self.seq_len is not None and self.seq_len < 1:
            raise ConfigError(f"seq_len must be at least 1, not {self.seq_len}")
        if self.pad_tail and not self.pack:
            raise ConfigError("pad_tail only applies to packed rows (--pack)")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction must be in [0, 1), not {self.val_fraction}")
        if not 0 <= self.seed <= _MASK:
            raise ConfigError(f"the seed must be in [0, 2**64), not {self.seed}")

    def global_params(self) -> dict[str, Any]:
        """What phase 2 depends on (phase 1 depends on the tokenize stage's params)."""
        params = asdict(self)
        for name in ("tokenizer", "append_eos", "eos_token", "threads"):
            params.pop(name)
        params["formats"] = list(self.formats)
        return params


@dataclass
class TokenizeResult:
    out_dir: Path
    manifest: dict[str, Any]
    stats: dict[str, StageStats] = field(default_factory=dict)
    tasks_run: int = 0


# ---------------------------------------------------------------------------------------------
# Keys: splitmix64 (a bijection on 64-bit integers, so distinct positions get distinct keys).


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def shuffle_keys(seed: int, positions: np.ndarray) -> np.ndarray:
    """Each position's sort key for ``seed``: distinct for distinct positions."""
    offset = _splitmix64(np.array([seed], dtype=np.uint64))
    return _splitmix64(positions.astype(np.uint64) + offset)


def val_mask(keys: np.ndarray, fraction: float) -> np.ndarray:
    """True for the documents (by key) in the validation split."""
    if fraction <= 0:
        return np.zeros(len(keys), dtype=bool)
    u = (_splitmix64(keys ^ np.uint64(_VAL_SALT)) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return u < fraction


# ---------------------------------------------------------------------------------------------
# Sinks: the documents of one split in their final order go to each output format.


class _Split:
    """Everything written for one split: Parquet shards (documents or packed rows), the
    Megatron pair and documents.parquet, with their counts."""

    def __init__(self, out: Path, name: str, options: TokenizeOptions, dtype: str, vocab_size: int,
                 eos: int | None, shard_size: int) -> None:
        self.out, self.name, self.options = out / name, name, options
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
        self.megatron = MegatronWriter(self.out / "megatron", megatron_dtype(vocab_size)) \
            if "megatron" in options.formats else None
        self._doc_writer: pq.ParquetWriter | None = None
        self._doc_tmp = self.out / ".documents.parquet.tmp"
        self._carry = np.zeros(0, dtype=self.dtype)
        self._pending: deque[tuple[pa.Array, pa.Array, np.ndarray | None]] = deque()
        # Two writer threads, each in order: the Parquet shards, and documents.parquet with the
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
        Megatron pair is written, their byte positions in its ``.bin`` (``_BinLayout``).
        They are written in runs of ``_WRITE_ROWS`` documents, or fewer that reach
        ``_WRITE_TOKENS`` tokens, whatever the cut of the calls, so the files' bytes (row
        groups) do not depend on how the shuffle bucketed the documents."""
        if self.megatron is not None and pointers is None:
            raise ValueError("the Megatron index needs each document's pointer")
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
            self.out.mkdir(parents=True, exist_ok=True)
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
        self._published(info.name, (info.bytes, info.sha256))

    def _published(self, name: str, digest: tuple[int, str]) -> None:
        self.files.append({"path": f"{self.name}/{name}", "bytes": digest[0], "sha256": digest[1]})

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
            summary["megatron"] = {"prefix": f"{self.name}/megatron", "dtype": self.megatron.dtype.name,
                                   "documents": documents, "tokens": self.megatron.tokens,
                                   "bin_bytes": self.megatron.bin_digest[0]}
            self._published(self.megatron.bin_path.name, self.megatron.bin_digest)
            self._published(self.megatron.idx_path.name, self.megatron.idx_digest)
        if self._doc_writer is None:
            self.out.mkdir(parents=True, exist_ok=True)
            self._doc_writer = pq.ParquetWriter(self._doc_tmp, pa.schema([(ID, pa.string()), (LENGTH, pa.int32())]))
        self._doc_writer.close()
        self._published("documents.parquet", hash_path(self._doc_tmp))
        os.replace(self._doc_tmp, self.out / "documents.parquet")
        summary.update({"documents": self.documents, "tokens": self.tokens, "truncated_tokens": self.truncated_tokens})
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
        self._doc_tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------


class _TokenizeExecutor(LocalExecutor):
    """The local executor's tasks and staging, without its pack step: phase 1 only."""

    def plan(self) -> tuple[list[Task], list[Task]]:
        """Every task of the run (planned at its first start) and those not done yet. A
        task staged by a tokpipe that staged ids in Arrow files (its marker names no ids
        range) is redone, the current way."""
        tasks = self._prepare()
        todo = _pending_tasks(self.state, 0, tasks)
        pending = {t.index for t in todo}
        for t in tasks:
            if t.index not in pending and "ids" not in _summary(self.state, 0, t.index):
                (self.state / "seg0" / f"{t.index:06d}.json").unlink()
                todo.append(t)
        return tasks, sorted(todo)

    def tokenize(self, todo: list[Task]) -> None:
        reader = asdict(self.options.reader)
        reader["strict"] = self.options.strict
        workers = max(1, self.options.workers)
        stage_specs, _ = self.segments[0]
        specs = [{"type": s.type, "params": s.params} for s in stage_specs]
        pool = self._pool(min(workers, len(todo)))
        try:
            self._map(pool, "tokenizing", [(_run_segment_task, (str(self.state), 0, t, (specs, None), None, reader,
                                                                "ids")) for t in todo],
                      sizes=[_task_bytes(t) for t in todo])
        finally:
            if pool is not None:
                pool.shutdown()
            close_ids_files()


class _Streamer:
    """Phase 2 without a shuffle, run beside phase 1: a thread writes each task's staged
    documents as soon as that task and every one before it are done (their markers exist),
    so the final files are written while later tasks are still being encoded. The output is
    the same as writing them all afterwards: the same documents in the same order."""

    def __init__(self, tasks: list[Task], state: Path, options: TokenizeOptions, splits: dict[str, _Split],
                 itemsize: int, layout: _BinLayout) -> None:
        self._tasks, self._state, self._options, self._splits = tasks, state, options, splits
        self._itemsize, self._layout = itemsize, layout
        self._wake = threading.Condition()
        self._stopped = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tokpipe-stream", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """A task finished: the thread looks again at the one it waits for. Raises what
        stopped the thread, so a failed write stops the run at the next task."""
        if self._error is not None:
            raise self._error
        with self._wake:
            self._wake.notify_all()

    def _done(self, task: Task) -> bool:
        return (self._state / "seg0" / f"{task.index:06d}.json").exists()

    def _run(self) -> None:
        try:
            position = 0
            for task in self._tasks:
                with self._wake:
                    # The timeout only guards against a missed wake-up; the marker decides.
                    while not self._stopped and not self._done(task):
                        self._wake.wait(timeout=0.5)
                    if self._stopped:
                        return
                staged = _StagedTask.of(self._state, _summary(self._state, 0, task.index))
                position = _write_in_order(_staged([staged], self._itemsize), position, self._options, self._splits,
                                           self._itemsize, self._layout)
        except BaseException as error:  # noqa: BLE001 - raised in the caller's thread by finish()
            self._error = error

    def finish(self) -> None:
        """Waits for the last task's documents to be handed over; raises what went wrong."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        self._thread.join()


def _expand_inputs(inputs: list[str]) -> list[str]:
    """A ``tokpipe clean`` output folder stands for its kept shards (not rejected/ nor the
    staging files)."""
    from tokpipe.pipeline.writers import MANIFEST_NAME, read_manifest

    expanded: list[str] = []
    for given in inputs:
        path = Path(given)
        if path.is_dir() and (path / MANIFEST_NAME).exists():
            manifest = json.loads((path / MANIFEST_NAME).read_text(encoding="utf-8"))
            if manifest.get("format") == FORMAT:
                raise ConfigError(f"{given} is already tokenized output")
            expanded += [str(path / e["path"]) for e in read_manifest(path)["shards"]]
        else:
            expanded.append(given)
    return expanded


def tokenize_corpus(inputs: list[str], out_dir: str | os.PathLike[str], options: TokenizeOptions,
                    run: RunOptions = RunOptions(), progress: Progress | None = None) -> TokenizeResult:
    """Runs both phases (see the module docstring) and returns the manifest. The output
    folder is locked from the start to the end (see ``engines.lock``)."""
    executors: list[_TokenizeExecutor] = []
    try:
        # A full disk in the write phase, outside any work unit: one line too.
        with disk_full_in_one_line(os.fspath(out_dir), "the writing of the shards"):
            return _tokenize_corpus(inputs, out_dir, options, run, progress, executors)
    finally:
        for executor in executors:
            executor.release()


def _tokenize_corpus(inputs: list[str], out_dir: str | os.PathLike[str], options: TokenizeOptions, run: RunOptions,
                     progress: Progress | None, executors: list[_TokenizeExecutor]) -> TokenizeResult:
    progress = progress or (lambda update: None)
    out = Path(out_dir)
    # Only ids and texts are tokenized and staged: the readers skip the inputs' other fields.
    # Batches of at least _ENCODE_BATCH_ROWS documents: each batch ends with encoding threads
    # waiting on the last run, then the staging write; 8 times fewer batches took 4% off the
    # run (on 2 cores), where 32 times fewer lost the overlap of reading and encoding.
    run = replace(run, reader=replace(run.reader, extra_fields=False,
                                      batch_rows=max(run.reader.batch_rows, _ENCODE_BATCH_ROWS)))
    tokenizer = load_tokenizer(options.tokenizer)
    eos = find_eos(tokenizer, options.eos_token) if options.append_eos or options.pad_tail else None
    # `threads` is a speed knob, not part of what the run computes: it reaches the workers as
    # RAYON_NUM_THREADS (inherited when they start), so a resume may use another value.
    config = PipelineConfig([StageSpec("tokenize", {"tokenizer": str(Path(options.tokenizer).resolve()),
                                                    "append_eos": options.append_eos, "eos_token": options.eos_token,
                                                    "keep_text": False, "threads": None})])
    executor = _TokenizeExecutor(config, _expand_inputs(list(inputs)), out, run, progress=progress)
    executors.append(executor)
    tasks, todo = executor.plan()
    state = executor.state
    dtype = ids_dtype(tokenizer.vocab_size)
    itemsize = np.dtype(dtype).itemsize
    params = {**options.global_params(), "shard_size": run.shard_size,
              "tokenizer_sha256": file_sha256(options.tokenizer)}
    manifest_path = out / "manifest.json"
    previous: dict[str, Any] | None = None
    if manifest_path.exists() and not todo:
        previous = json.loads(manifest_path.read_text(encoding="utf-8"))
        # A manifest without digests (an older tokpipe's) is written again, with them.
        if previous.get("params") != params or "files" not in previous:
            previous = None
    splits: dict[str, _Split] = {}
    streamer: _Streamer | None = None
    scratch = state / "shuffle"
    if previous is None:
        manifest_path.unlink(missing_ok=True)
        for name in SPLITS:
            shutil.rmtree(out / name, ignore_errors=True)
        splits = {name: _Split(out, name, options, dtype, tokenizer.vocab_size, eos, run.shard_size)
                  for name in SPLITS}
        if not options.shuffle:
            streamer = _Streamer(tasks, state, options, splits, itemsize,
                                 _BinLayout(options, splits))
            executor.progress = lambda update: (progress(update), streamer.notify())  # type: ignore[union-attr]
    saved = os.environ.get("RAYON_NUM_THREADS")
    if options.threads:
        os.environ["RAYON_NUM_THREADS"] = str(options.threads)
    try:
        try:
            executor.tokenize(todo)
        finally:
            if options.threads:
                if saved is None:
                    os.environ.pop("RAYON_NUM_THREADS", None)
                else:
                    os.environ["RAYON_NUM_THREADS"] = saved

        stats: dict[str, StageStats] = {}
        summaries = [_summary(state, 0, t.index) for t in tasks]
        for summary in summaries:
            for name, data in summary["stats"].items():
                stats.setdefault(name, StageStats(name)).merge(StageStats.from_dict(name, data))
        stats.setdefault(READ_STATS, StageStats(READ_STATS))
        errors = 0
        errors_tmp = out / f".{ERRORS_FILE}.tmp"
        with open(errors_tmp, "w", encoding="utf-8") as f:
            for t in tasks:
                lines = (state / "seg0" / f"{t.index:06d}.errors.jsonl").read_text(encoding="utf-8")
                f.write(lines)
                errors += lines.count("\n")
        errors_digest = hash_path(errors_tmp)
        os.replace(errors_tmp, out / ERRORS_FILE)
        if previous is not None:
            return TokenizeResult(out, previous, stats, 0)

        staged = [_StagedTask.of(state, s) for s in summaries]
        _write_bins(staged, itemsize, options, splits)
        if streamer is not None:
            streamer.finish()
        else:
            documents = sum(int(s["kept"]) for s in summaries)
            tokens = int(stats["tokenize"].extra.get("tokens", 0)) if "tokenize" in stats else 0
            shutil.rmtree(scratch, ignore_errors=True)
            _write_shuffled(staged, documents, tokens, itemsize, options, splits, scratch, progress)
        summaries_out = {name: split.close() for name, split in splits.items()}
    except BaseException:
        if streamer is not None:
            streamer.stop()
        for split in splits.values():
            split.abort()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    ordered = {READ_STATS: stats[READ_STATS], **{k: v for k, v in stats.items() if k != READ_STATS}}
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tokpipe_version": __version__,
        "tokenizer": {"path": str(Path(options.tokenizer).resolve()), "sha256": params["tokenizer_sha256"],
                      "vocab_size": tokenizer.vocab_size, "eos_id": eos, "append_eos": options.append_eos},
        "dtype": dtype, "seq_len": options.seq_len, "pack": options.pack, "truncate": options.truncate,
        "pad_tail": options.pad_tail, "shuffle": options.shuffle, "seed": options.seed,
        "val_fraction": options.val_fraction, "formats": list(options.formats),
        "splits": summaries_out,
        "totals": {"documents": sum(s["documents"] for s in summaries_out.values()),
                   "tokens": sum(s["tokens"] for s in summaries_out.values())},
        "stats": {name: s.as_dict() for name, s in ordered.items()},
        "inputs": executor.inputs, "errors": errors, "params": params,
        "files": sorted([{"path": ERRORS_FILE, "bytes": errors_digest[0], "sha256": errors_digest[1]},
                         *(entry for split in splits.values() for entry in split.files)], key=lambda e: e["path"]),
    }
    _write_json(manifest_path, manifest)
    return TokenizeResult(out, manifest, ordered, len(todo))


@dataclass(frozen=True)
class _StagedTask:
    """What phase 1 staged for one task (``writers.ids_staging``): its documents' ids and
    lengths (Arrow IPC files, in order) and the byte range [start, end) of its token ids in
    an ids file (None when it kept no document)."""

    meta: list[Path]
    ids: Path | None
    start: int
    end: int

    @staticmethod
    def of(state: Path, summary: dict[str, Any]) -> _StagedTask:
        kept = state / "seg0" / "kept"
        ids = summary["ids"]
        return _StagedTask([kept / name for name in summary["kept_files"]],
                           kept / ids["file"] if ids["end"] > ids["start"] else None, ids["start"], ids["end"])


@dataclass
class _StagedBatch:
    """A staged record batch, for reading its documents' ids in place: its ids file (a
    number in the run's list of ids files), the byte position in that file of its first id,
    its int64 list offsets (from 0), and its document ids."""

    file: int
    base: int
    offsets: np.ndarray
    doc_ids: pa.Array


def _staged_batches(tasks: list[_StagedTask], itemsize: int) -> tuple[list[Path], list[_StagedBatch]]:
    """The run's ids files, and every staged batch in input order. Only ids and lengths are
    read (a few bytes a document); the token ids stay on disk."""
    files: dict[Path, int] = {}
    batches = []
    for task in tasks:
        base = task.start
        number = files.setdefault(task.ids, len(files)) if task.ids is not None else -1
        for path in task.meta:
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                offsets = np.zeros(batch.num_rows + 1, dtype=np.int64)
                np.cumsum(numpy_of(batch.column(LENGTH)), out=offsets[1:])
                batches.append(_StagedBatch(number, base, offsets, batch.column(ID)))
                base += int(offsets[-1]) * itemsize
        if base != task.end:
            raise PipelineError(f"{task.meta}: the staged lengths do not add up to the ids staged ({task.ids})")
    return list(files), batches


def _staged(tasks: list[_StagedTask], itemsize: int) -> Iterator[pa.RecordBatch]:
    """The staged documents (``id``, ``input_ids``), task after task, as record batches over
    memory maps of the staging files: nothing is decoded or copied to read them."""
    files, batches = _staged_batches(tasks, itemsize)
    maps = [pa.memory_map(str(path)) for path in files]
    for batch in batches:
        values = maps[batch.file].read_at(int(batch.offsets[-1]) * itemsize, batch.base) if batch.file >= 0 \
            else pa.py_buffer(b"")
        yield pa.record_batch([batch.doc_ids, _large_lists(batch.offsets, values, itemsize)], names=[ID, INPUT_IDS])


class _BinLayout:
    """Where each document's ids are in its split's Megatron ``.bin``: the split's documents
    in input order, back to back (each cut to a row, ``seq_len + 1`` tokens, when
    truncating), at the ``.bin``'s dtype (``width`` bytes an id; 0 when no Megatron pair is
    written, and no pointer is used). ``pointers`` takes the documents of a split in input
    order, a run at a time, and returns their byte positions."""

    def __init__(self, options: TokenizeOptions, splits: dict[str, _Split]) -> None:
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


def _write_bins(tasks: list[_StagedTask], itemsize: int, options: TokenizeOptions, splits: dict[str, _Split]) -> None:
    """Each split's Megatron ``.bin`` (``_BinLayout``). When the staging already is the
    train split's ``.bin`` (one ids file holding every task's ids in task order, at the
    ``.bin``'s width, nothing truncated and no validation split), the ``.bin`` is that
    file, linked; otherwise the documents are copied into place in input order."""
    bins = {name: split.megatron for name, split in splits.items() if split.megatron is not None}
    ranges = [(t.ids, t.start, t.end) for t in tasks if t.ids is not None]
    if not bins or not ranges:
        return
    layout = _BinLayout(options, splits)
    first = ranges[0][0]
    assert first is not None
    in_place = all(path == first and start == (ranges[i - 1][2] if i else 0)
                   for i, (path, start, _) in enumerate(ranges)) and os.path.getsize(first) == ranges[-1][2]
    if in_place and layout.width == itemsize and options.val_fraction == 0 and not options.truncate:
        bins["train"].link_bin(first)
        return
    files, batches = _staged_batches(tasks, itemsize)
    reader = _core.StagedFiles([str(p) for p in files])
    dtype = np.dtype(f"uint{8 * itemsize}")
    position = 0
    for batch in batches:
        n = len(batch.offsets) - 1
        val = val_mask(shuffle_keys(options.seed, np.arange(position, position + n)), options.val_fraction)
        position += n
        for name, mask in (("train", ~val), ("val", val)):
            rows = np.flatnonzero(mask)
            if not len(rows):
                continue
            counts = layout.lengths(batch.offsets[rows + 1] - batch.offsets[rows])
            values = reader.read(np.full(len(rows), batch.file, dtype=np.int64),
                                 batch.base + batch.offsets[rows] * itemsize, counts * itemsize, itemsize)
            bins[name].append_bin(np.frombuffer(values, dtype=dtype))


def _pointers(layout: _BinLayout, lists: pa.LargeListArray, val: np.ndarray) -> np.ndarray:
    """The ``.bin`` pointer of each of a run of documents (their token lists, in input
    order), each in its split."""
    offsets, _ = list_buffers(lists)
    lengths = np.diff(offsets)
    pointers = np.empty(len(lengths), dtype=np.int64)
    for name, mask in (("train", ~val), ("val", val)):
        pointers[mask] = layout.pointers(name, lengths[mask])
    return pointers


def _write_in_order(batches: Iterator[pa.RecordBatch], position: int, options: TokenizeOptions,
                    splits: dict[str, _Split], itemsize: int, layout: _BinLayout) -> int:
    """Staged documents to the splits in input order, the first at ``position`` (input
    order numbers documents for the split rule); returns the position after the last."""
    for batch in batches:
        keys = shuffle_keys(options.seed, np.arange(position, position + batch.num_rows))
        position += batch.num_rows
        val = val_mask(keys, options.val_fraction)
        lists = batch.column(INPUT_IDS)
        source = _Source(batch.column(ID), lists, keys, _pointers(layout, lists, val))
        for name, mask in (("train", ~val), ("val", val)):
            if mask.all():
                splits[name].add(source.doc_ids, source.lists, source.pointers)
            elif mask.any():
                splits[name].add(*_Gather([source.subset(np.flatnonzero(mask))], itemsize)())
    return position


def _write_shuffled(tasks: list[_StagedTask], documents: int, tokens: int, itemsize: int, options: TokenizeOptions,
                    splits: dict[str, _Split], scratch: Path, progress: Progress) -> None:
    update = ProgressUpdate("writing", 0, max(documents, 1), "units")
    progress(update)
    if tokens * itemsize <= _page_cache_budget() and _can_open(len({t.ids for t in tasks})):
        _write_shuffled_from_staging(tasks, documents, itemsize, options, splits, update, progress)
    else:
        _write_shuffled_spilling(tasks, documents, tokens, itemsize, options, splits, scratch, update, progress)


# Bytes of the in-place shuffle's index per document, besides its id: its key, file, byte
# position, token count and .bin pointer, the sort order, and the same fields in sorted order.
_INDEX_BYTES = 80


def _page_cache_budget() -> int:
    """Staged ids up to this size are read in place, in key order (half the machine's memory:
    files just written are then still in the page cache, and reads in any order cost no
    disk seeks); more are spilled to key-range buckets, each read back in one sequential
    pass."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 0


def _can_open(files: int) -> bool:
    """Whether ``files`` more files can be held open at once, raising this process's soft
    limit on open files towards the hard one if need be."""
    try:
        import resource
    except ImportError:  # no such limit to raise (Windows): keep within a conservative count
        return files <= 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = files + 256  # the run's own files, sockets, the writers' shards
    if soft == resource.RLIM_INFINITY or soft >= need:
        return True
    if hard != resource.RLIM_INFINITY and hard < need:
        return False
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    except (ValueError, OSError):
        return False
    return True


def _bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The key range (0 .. buckets - 1) of each key: its top 32 bits scaled to the count."""
    return (((keys >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)).astype(np.int64)


def _write_shuffled_from_staging(tasks: list[_StagedTask], documents: int, itemsize: int, options: TokenizeOptions,
                                 splits: dict[str, _Split], update: ProgressUpdate, progress: Progress) -> None:
    """The shuffle when the staged ids fit in the page cache: an index of the documents
    (key, file, byte range, ``.bin`` pointer) sorted by key, and the ids of each run of
    documents read from the staged files in that order, straight into the buffer the
    writers take. Nothing is copied to disk and no staged file is mapped whole. The index
    takes about ``_INDEX_BYTES`` a document plus its id; past ``shuffle_buffer`` it is
    built and written key range by key range (several passes over the offsets, one over
    the ids)."""
    files, batches = _staged_batches(tasks, itemsize)
    id_bytes = sum(b.doc_ids.nbytes for b in batches)
    buckets = max(1, -(-(documents * _INDEX_BYTES + id_bytes) // options.shuffle_buffer))
    staged = _core.StagedFiles([str(p) for p in files])
    done = 0
    for bucket in range(buckets):
        # Per split: the documents of this key range, as parallel arrays and id pieces.
        parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, pa.Array]]] = \
            {name: [] for name in SPLITS}
        layout = _BinLayout(options, splits)
        position = 0
        for batch in batches:
            n = len(batch.offsets) - 1
            keys = shuffle_keys(options.seed, np.arange(position, position + n))
            position += n
            val = val_mask(keys, options.val_fraction)
            here = _bucket_of(keys, buckets) == bucket if buckets > 1 else np.ones(n, dtype=bool)
            for name, mask in (("train", ~val), ("val", val)):
                split_rows = np.flatnonzero(mask)
                split_lengths = batch.offsets[split_rows + 1] - batch.offsets[split_rows]
                pointers = layout.pointers(name, split_lengths)
                chosen = here[split_rows]
                rows = split_rows[chosen]
                if not len(rows):
                    continue
                starts = batch.base + batch.offsets[rows] * itemsize
                doc_ids = batch.doc_ids if len(rows) == n else batch.doc_ids.take(arrow_of(rows))
                parts[name].append((keys[rows], np.full(len(rows), batch.file, dtype=np.int64), starts,
                                    split_lengths[chosen], pointers[chosen], doc_ids))
        for name in SPLITS:
            if not parts[name]:
                continue
            keys, file_of, starts, lengths, pointers = (np.concatenate([p[i] for p in parts[name]]) for i in range(5))
            doc_ids = pa.concat_arrays([p[5] for p in parts[name]])
            del parts[name][:]
            order = np.argsort(keys, kind="stable")
            del keys
            file_of, starts, lengths, pointers = file_of[order], starts[order], lengths[order], pointers[order]
            doc_ids = doc_ids.take(arrow_of(order))
            del order
            split = splits[name]
            start = 0
            while start < len(lengths):
                # Runs that complete the split's pending run, so it never concatenates.
                end = start + split.room_for(lengths[start:])
                counts = lengths[start:end]
                values = staged.read(file_of[start:end], starts[start:end], counts * itemsize, itemsize)
                offsets = np.zeros(end - start + 1, dtype=np.int64)
                np.cumsum(counts, out=offsets[1:])
                split.add(doc_ids.slice(start, end - start), _large_lists(offsets, values, itemsize),
                          pointers[start:end])
                done += end - start
                start = end
                update.done = done
                progress(update)


def _token_count(ids: pa.Array) -> int:
    """The tokens of a ``large_list`` column of token lists."""
    offsets, _ = list_buffers(ids)
    return int(offsets[-1] - offsets[0])


def _large_lists(offsets: Any, values: Any, itemsize: int) -> pa.LargeListArray:
    """A large_list array over int64 ``offsets`` (from 0) and flat unsigned ``values`` of
    ``itemsize`` bytes, both objects with the buffer protocol (numpy arrays, ``OwnedBuffer``),
    not copied."""
    value_type = pa.from_numpy_dtype(np.dtype(f"uint{8 * itemsize}"))
    offsets, values = pa.py_buffer(offsets), pa.py_buffer(values)
    flat = pa.Array.from_buffers(value_type, values.size // value_type.byte_width, [None, values])
    return pa.LargeListArray.from_buffers(pa.large_list(value_type), offsets.size // 8 - 1, [None, offsets],
                                          children=[flat])


def _write_shuffled_spilling(tasks: list[_StagedTask], documents: int, tokens: int, itemsize: int,
                             options: TokenizeOptions, splits: dict[str, _Split], scratch: Path,
                             update: ProgressUpdate, progress: Progress) -> None:
    """The shuffle when the staged ids do not fit in the page cache: documents scattered by
    key range into buckets of at most ``shuffle_buffer`` bytes of ids (Arrow files, written
    and read back sequentially), then each bucket sorted and written in turn."""
    position = 0
    # Shuffle: documents scattered by key range into buckets that each fit the shuffle
    # buffer, then each bucket in key order. With one bucket nothing is copied before the
    # final gather: the bucket is the staged batches themselves (memory-mapped).
    size = tokens * itemsize + documents * 16
    buckets = max(1, -(-size // options.shuffle_buffer))
    spill = buckets > 1
    flush_bytes = max(1 << 18, options.shuffle_buffer // buckets)
    # Per (split, bucket): the sources (documents with their keys) held in memory, and, when
    # spilling, the Arrow file they are flushed to.
    pending: dict[tuple[str, int], list[_Source]] = {}
    pending_bytes: dict[tuple[str, int], int] = {}
    writers: dict[tuple[str, int], pa.ipc.RecordBatchFileWriter] = {}

    def flush(slot: tuple[str, int]) -> None:
        sources = pending.pop(slot, [])
        pending_bytes.pop(slot, None)
        if not sources:
            return
        doc_ids, lists, pointers = _Gather(sources, itemsize)()
        keys = np.concatenate([src.keys for src in sources])
        batch = pa.record_batch([doc_ids, arrow_of(keys), arrow_of(pointers), lists], names=[ID, _KEY, _POINTER, INPUT_IDS])
        if slot not in writers:
            scratch.mkdir(parents=True, exist_ok=True)
            writers[slot] = pa.ipc.new_file(str(scratch / f"{slot[0]}-{slot[1]:05d}.arrow"), batch.schema)
        writers[slot].write_batch(batch)

    layout = _BinLayout(options, splits)
    for batch in _staged(tasks, itemsize):
        n = batch.num_rows
        keys = shuffle_keys(options.seed, np.arange(position, position + n))
        position += n
        val = val_mask(keys, options.val_fraction)
        lists = batch.column(INPUT_IDS)
        source = _Source(batch.column(ID), lists, keys, _pointers(layout, lists, val))
        if not spill:
            slot_of = val.astype(np.int64)
        else:
            slot_of = _bucket_of(keys, buckets) * 2 + val.astype(np.int64)
        order = np.argsort(slot_of, kind="stable")
        bounds = np.flatnonzero(np.diff(slot_of[order])) + 1
        for rows in np.split(order, bounds):
            if not len(rows):
                continue
            code = int(slot_of[rows[0]])
            slot = (SPLITS[code % 2], code // 2 if spill else 0)
            part = source if len(rows) == n else source.subset(rows)
            pending.setdefault(slot, []).append(part)
            pending_bytes[slot] = pending_bytes.get(slot, 0) + part.nbytes
            if spill and pending_bytes[slot] >= flush_bytes:
                flush(slot)
        update.done = position // 2
        progress(update)
    if spill:
        for slot in list(pending):
            flush(slot)
        for w in writers.values():
            w.close()
    done = 0
    for name in SPLITS:
        for b in range(buckets):
            if spill:
                path = scratch / f"{name}-{b:05d}.arrow"
                if not path.exists():
                    continue
                reader = pa.ipc.open_file(pa.memory_map(str(path)))
                sources = [_Source(part.column(ID), part.column(INPUT_IDS), numpy_of(part.column(_KEY)),
                                   numpy_of(part.column(_POINTER)))
                           for part in (reader.get_batch(i) for i in range(reader.num_record_batches))]
            else:
                sources = pending.pop((name, 0), [])
            if not sources:
                continue
            done += _write_bucket(sources, splits[name], itemsize)
            del sources
            if spill:
                path.unlink()
            update.done = documents // 2 + done // 2
            progress(update)


_KEY = "_key"
_POINTER = "_pointer"


def _write_bucket(sources: list[_Source], split: _Split, itemsize: int) -> int:
    """The documents of ``sources`` to ``split`` in key order, gathered a run at a time (so
    the sorted copy never exists whole next to the bucket). Returns how many."""
    gather = _Gather(sources, itemsize)
    order = np.argsort(np.concatenate([src.keys for src in sources]), kind="stable")
    lengths = gather.lengths[order]
    start = 0
    while start < len(order):
        end = start + split.room_for(lengths[start:])
        split.add(*gather(order[start:end]))
        start = end
    return len(order)


@dataclass
class _Source:
    """Documents for the shuffle: their ids, token lists, keys and ``.bin`` pointers, and
    which of their rows are meant (``rows``; all when None). A subset is a view: rows are
    only copied by :class:`_Gather`, once, where they go."""

    doc_ids: pa.Array
    lists: pa.LargeListArray
    keys: np.ndarray
    pointers: np.ndarray
    rows: np.ndarray | None = None

    def __post_init__(self) -> None:
        if isinstance(self.doc_ids, pa.ChunkedArray):
            self.doc_ids = self.doc_ids.combine_chunks()
        if isinstance(self.lists, pa.ChunkedArray):
            self.lists = self.lists.combine_chunks()

    def subset(self, rows: np.ndarray) -> _Source:
        assert self.rows is None
        return _Source(self.doc_ids, self.lists, self.keys[rows], self.pointers[rows], rows.astype(np.int64))

    @property
    def nbytes(self) -> int:
        """Roughly what its documents take: their ids' share of the token buffer, and 16
        bytes each for offsets and keys."""
        offsets, values = list_buffers(self.lists)
        if self.rows is None:
            tokens = int(offsets[-1] - offsets[0])
        else:
            tokens = int((offsets[self.rows + 1] - offsets[self.rows]).sum())
        return tokens * values.itemsize + 16 * len(self.keys)


class _Gather:
    """Gathers documents of ``sources`` (numbered one source after another) by position:
    their ids and token lists, each token copied once (``_core.gather_lists``)."""

    def __init__(self, sources: list[_Source], itemsize: int) -> None:
        counts = np.array([len(src.keys) for src in sources], dtype=np.int64)
        self.pieces = np.repeat(np.arange(len(sources), dtype=np.int64), counts)
        rows = [src.rows if src.rows is not None else np.arange(len(src.keys), dtype=np.int64) for src in sources]
        self.rows = np.concatenate(rows)
        self.buffers = [list_buffers(src.lists) for src in sources]
        doc_ids = [src.doc_ids if src.rows is None else src.doc_ids.take(arrow_of(src.rows)) for src in sources]
        self.doc_ids = doc_ids[0] if len(doc_ids) == 1 else pa.concat_arrays(doc_ids)
        self.pointers = np.concatenate([src.pointers for src in sources])
        self.itemsize = itemsize
        #: Each document's token count, by position.
        self.lengths = np.concatenate([np.diff(offsets)[r] for (offsets, _), r in zip(self.buffers, rows)])

    def __call__(self, order: np.ndarray | None = None) -> tuple[pa.Array, pa.LargeListArray, np.ndarray]:
        """The documents at positions ``order`` (all, in turn, when None): ids, token lists
        and ``.bin`` pointers."""
        pieces, rows = (self.pieces, self.rows) if order is None else (self.pieces[order], self.rows[order])
        offsets, values = _core.gather_lists(self.buffers, self.itemsize, pieces, rows)
        lists = _large_lists(offsets, values, self.itemsize)
        if order is None:
            return self.doc_ids, lists, self.pointers
        return self.doc_ids.take(arrow_of(order)), lists, self.pointers[order]


def read_tokenized_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest of a ``tokpipe tokenize`` output folder, or None for another folder."""
    path = Path(out_dir) / "manifest.json"
    if not path.exists():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return manifest if manifest.get("format") == FORMAT else None


def _published_paths(manifest: dict[str, Any]) -> list[str]:
    """Every file a run publishes, as its manifest describes the run (paths from OUT, with
    ``/``), whether or not the manifest records its digest."""
    paths = [ERRORS_FILE]
    for name, split in manifest["splits"].items():
        paths += [entry["path"] for entry in split.get("parquet", [])]
        paths.append(f"{name}/documents.parquet")
        if split.get("megatron") is not None:
            paths += [f"{split['megatron']['prefix']}.bin", f"{split['megatron']['prefix']}.idx"]
    return paths


def _check_digest(out: Path, rel: str, entry: dict[str, Any], version: str) -> list[str]:
    """A published file against its size and sha256 in the manifest; a file an older
    tokpipe recorded no sha256 for is "not verified", a problem too."""
    problems = check_file(out, rel, entry.get("bytes"), entry.get("sha256"))
    if not problems and not entry.get("sha256"):
        problems.append(f"{rel}: not verified: the manifest (tokpipe {version}) records no sha256 for it; "
                        "rerun the same `tokpipe tokenize` command to record the digests")
    return problems


def verify_tokenized(out_dir: str | os.PathLike[str], manifest: dict[str, Any]) -> list[str]:
    """Check a tokenized folder against its manifest; return the problems found, one line
    each naming the file (``[]`` when all is well).

    Every published file (``_published_paths``: the Parquet shards, each split's
    ``documents.parquet``, ``megatron.bin`` and ``megatron.idx``, ``errors.jsonl``) must
    exist with the size and sha256 the manifest's ``files`` records; the Parquet footers'
    row counts and the ``.idx`` header's sequence count must agree with the manifest; and no
    other file may sit in a split's folder (a loader globbing ``part-*.parquet`` would read
    it). A manifest from a tokpipe that recorded no digests (no ``files``) still has the
    shards' digests and the ``.bin``'s size checked; every other file is reported as "not
    verified", a problem: such a folder is never called verified."""
    import struct

    out = Path(out_dir)
    version = str(manifest.get("tokpipe_version"))
    problems: list[str] = []
    recorded: dict[str, dict[str, Any]] = {entry["path"]: entry for entry in manifest.get("files", [])}
    for split in manifest["splits"].values():
        # Older manifests: the shards had their digests already, the .bin its size.
        for entry in split.get("parquet", []):
            recorded.setdefault(entry["path"], entry)
        if split.get("megatron") is not None:
            recorded.setdefault(f"{split['megatron']['prefix']}.bin", {"bytes": split["megatron"]["bin_bytes"]})
    paths = dict.fromkeys([*_published_paths(manifest), *recorded])
    for rel in paths:
        if not is_plain_relative(rel):
            problems.append(f"manifest.json: {rel[:200]!r} is not a plain relative path")
            continue
        problems.extend(_check_digest(out, rel, recorded.get(rel, {}), version))
    for name, split in manifest["splits"].items():
        if not is_plain_relative(name):
            continue
        for entry in split.get("parquet", []):
            if is_plain_relative(entry["path"]):
                problems.extend(check_parquet_rows(out, entry["path"], entry["rows"]))
        problems.extend(check_parquet_rows(out, f"{name}/documents.parquet", split["documents"], "documents"))
        megatron = split.get("megatron")
        idx = f"{megatron['prefix']}.idx" if megatron is not None else ""
        if megatron is not None and is_plain_relative(idx) and (out / idx).is_file():
            with open(out / idx, "rb") as f:
                header = f.read(34)
            if len(header) < 34 or header[:9] != MAGIC:
                problems.append(f"{idx}: not a Megatron index")
            else:
                sequences, _ = struct.unpack("<QQ", header[18:34])
                if sequences != megatron["documents"]:
                    problems.append(f"{idx}: {sequences} sequences, manifest says {megatron['documents']}")
        if (out / name).is_dir():
            for path in sorted((out / name).iterdir()):
                rel = f"{name}/{path.name}"
                if not path.name.startswith(".") and rel not in paths:
                    problems.append(f"{rel}: on disk but not listed in the manifest")
    return problems
