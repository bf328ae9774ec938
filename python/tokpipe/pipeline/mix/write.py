"""The mix's writes: each source's chosen documents read a record batch at a time and
scattered to key ranges (:class:`_Buckets`), each range sorted and handed to ``tokenize``'s
sinks (Parquet shards, the documents file, the Megatron pair, in output order), then the
Megatron weight lists, the dataset card and the manifest (see the package docstring)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe import __version__, _core, storage
from tokpipe.errors import PipelineError
from tokpipe.pipeline import fs
from tokpipe.pipeline.documents import ID
from tokpipe.pipeline.engines.base import Progress, ProgressUpdate
from tokpipe.pipeline.engines.state import RUN_KEY, RunState, identity_digest
from tokpipe.pipeline.kernels import arrow_of, list_buffers, numpy_of
from tokpipe.pipeline.mix.plan import MixOptions, Source, select
from tokpipe.pipeline.stages.tokenize import INPUT_IDS
from tokpipe.pipeline.tokenize.keys import bucket_of, shuffle_keys
from tokpipe.pipeline.tokenize.options import FORMAT, FORMAT_VERSION, MEGATRON_DIR, SPLITS, TokenizeOptions
from tokpipe.pipeline.tokenize.sinks import Split
from tokpipe.pipeline.tokenize.staging import large_lists
from tokpipe.pipeline.writers import MANIFEST_NAME, hash_path
from tokpipe.pipeline.writers.card import tokens_card
from tokpipe.pipeline.writers.manifest import ERRORS_NAME

__all__ = ["DATA_PATH_FILES", "write_output"]

#: Megatron ``--data-path``-style weight lists, per split (from OUT): ``w1 prefix1 w2 prefix2``.
DATA_PATH_FILES = {"train": f"{MEGATRON_DIR}/train.data_path.txt", "val": f"{MEGATRON_DIR}/val.data_path.txt"}
# The column of a scattered document's key in the output order.
_KEY = "_key"
# Rows read from a source shard at a time.
_READ_ROWS = 8192


def _source_batches(source: Source, split: str) -> Iterator[pa.RecordBatch]:
    """The split's documents (id, input_ids) in the order of its documents file: its Parquet
    shards in turn, a record batch at a time."""
    for entry in source.manifest["splits"][split].get("parquet", []):
        with fs.parquet_file(source.location / entry["path"]) as parquet:
            yield from parquet.iter_batches(batch_size=_READ_ROWS, columns=[ID, INPUT_IDS])


def _gather(lists: pa.LargeListArray, rows: np.ndarray, itemsize: int) -> pa.LargeListArray:
    """The token lists at ``rows``, each token copied once (``_core.gather_lists``)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    offsets, values = _core.gather_lists([list_buffers(lists)], itemsize, np.zeros(len(rows), dtype=np.int64), rows)
    return large_lists(offsets, values, itemsize)


def _taken(lists: pa.LargeListArray, take: np.ndarray, itemsize: int) -> tuple[np.ndarray, pa.LargeListArray]:
    """The rows with tokens taken (``take`` > 0) and their first ``take`` tokens: the lists
    as they are when every row is taken whole, else gathered."""
    rows = np.flatnonzero(take)
    offsets, _ = list_buffers(lists)
    counts = take[rows]
    short = np.flatnonzero(counts < offsets[rows + 1] - offsets[rows])
    if not len(short):
        return rows, lists if len(rows) == len(take) else _gather(lists, rows, itemsize)
    # The cut document of the source's partial epoch (one, in one batch): gathered whole,
    # then its tail dropped.
    gathered = _gather(lists, rows, itemsize)
    new_offsets, values = (np.array(a) for a in list_buffers(gathered))
    for j in short[::-1]:
        end = int(new_offsets[j + 1])
        keep = int(new_offsets[j]) + int(counts[j])
        values = np.concatenate([values[:keep], values[end:]])
        new_offsets[j + 1:] -= end - keep
    return rows, large_lists(new_offsets, values, itemsize)


