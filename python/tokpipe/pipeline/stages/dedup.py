"""``exact_dedup``: drop documents whose normalised text another document already has,
anywhere in the corpus, keeping the first in input order.

It is a global stage, run in two steps by the executor: ``keys`` hashes every document in
the parallel phase, then ``decide`` sees every key at once and marks each duplicate with the
id of the copy kept. The first copy in (task, row) order is kept, so the result is the same
whatever the number of workers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import DecideContext, GlobalStage, GroupJoin, register, split_by_task
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.kernels import exact_dedup_keys

#: Bytes of each document's key: 128 bits make an accidental collision in 10^12 documents
#: about as likely as a disk error.
KEY_BYTES = 16


@register
class ExactDedup(GlobalStage):
    """Exact duplicates of the normalised text (``lowercase``, Unicode whitespace runs made one
    space, ends stripped, by default) are dropped with reason ``duplicate``; the rejected copy
    records the id of the kept one in ``duplicate_of``."""

    name = "exact_dedup"

    def __init__(self, lowercase: bool = True, collapse_whitespace: bool = True) -> None:
        self.lowercase = lowercase
        self.collapse_whitespace = collapse_whitespace

    def keys(self, batch: pa.RecordBatch) -> pa.Array:
        # In Rust on all cores (tokpipe_core::text::keys), equal to
        # hashlib.blake2b(" ".join(text.lower().split()).encode(), digest_size=16).
        return exact_dedup_keys(batch.column(TEXT), self.lowercase, self.collapse_whitespace)

    def decide(self, keys: Sequence[pa.Array], context: DecideContext | None = None) -> list[np.ndarray]:
        """For each task's keys, the global position (in task order) of the kept copy of
        each document; a document is a duplicate where that is not its own position."""
        # 16 bytes a document: held in memory (10M documents: 160 MB).
        arrays = [_as_numpy(k) for k in keys]
        sizes = [len(a) for a in arrays]
        flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=f"S{KEY_BYTES}")
        if not len(flat):
            return [np.zeros(0, dtype=np.int64) for _ in sizes]
        # return_index gives the first occurrence of each distinct key, in input order.
        _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        return split_by_task(first[inverse.reshape(-1)], sizes)

    def join(self) -> GroupJoin:
        """The same decision as a group-by: documents grouped by key, each keeping the first
        of its group."""
        return GroupJoin("key join", ("key",), _key_rows, _by_task)


def _key_rows(keys: pa.Array, positions: np.ndarray) -> pa.Table:
    return pa.table({"key": keys.cast(pa.binary()), "pos": positions})


def _by_task(keepers: np.ndarray, keys: Sequence[pa.Array], sizes: Sequence[int],
             context: DecideContext) -> list[np.ndarray]:
    return split_by_task(keepers, sizes)


def _as_numpy(keys: pa.Array) -> np.ndarray:
    """Fixed-size binary keys as a numpy ``S16`` array, without a Python object per key."""
    if keys.null_count:
        raise InvalidArgumentError("exact_dedup: a document has no key")
    data = np.frombuffer(keys.buffers()[1], dtype=f"S{KEY_BYTES}")
    return data[keys.offset: keys.offset + len(keys)]
