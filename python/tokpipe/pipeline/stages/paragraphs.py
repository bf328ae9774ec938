"""``paragraph_dedup``: remove every paragraph already seen earlier in the corpus, CCNet style.

A paragraph is a line (CCNet splits documents on ``\\n``). Each is normalised as CCNet's
``normalize_for_dedup`` does (strip, lowercase, Unicode digits made ``0``, CCNet's list of
CJK/typographic punctuation and control characters removed; accents and ASCII punctuation
stay) and hashed (first 8 bytes of SHA-1). In corpus order, (task, row, line), the first
occurrence of a hash is kept and every later one removed, in the same document or any other.
Unlike CCNet, lines that normalise to nothing (blank lines) are always kept, so documents
keep their paragraph breaks. A document left with no non-blank line is dropped with reason
``duplicate_paragraphs`` (CCNet drops it too); the stats count ``paragraphs``,
``paragraphs_removed`` and ``bytes_removed`` (UTF-8 bytes of the removed lines).

A global stage: ``keys`` hashes lines in Rust in the parallel phase (12 bytes a line), and
``decide`` walks them once, in Rust, with a set of the hashes seen (8 bytes a distinct line).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.pipeline.base import DecideContext, Decision, GlobalStage, register
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.kernels import paragraph_decide, paragraph_drop_lines, paragraph_keys

__all__ = ["ParagraphDedup", "any_flag", "flatten_unit_keys"]

_DROP = "_paragraph_drop"
_EMPTIED = "_paragraph_emptied"
_LINE_KEY = 12


@register
class ParagraphDedup(GlobalStage):
    """Removes paragraphs (lines) whose CCNet-normalised text appeared earlier in the corpus;
    drops documents left empty (reason ``duplicate_paragraphs``)."""

    name = "paragraph_dedup"

    def __init__(self) -> None:
        pass

    def key_type(self) -> pa.DataType:
        return pa.large_binary()

    def keys(self, batch: pa.RecordBatch) -> pa.Array:
        return paragraph_keys(batch.column(TEXT))

    def decide(self, keys: Sequence[pa.Array], context: DecideContext | None = None) -> list[Decision]:
        flat, counts, lines = flatten_unit_keys(keys, _LINE_KEY)
        drop_np, emptied_np, paragraphs, removed, removed_bytes = paragraph_decide(flat, lines)
        extra = self.stats.extra
        extra["paragraphs"] += paragraphs
        extra["paragraphs_removed"] += removed
        extra["bytes_removed"] += removed_bytes
        self.stats.dropped["duplicate_paragraphs"] += int(emptied_np.sum())
        decisions, doc, line = [], 0, 0
        offset = 0
        for task_counts in counts:
            n = len(task_counts)
            ends = np.cumsum(task_counts, dtype=np.int64)
            flag_offsets = np.concatenate([[0], ends]).astype(np.int32)
            flags = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(flag_offsets),
                                                                  pa.py_buffer(drop_np[line:line + int(ends[-1] if n else 0)].tobytes())])
            decisions.append(Decision(np.arange(offset, offset + n),
                                      {_DROP: flags, _EMPTIED: pa.array(emptied_np[doc:doc + n], type=pa.bool_())}))
            offset += n
            doc += n
            line += int(ends[-1]) if n else 0
        return decisions

    def revise(self, batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> tuple[pa.RecordBatch, np.ndarray | None]:
        flags, emptied = columns[_DROP], columns[_EMPTIED]
        text = batch.column(TEXT)
        if any_flag(flags):
            revised = paragraph_drop_lines(text, flags)
            # A dropped document goes to rejected/ with its original text.
            revised = pc.if_else(emptied, text, revised)
            batch = batch.set_column(batch.schema.get_field_index(TEXT), TEXT, revised)
        reasons = np.where(emptied.to_numpy(zero_copy_only=False), "duplicate_paragraphs", "")
        return batch, reasons


def flatten_unit_keys(keys: Sequence[pa.Array], key_bytes: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Every task's keys, one ``key_bytes`` key per unit (line, sentence) of each document: one
    byte array in corpus order, the number of units of each document per task (one array per
    task, empty tasks included) and the same counts for the whole corpus (``<u4``)."""
    datas, counts = [], []
    for k in keys:
        if not pa.types.is_large_binary(k.type):
            k = k.cast(pa.large_binary())
        if len(k) == 0:
            counts.append(np.zeros(0, dtype="<u4"))
            continue
        offsets = np.frombuffer(k.buffers()[1], dtype=np.int64)[k.offset:k.offset + len(k) + 1]
        data = np.frombuffer(k.buffers()[2], dtype=np.uint8) if k.buffers()[2] is not None else np.zeros(0, np.uint8)
        datas.append(data[offsets[0]:offsets[-1]])
        counts.append((np.diff(offsets) // key_bytes).astype("<u4"))
    units = np.concatenate(counts) if counts else np.zeros(0, dtype="<u4")
    flat = np.concatenate(datas) if datas else np.zeros(0, dtype=np.uint8)
    return flat, counts, units


def any_flag(flags: pa.Array) -> bool:
    """Whether any line of these rows is flagged (reads the flag bytes, no copy)."""
    _, offsets, data = flags.buffers()
    if offsets is None or data is None or len(flags) == 0:
        return False
    bounds = np.frombuffer(offsets, dtype=np.int32)[flags.offset:flags.offset + len(flags) + 1]
    return bool(np.frombuffer(data, dtype=np.uint8)[bounds[0]:bounds[-1]].any())
