"""The report's reading of a ``tokpipe tokenize`` output: every document's length in tokens,
from each split's documents table (``id``, ``length``, named by the manifest), and the
tokens per language and source, joined by id with the ``language`` and ``source`` columns of
the Parquet inputs (a clean output's shards) while they are still in place.

The join holds one ``id -> length`` entry per document, so it is made only up to
``JOIN_LIMIT`` documents (a few hundred MB at most); beyond, the page says so.
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
    lengths, ids = [], []
    for split in manifest.get("splits") or {}:
        path = out / tokenized_documents_path(manifest, split)
        if not fs.exists(path):
            continue
        with fs.parquet_file(path) as parquet:
            for batch in parquet.iter_batches(batch_size=1 << 16, columns=["id", "length"]):
                lengths.append(batch.column("length").to_numpy(zero_copy_only=False).astype(np.int64))
                ids.append(batch.column("id"))
    run.doc_lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    metric = Metric("tokens", LABELS["tokens"], kept=[run.doc_lengths.astype(np.float32)],
                    measured=len(run.doc_lengths), total=len(run.doc_lengths))
    if run.seq_len:
        metric.thresholds.append(Threshold(float(run.seq_len), "seq_len", "mark"))
    run.metrics["tokens"] = metric
    _tokens_by_input_columns(run, ids)


def _tokens_by_input_columns(run: RunData, ids: list[pa.Array]) -> None:
    inputs = [i for i in run.manifest.get("inputs") or () if str(i).endswith(".parquet")]
    if not inputs or not ids:
        return
    if len(run.doc_lengths) > JOIN_LIMIT:
        run.notes.append(f"tokens per language and source: not joined (over {JOIN_LIMIT:,} documents)")
        return
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