class _Buckets:
    """Selected documents scattered by key range: held in memory when one range holds them
    all, else appended to one Arrow file per range (``scratch``), flushed past a share of the
    buffer."""

    def __init__(self, count: int, scratch: Path, flush_bytes: int) -> None:
        self.count, self.scratch, self.flush_bytes = count, scratch, flush_bytes
        self.pending: dict[int, list[pa.RecordBatch]] = {}
        self.pending_bytes: dict[int, int] = {}
        self.writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}

    def add(self, batch: pa.RecordBatch) -> None:
        """Documents (id, key, token lists), each to its key range."""
        keys = numpy_of(batch.column(_KEY))
        slots = bucket_of(keys, self.count) if self.count > 1 else np.zeros(len(keys), dtype=np.int64)
        order = np.argsort(slots, kind="stable")
        bounds = np.flatnonzero(np.diff(slots[order])) + 1
        for rows in np.split(order, bounds):
            if not len(rows):
                continue
            slot = int(slots[rows[0]])
            part = batch if len(rows) == batch.num_rows else batch.take(arrow_of(rows))
            self.pending.setdefault(slot, []).append(part)
            self.pending_bytes[slot] = self.pending_bytes.get(slot, 0) + part.nbytes
            if self.count > 1 and self.pending_bytes[slot] >= self.flush_bytes:
                self._flush(slot)

    def _path(self, slot: int) -> Path:
        return self.scratch / f"mix-{slot:05d}.arrow"

    def _flush(self, slot: int) -> None:
        parts = self.pending.pop(slot, [])
        self.pending_bytes.pop(slot, None)
        if not parts:
            return
        if slot not in self.writers:
            fs.make_dirs(self.scratch)
            self.writers[slot] = pa.ipc.new_file(str(self._path(slot)), parts[0].schema)
        for part in parts:
            self.writers[slot].write_batch(part)

    def finish(self) -> None:
        """After the last ``add``: every range's file complete."""
        if self.count > 1:
            for slot in list(self.pending):
                self._flush(slot)
            for writer in self.writers.values():
                writer.close()

    def take(self, slot: int) -> pa.Table | None:
        """A key range's documents (a memory map of its file), or None when it has none."""
        if self.count == 1:
            parts = self.pending.pop(slot, [])
            return pa.Table.from_batches(parts) if parts else None
        if slot not in self.writers:
            return None
        return pa.ipc.open_file(pa.memory_map(str(self._path(slot)))).read_all()

    def drop(self, slot: int) -> None:
        """A range written out: its file goes."""
        if self.count > 1:
            fs.remove(self._path(slot))


