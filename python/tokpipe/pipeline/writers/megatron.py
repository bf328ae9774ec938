"""Megatron-LM's indexed dataset (``MMapIndexedDataset``, megatron-core ``IndexedDataset``):
a ``PREFIX.bin`` of token ids back to back and a ``PREFIX.idx`` index.

The ``.idx`` layout (all little-endian), as megatron-core's ``indexed_dataset.py`` reads it:

    b"MMIDIDX\\x00\\x00"          magic, 9 bytes
    u64 1                         version
    u8  dtype code                8 = uint16, 4 = int32 (also 1 uint8 ... 7 float32)
    u64 sequence count            S
    u64 document count            D + 1 (the length of the document index)
    int32[S] sequence lengths     tokens per sequence
    int64[S] sequence pointers    byte offset of each sequence in the .bin
    int64[D + 1] document index   sequence index where each document starts, then S

Here every document is one sequence, so the document index is ``0, 1, ..., D``. The dtype
follows megatron-core's ``DType.optimal_dtype(vocab_size)``: uint16 when the vocabulary
has fewer than 65,500 entries, else int32.

The ``.bin`` is written as documents come (appended, never held); the index is written at
``close`` from the lengths, kept as numpy arrays (4 bytes a document, plus 8 for pointers
at the end). Both files are written under temporary names and renamed into place, ``.bin``
first, so a prefix with an ``.idx`` is complete.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

__all__ = ["MegatronWriter", "megatron_dtype", "MAGIC", "DTYPE_CODES"]

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
#: megatron-core's ``DType`` codes.
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
               np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7, np.dtype(np.uint16): 8}


def megatron_dtype(vocab_size: int) -> np.dtype:
    """Megatron's rule: uint16 for fewer than 65,500 token ids, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


class MegatronWriter:
    """Writes documents (flat ids + lengths) to ``prefix.bin`` / ``prefix.idx``."""

    def __init__(self, prefix: str | os.PathLike[str], dtype: np.dtype) -> None:
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        if self.dtype not in DTYPE_CODES:
            raise ValueError(f"no Megatron dtype code for {self.dtype}")
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self.bin_path = self.prefix.with_name(self.prefix.name + ".bin")
        self.idx_path = self.prefix.with_name(self.prefix.name + ".idx")
        self._bin_tmp = self.bin_path.with_name(f".{self.bin_path.name}.tmp")
        self._bin = open(self._bin_tmp, "wb")
        self._lengths: list[np.ndarray] = []
        self.tokens = 0

    def add(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Appends documents: ``ids`` all their tokens back to back, ``lengths`` per document."""
        if len(ids) != int(np.sum(lengths, dtype=np.int64)):
            raise ValueError("the lengths do not add up to the ids")
        ids = np.asarray(ids)
        if len(ids) and self.dtype == np.uint16 and ids.dtype.itemsize > 2 and int(ids.max()) > 0xFFFF:
            raise ValueError("a token id does not fit the .bin's uint16")
        little = self.dtype.newbyteorder("<")
        if ids.dtype.kind in "ui" and ids.dtype.itemsize == little.itemsize and ids.dtype.byteorder in "<=|" \
                and np.little_endian:
            # Same width (uint32 ids into int32: token ids are far below 2**31): the bytes as
            # they are, written straight from the array.
            ids = ids.view(little)
        self._bin.write(memoryview(np.ascontiguousarray(ids, dtype=little)))
        self._lengths.append(np.asarray(lengths, dtype=np.int32))
        self.tokens += len(ids)

    def close(self) -> int:
        """Publishes the pair; returns the number of documents."""
        self._bin.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int32)
        self._lengths = []
        pointers = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths):
            np.cumsum(lengths[:-1].astype(np.int64) * self.dtype.itemsize, out=pointers[1:])
        documents = np.arange(len(lengths) + 1, dtype=np.int64)
        idx_tmp = self.idx_path.with_name(f".{self.idx_path.name}.tmp")
        with open(idx_tmp, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<Q", VERSION))
            f.write(struct.pack("<B", DTYPE_CODES[self.dtype]))
            f.write(struct.pack("<Q", len(lengths)))
            f.write(struct.pack("<Q", len(documents)))
            f.write(lengths.astype("<i4").tobytes())
            f.write(pointers.astype("<i8").tobytes())
            f.write(documents.astype("<i8").tobytes())
        os.replace(self._bin_tmp, self.bin_path)
        os.replace(idx_tmp, self.idx_path)
        return len(lengths)

    def abort(self) -> None:
        self._bin.close()
        self._bin_tmp.unlink(missing_ok=True)
