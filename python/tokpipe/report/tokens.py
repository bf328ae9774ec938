"""The report's reading of a ``tokpipe tokenize`` output: every document's length in tokens,
from each split's documents table (``id``, ``length``, named by the manifest), and the
tokens per language and source, joined by id with the ``language`` and ``source`` columns of
the Parquet inputs (a clean output's shards) while they are still in place.

The join holds one ``id -> length`` entry per document, so it is made only up to
``JOIN_LIMIT`` documents (a few hundred MB at most): the count is checked against the
manifest's ``totals.documents`` before any id is read, and beyond it no id is read at all
(only the lengths the histogram bins, 8 bytes a document); the page says so.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from tokpipe import storage
from tokpipe.pipeline import fs
from tokpipe.pipeline.writers.manifest import tokenized_documents_path
from tokpipe.report.collect import LABELS, Metric, RunData, Threshold
from tokpipe.storage import Location

__all__ = ["collect_tokenized", "JOIN_LIMIT"]

JOIN_LIMIT = 5_000_000


def collect_tokenized(run: RunData, out: Location) -> None:
    """Fill ``run`` (a tokenize output's) with its documents' lengths and tokens per
    language and source."""
    manifest = run.manifest
    run.seq_len = manifest.get("seq_len")
    inputs = [i for i in manifest.get("inputs") or () if str(i).endswith(".parquet")]
    documents = (manifest.get("totals") or {}).get("documents")
    # Decided from the manifest, before reading: past the limit, no id is held at all.
    join = bool(inputs) and isinstance(documents, int) and documents <= JOIN_LIMIT
    if inputs and not join:
        run.notes.append(f"tokens per language and source: not joined (over {JOIN_LIMIT:,} documents)")
    lengths, ids = [], []
    held = 0
    for split in manifest.get("splits") or {}:
        path = out / tokenized_documents_path(manifest, split)
        if not fs.exists(path):
            continue
        with fs.parquet_file(path) as parquet:
            for batch in parquet.iter_batches(batch_size=1 << 16, columns=["id", "length"] if join else ["length"]):
                lengths.append(batch.column("length").to_numpy(zero_copy_only=False).astype(np.int64))
                if join:
                    held += batch.num_rows
                    ids.append(batch.column("id"))
                    if held > JOIN_LIMIT:  # more documents than the manifest says: stop holding ids
                        join, ids = False, []
                        run.notes.append(f"tokens per language and source: not joined (over {JOIN_LIMIT:,} "
                                         "documents)")
    run.doc_lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    metric = Metric("tokens", LABELS["tokens"], kept=[run.doc_lengths.astype(np.float32)],
                    measured=len(run.doc_lengths), total=len(run.doc_lengths))
    if run.seq_len:
        metric.thresholds.append(Threshold(float(run.seq_len), "seq_len", "mark"))
    run.metrics["tokens"] = metric
    if join and ids:
        _tokens_by_input_columns(run, inputs, ids)


def _tokens_by_input_columns(run: RunData, inputs: list[str], ids: list[pa.Array]) -> None:
    tokens = dict(zip(pa.chunked_array(ids).to_pylist(), run.doc_lengths.tolist()))
    for name in inputs:
        where = storage.location(name)
        if not fs.exists(where):
            run.notes.append("tokens per language and source: the input shards are gone")
            return
        with fs.parquet_file(where) as parquet:
            columns = [c for c in ("id", "language", "source") if c in parquet.schema_arrow.names]
            if "id" not in columns or len(columns) == 1:
                continue
            for batch in parquet.iter_batches(batch_size=1 << 15, columns=columns):
                doc_ids = batch.column("id").to_pylist()
                for column in columns[1:]:
                    tally = run.tokens_by.setdefault(column, Counter())
                    for doc_id, value in zip(doc_ids, batch.column(column).to_pylist()):
                        if doc_id in tokens:
                            tally["(none)" if value is None else str(value)] += tokens[doc_id]