def mix_split(sources: list[Source], split: str, options: MixOptions, sink: Split, itemsize: int,
               scratch: Path, progress: Progress) -> list[dict[str, Any]]:
    """One split: selection, scatter, and the key ranges written in key order to ``sink``.
    Returns each source's realised figures."""
    base = 0
    selections = []
    for s in sources:
        selection, base = select(s, split, options.seed, base)
        selections.append(selection)
    documents = sum(sel.documents for sel in selections)
    tokens = sum(s.targets[split] for s in sources)
    size = tokens * itemsize + documents * 16
    count = max(1, -(-size // options.shuffle_buffer))
    buckets = _Buckets(count, scratch, max(1 << 18, options.shuffle_buffer // count))
    update = ProgressUpdate(f"mixing {split}", 0, max(2 * documents, 1), "units")
    progress(update)
    for s, sel in zip(sources, selections):
        if not sel.takes:
            continue  # nothing asked of this source
        position = 0
        for batch in _source_batches(s, split):
            n = batch.num_rows
            doc_ids = batch.column(ID)
            lists = batch.column(INPUT_IDS).cast(pa.large_list(pa.from_numpy_dtype(np.dtype(f"uint{8 * itemsize}"))))
            for epoch, (take, start) in enumerate(zip(sel.takes, sel.bases)):
                here = take[position:position + n]
                if not here.any():
                    continue
                rows, taken = _taken(lists, here, itemsize)
                keys = shuffle_keys(options.seed, start + position + rows)
                chosen = doc_ids if len(rows) == n else doc_ids.take(arrow_of(rows))
                names = pc.binary_join_element_wise(f"{s.index}/{epoch}/", chosen.cast(pa.string()), "")
                buckets.add(pa.record_batch([names, arrow_of(keys), taken], names=[ID, _KEY, INPUT_IDS]))
                update.done += len(rows)
            position += n
            progress(update)
        if position != len(sel.takes[0]):
            raise PipelineError(f"{storage.redact(s.given)[:200]}: its {split} shards hold {position:,} documents, "
                                f"its documents file {len(sel.takes[0]):,}")
    buckets.finish()
    width = sink.megatron.dtype.itemsize if sink.megatron is not None else 0
    bin_at = 0
    for slot in range(count):
        table = buckets.take(slot)
        if table is None:
            continue
        # The range's pieces (record batches, or a memory map of its file) are gathered from
        # in place: each token is copied once, into the run handed to the sink.
        pieces = [(chunk, list_buffers(chunk)) for chunk in table.column(INPUT_IDS).chunks]
        piece_of = np.repeat(np.arange(len(pieces), dtype=np.int64), [len(c) for c, _ in pieces])
        row_of = np.concatenate([np.arange(len(c), dtype=np.int64) for c, _ in pieces])
        lengths = np.concatenate([np.diff(offsets) for _, (offsets, _) in pieces])
        order = np.argsort(numpy_of(table.column(_KEY)), kind="stable")
        doc_ids = table.column(ID)
        lengths = lengths[order]
        start = 0
        while start < len(order):
            end = start + sink.room_for(lengths[start:])
            chosen = order[start:end]
            run_offsets, run_values = _core.gather_lists([buffers for _, buffers in pieces], itemsize,
                                                         piece_of[chosen], row_of[chosen])
            run = large_lists(run_offsets, run_values, itemsize)
            pointers = None
            if sink.megatron is not None:
                offsets, values = list_buffers(run)
                pointers = bin_at + offsets[:-1] * width
                bin_at += int(offsets[-1]) * width
                sink.megatron.append_bin(values)
            sink.add(doc_ids.take(arrow_of(chosen)).combine_chunks(), run, pointers)
            update.done += end - start
            start = end
            progress(update)
        del table, doc_ids, pieces
        buckets.drop(slot)
    return [{"tokens_asked": s.targets[split], "tokens": s.targets[split], "documents": sel.documents,
             "cut_documents": sel.cut_documents, "source_tokens": s.tokens(split),
             "source_documents": s.documents(split),
             "epochs": round(s.targets[split] / s.tokens(split), 6)} for s, sel in zip(sources, selections)]


def megatron_prefix(source: Source, split: str) -> str | None:
    """The source's Megatron pair of ``split`` as ``--data-path`` names it (absolute), or None."""
    megatron = source.manifest["splits"].get(split, {}).get("megatron")
    if not megatron:
        return None
    where = source.location / megatron["prefix"]
    return str(where.resolve()) if isinstance(where, Path) else storage.redact(str(where))


def data_path(sources: list[Source], split: str) -> str | None:
    """Megatron's ``--data-path`` blend of the sources' own pairs: ``w1 prefix1 w2 prefix2``
    (weights normalised), or None when a source has no Megatron pair."""
    prefixes = [megatron_prefix(s, split) for s in sources]
    if any(p is None for p in prefixes):
        return None
    whole = sum(s.weight for s in sources)
    return " ".join(f"{float(s.weight / whole):.10g} {p}" for s, p in zip(sources, prefixes)) + "\n"


def write_output(sources: list[Source], splits: list[str], final: storage.Location, state: RunState,
                 options: MixOptions, identity: dict[str, Any], progress: Progress, started: float) -> dict[str, Any]:
    """Mixes each split into the sinks and publishes the output, the manifest last; the
    staging goes once it is written."""
    first = sources[0].manifest
    tokenizer = dict(first["tokenizer"])
    dtype = first["dtype"]
    itemsize = np.dtype(dtype).itemsize
    out = final if isinstance(final, Path) else state.root / "output"
    if not isinstance(out, Path):
        raise PipelineError("tokpipe mix writes its splits on local disk before uploading them: give "
                            "--staging-dir a local folder")
    scratch = state.shuffle_scratch()
    # The sinks as tokenize's, writing documents (the sources' truncation is already applied).
    sink_options = TokenizeOptions(tokenizer=str(tokenizer.get("path")), formats=options.formats,
                                   append_eos=bool(tokenizer.get("append_eos")), seed=options.seed)
    sinks = {name: Split(out, name, sink_options, dtype, int(tokenizer["vocab_size"]), tokenizer.get("eos_id"),
                         options.shard_size) for name in SPLITS}
    realised: dict[str, list[dict[str, Any]]] = {}
    try:
        for name in splits:
            realised[name] = mix_split(sources, name, options, sinks[name], itemsize, scratch, progress)
        summaries = {name: sink.close() for name, sink in sinks.items()}
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        raise
    finally:
        fs.remove_tree(scratch)
    files = [entry for sink in sinks.values() for entry in sink.files]
    data_paths: dict[str, str] = {}
    if "megatron" in options.formats:
        for name in splits:
            text = data_path(sources, name)
            if text is not None:
                with fs.atomic(out / DATA_PATH_FILES[name]) as tmp:
                    tmp.write_text(text, encoding="utf-8")
                size, digest = hash_path(out / DATA_PATH_FILES[name])
                files.append({"path": DATA_PATH_FILES[name], "bytes": size, "sha256": digest})
                data_paths[name] = DATA_PATH_FILES[name]
    with fs.atomic(out / ERRORS_NAME) as tmp:  # no input is unreadable here; the readers expect the file
        tmp.write_bytes(b"")
    files.append({"path": ERRORS_NAME, "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()})
    whole = sum(s.weight for s in sources)
    seq_lens = {s.manifest.get("seq_len") for s in sources}
    manifest: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tokpipe_version": __version__,
        "tokenizer": tokenizer, "dtype": dtype, "seq_len": seq_lens.pop() if len(seq_lens) == 1 else None,
        "pack": False, "truncate": bool(first.get("truncate")), "pad_tail": False, "shuffle": True,
        "seed": options.seed, "val_fraction": None, "formats": list(options.formats),
        "splits": summaries,
        "totals": {"documents": sum(s["documents"] for s in summaries.values()),
                   "tokens": sum(s["tokens"] for s in summaries.values())},
        "stats": {},
        "inputs": [storage.redact(s.given) for s in sources], "errors": 0,
        "params": {"shard_size": options.shard_size, "tokenizer_sha256": tokenizer.get("sha256")},
        "mix": {
            "seed": options.seed, "tokens": options.tokens, "max_epochs": options.max_epochs,
            "splits_mixed": splits, "data_path": data_paths,
            "sources": [{"path": storage.redact(s.given), "manifest_sha256": s.manifest_sha256,
                         "weight": str(s.weight), "share": float(s.weight / whole),
                         "megatron_prefix": megatron_prefix(s, "train"),
                         "splits": {name: realised[name][i] for name in splits}}
                        for i, s in enumerate(sources)],
        },
        "wall_seconds": round(time.perf_counter() - started, 3),
        "files": sorted(files, key=lambda e: e["path"]),
    }
    if out != final:
        for entry in manifest["files"]:
            fs.publish_copy(out / entry["path"], final / entry["path"])
        fs.remove_tree(out)
    manifest[RUN_KEY] = identity_digest(identity)
    manifest["input_files"] = {}
    documents = {name: sink.documents_file for name, sink in sinks.items()}
    fs.write_text(final / "README.md", tokens_card(manifest, documents))
    fs.write_json(final / MANIFEST_NAME, manifest)  # last: the mix is finished
    state.remove_staging()
    return manifest
