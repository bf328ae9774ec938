"""The document batch: an Arrow record batch with ``id`` and ``text`` (strings) first, then
whatever other fields the input had."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["ID", "TEXT", "replace_text", "set_column"]

ID = "id"
TEXT = "text"


def replace_text(batch: pa.RecordBatch, text: pa.Array) -> pa.RecordBatch:
    """``batch`` with its text column replaced (same position, same name)."""
    index = batch.schema.get_field_index(TEXT)
    return batch.set_column(index, TEXT, text)


def set_column(batch: pa.RecordBatch, name: str, values: pa.Array) -> pa.RecordBatch:
    """``batch`` with column ``name`` set to ``values``: replaced in place when the batch has
    it (a stage run twice, or an input field of that name), else appended."""
    index = batch.schema.get_field_index(name)
    if index >= 0:
        return batch.set_column(index, name, values)
    return batch.append_column(name, values)
