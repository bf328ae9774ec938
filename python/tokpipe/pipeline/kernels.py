"""Hand Arrow string columns to the Rust kernels in ``tokpipe._core`` without copying them.

A kernel takes a column as its offsets and its UTF-8 data buffers; this module takes them
out of a pyarrow array (any chunking, slicing, ``string`` or ``large_string``) and wraps the
kernel's bytes back into an Arrow array.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tokpipe import _core

__all__ = ["string_buffers", "exact_dedup_keys"]


def string_buffers(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Buffer | bytes, bool]:
    """(offsets, data, wide) of a string column: the offsets of just this array's rows (a
    view, honouring a slice's offset), the data buffer they point into, and whether the
    offsets are 64-bit."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_large_string(column.type):
        wide, dtype = True, np.int64
    elif pa.types.is_string(column.type):
        wide, dtype = False, np.int32
    else:
        raise TypeError(f"expected a string column, got {column.type}")
    _, offsets_buffer, data = column.buffers()
    if offsets_buffer is None:  # a zero-length array may have no buffers
        return np.zeros(1, dtype=dtype), b"", wide
    offsets = np.frombuffer(offsets_buffer, dtype=dtype)[column.offset: column.offset + len(column) + 1]
    return offsets, (data if data is not None else b""), wide


def exact_dedup_keys(column: pa.Array | pa.ChunkedArray, lowercase: bool, collapse_whitespace: bool) -> pa.Array:
    """BLAKE2b-128 of each row's normalised text (``str.lower``, whitespace runs made one
    space, ends stripped), computed in Rust on all cores; null rows hash as empty text."""
    offsets, data, wide = string_buffers(column)
    digests = _core.exact_dedup_keys(offsets, data, wide, lowercase, collapse_whitespace)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), len(offsets) - 1, [None, pa.py_buffer(digests)])
