"""Phase 2's writes: the staged documents to the splits' sinks, in shuffled order
(:func:`write_shuffled`: in place from the staging when it fits in the page cache, else
spilled to key-range buckets) or in input order (:func:`write_in_order`), and each split's
Megatron ``.bin`` in input order (:func:`write_bins`: the staging linked, or copied).
Every gather copies a document's ids once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from tokpipe import _core
from tokpipe.pipeline import fs
from tokpipe.pipeline.documents import ID
from tokpipe.pipeline.engines.base import Progress, ProgressUpdate
from tokpipe.pipeline.kernels import arrow_of, list_buffers, numpy_of
from tokpipe.pipeline.stages.tokenize import INPUT_IDS
from tokpipe.pipeline.tokenize.keys import bucket_of, shuffle_keys, val_mask
from tokpipe.pipeline.tokenize.options import SPLITS, TokenizeOptions
from tokpipe.pipeline.tokenize.sinks import BinLayout, Split
from tokpipe.pipeline.tokenize.staging import StagedTask, large_lists, staged_batches, staged_documents

__all__ = ["write_shuffled", "write_in_order", "write_bins"]

# Bytes of the in-place shuffle's index per document, besides its id: its key, file, byte
# position, token count and .bin pointer, the sort order, and the same fields in sorted order.
_INDEX_BYTES = 80
# Columns of a spilled bucket besides the documents': their keys and .bin pointers.
_KEY = "_key"
_POINTER = "_pointer"


def write_bins(tasks: list[StagedTask], itemsize: int, options: TokenizeOptions, splits: dict[str, Split]) -> None:
    """Each split's Megatron ``.bin`` (``BinLayout``). When the staging already is the
    train split's ``.bin`` (one ids file holding every task's ids in task order, at the
    ``.bin``'s width, nothing truncated and no validation split), the ``.bin`` is that
    file, linked; otherwise the documents are copied into place in input order."""
    bins = {name: split.megatron for name, split in splits.items() if split.megatron is not None}
    ranges = [(t.ids, t.start, t.end) for t in tasks if t.ids is not None]
    if not bins or not ranges:
        return
    layout = BinLayout(options, splits)
    first = ranges[0][0]
    assert first is not None
    in_place = all(path == first and start == (ranges[i - 1][2] if i else 0)
                   for i, (path, start, _) in enumerate(ranges)) and fs.size(first) == ranges[-1][2]
    if in_place and layout.width == itemsize and options.val_fraction == 0 and not options.truncate:
        bins["train"].link_bin(first)
        return
    files, batches = staged_batches(tasks, itemsize)
    reader = _core.StagedFiles([str(p) for p in files])
    dtype = np.dtype(f"uint{8 * itemsize}")
    position = 0
    for batch in batches:
        offsets = batch.offsets
        n = len(offsets) - 1
        val = val_mask(shuffle_keys(options.seed, np.arange(position, position + n)), options.val_fraction)
        position += n
        for name, mask in (("train", ~val), ("val", val)):
            rows = np.flatnonzero(mask)
            if not len(rows):
                continue
            counts = layout.lengths(offsets[rows + 1] - offsets[rows])
            values = reader.read(np.full(len(rows), batch.file, dtype=np.int64),
                                 batch.base + offsets[rows] * itemsize, counts * itemsize, itemsize)
            bins[name].append_bin(np.frombuffer(values, dtype=dtype))


def _pointers(layout: BinLayout, lists: pa.LargeListArray, val: np.ndarray) -> np.ndarray:
    """The ``.bin`` pointer of each of a run of documents (their token lists, in input
    order), each in its split."""
    offsets, _ = list_buffers(lists)
    lengths = np.diff(offsets)
    pointers = np.empty(len(lengths), dtype=np.int64)
    for name, mask in (("train", ~val), ("val", val)):
        pointers[mask] = layout.pointers(name, lengths[mask])
    return pointers


def write_in_order(batches: Iterator[pa.RecordBatch], position: int, options: TokenizeOptions,
                    splits: dict[str, Split], itemsize: int, layout: BinLayout) -> int:
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


def write_shuffled(tasks: list[StagedTask], documents: int, tokens: int, itemsize: int, options: TokenizeOptions,
                    splits: dict[str, Split], scratch: Path, progress: Progress) -> None:
    update = ProgressUpdate("writing", 0, max(documents, 1), "units")
    progress(update)
    if tokens * itemsize <= _page_cache_budget() and _can_open(len({t.ids for t in tasks})):
        _write_shuffled_from_staging(tasks, documents, itemsize, options, splits, update, progress)
    else:
        _write_shuffled_spilling(tasks, documents, tokens, itemsize, options, splits, scratch, update, progress)


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


def _write_shuffled_from_staging(tasks: list[StagedTask], documents: int, itemsize: int, options: TokenizeOptions,
                                 splits: dict[str, Split], update: ProgressUpdate, progress: Progress) -> None:
    """The shuffle when the staged ids fit in the page cache: an index of the documents
    (key, file, byte range, ``.bin`` pointer) sorted by key, and the ids of each run of
    documents read from the staged files in that order, straight into the buffer the
    writers take. Nothing is copied to disk and no staged file is mapped whole. The index
    takes about ``_INDEX_BYTES`` a document plus its id; past ``shuffle_buffer`` it is
    built and written key range by key range (several passes over the offsets, one over
    the ids)."""
    files, batches = staged_batches(tasks, itemsize)
    id_bytes = sum(b.doc_ids.nbytes for b in batches)
    buckets = max(1, -(-(documents * _INDEX_BYTES + id_bytes) // options.shuffle_buffer))
    staged = _core.StagedFiles([str(p) for p in files])
    done = 0
    for bucket in range(buckets):
        # Per split: the documents of this key range, as parallel arrays and id pieces.
        parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, pa.Array]]] = \
            {name: [] for name in SPLITS}
        layout = BinLayout(options, splits)
        position = 0
        for batch in batches:
            offsets = batch.offsets
            n = len(offsets) - 1
            keys = shuffle_keys(options.seed, np.arange(position, position + n))
            position += n
            val = val_mask(keys, options.val_fraction)
            here = bucket_of(keys, buckets) == bucket if buckets > 1 else np.ones(n, dtype=bool)
            for name, mask in (("train", ~val), ("val", val)):
                split_rows = np.flatnonzero(mask)
                split_lengths = offsets[split_rows + 1] - offsets[split_rows]
                pointers = layout.pointers(name, split_lengths)
                chosen = here[split_rows]
                rows = split_rows[chosen]
                if not len(rows):
                    continue
                starts = batch.base + offsets[rows] * itemsize
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
                split.add(doc_ids.slice(start, end - start), large_lists(offsets, values, itemsize),
                          pointers[start:end])
                done += end - start
                start = end
                update.done = done
                progress(update)


def _write_shuffled_spilling(tasks: list[StagedTask], documents: int, tokens: int, itemsize: int,
                             options: TokenizeOptions, splits: dict[str, Split], scratch: Path,
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
            fs.make_dirs(scratch)
            writers[slot] = pa.ipc.new_file(str(scratch / f"{slot[0]}-{slot[1]:05d}.arrow"), batch.schema)
        writers[slot].write_batch(batch)

    layout = BinLayout(options, splits)
    for batch in staged_documents(tasks, itemsize):
        n = batch.num_rows
        keys = shuffle_keys(options.seed, np.arange(position, position + n))
        position += n
        val = val_mask(keys, options.val_fraction)
        lists = batch.column(INPUT_IDS)
        source = _Source(batch.column(ID), lists, keys, _pointers(layout, lists, val))
        if not spill:
            slot_of = val.astype(np.int64)
        else:
            slot_of = bucket_of(keys, buckets) * 2 + val.astype(np.int64)
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
                if not fs.exists(path):
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
                fs.remove(path)
            update.done = documents // 2 + done // 2
            progress(update)


def _write_bucket(sources: list[_Source], split: Split, itemsize: int) -> int:
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
        lists = large_lists(offsets, values, self.itemsize)
        if order is None:
            return self.doc_ids, lists, self.pointers
        return self.doc_ids.take(arrow_of(order)), lists, self.pointers[order]
