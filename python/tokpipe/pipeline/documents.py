"""The document batch: an Arrow record batch with ``id`` and ``text`` (strings) first, then
whatever other fields the input had."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["ID", "TEXT", "replace_text"]

ID = "id"
TEXT = "text"


def replace_text(batch: pa.RecordBatch, text: pa.Array) -> pa.RecordBatch:
    """``batch`` with its text column replaced (same position, same name)."""
    index = batch.schema.get_field_index(TEXT)
    return batch.set_column(index, TEXT, text)
