"""Hand Arrow string columns to the Rust kernels in ``tokpipe._core`` without copying them.

A kernel takes a column as its offsets and its UTF-8 data buffers; this module takes them
out of a pyarrow array (any chunking, slicing, ``string`` or ``large_string``) and wraps the
kernel's bytes back into an Arrow array.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tokpipe import _core

__all__ = ["string_buffers", "list_buffers", "numpy_of", "arrow_of", "repeat_string", "exact_dedup_keys", "minhash_signatures", "minhash_dedup_keys", "minhash_pair_similarities",
           "paragraph_keys", "paragraph_drop_lines"]


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


# Numbers between numpy and Arrow through their buffers. pyarrow's own conversions
# (`pa.array(ndarray)`, `Array.to_numpy()`, even `np.asarray(array)`) go through its pandas
# shim, whose first use imports pandas: about 0.3 s of CPU in every process, more than a
# tokenize run spends on some of its phases. These are zero-copy both ways.


def numpy_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a primitive Arrow array without nulls (ints, floats) as a numpy view."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if array.null_count:
        raise ValueError("numpy_of needs an array without nulls")
    dtype = np.dtype(str(array.type))
    data = array.buffers()[1]
    if data is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype)[array.offset: array.offset + len(array)]


def arrow_of(values: np.ndarray, arrow_type: pa.DataType | None = None) -> pa.Array:
    """A numpy array of plain numbers as an Arrow array (of ``arrow_type``, which must have
    the same width, e.g. int32 for uint32 ids; the numpy type's own when None), sharing its
    memory when it is contiguous."""
    values = np.ascontiguousarray(values)
    arrow_type = arrow_type or pa.from_numpy_dtype(values.dtype)
    if arrow_type.bit_width != 8 * values.dtype.itemsize or values.dtype == np.bool_:
        raise TypeError(f"cannot view {values.dtype} as {arrow_type}")
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def repeat_string(value: str, n: int) -> pa.Array:
    """A ``string`` array of ``n`` copies of ``value``."""
    raw = value.encode("utf-8")
    offsets = np.arange(0, (n + 1) * len(raw), len(raw) or 1, dtype=np.int32)[: n + 1] if raw \
        else np.zeros(n + 1, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def list_buffers(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of a ``large_list`` column of a primitive type: the int64 offsets of
    just this array's rows (a view, honouring a slice's offset) and the values they index
    (a view of the child array, honouring its offset)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_large_list(column.type):
        raise TypeError(f"expected a large_list column, got {column.type}")
    child = column.values
    dtype = np.dtype(str(child.type))  # uint16, uint32, ...: numpy's names for Arrow's
    offsets_buffer = column.buffers()[1]
    if offsets_buffer is None:  # a zero-length array may have no buffers
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=dtype)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[column.offset: column.offset + len(column) + 1]
    data = child.buffers()[1]
    values = np.frombuffer(data, dtype=dtype)[child.offset: child.offset + len(child)] if data is not None \
        else np.zeros(0, dtype=dtype)
    return offsets, values


def exact_dedup_keys(column: pa.Array | pa.ChunkedArray, lowercase: bool, collapse_whitespace: bool) -> pa.Array:
    """BLAKE2b-128 of each row's normalised text (``str.lower``, whitespace runs made one
    space, ends stripped), computed in Rust on all cores; null rows hash as empty text."""
    offsets, data, wide = string_buffers(column)
    digests = _core.exact_dedup_keys(offsets, data, wide, lowercase, collapse_whitespace)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), len(offsets) - 1, [None, pa.py_buffer(digests)])


def minhash_pair_similarities(column: pa.Array | pa.ChunkedArray, pairs: np.ndarray, shingle: str = "word",
                              ngram: int = 5, char_ngram: int = 5, lowercase: bool = True) -> np.ndarray:
    """The exact Jaccard similarity of the shingle sets (as ``minhash_signatures`` shingles)
    of each pair of rows: ``pairs`` of shape ``(k, 2)``; float64, one per pair."""
    offsets, data, wide = string_buffers(column)
    flat = np.ascontiguousarray(pairs, dtype="<u4")
    raw = _core.minhash_pair_similarities(offsets, data, wide, flat, shingle, ngram, char_ngram, lowercase)
    return np.frombuffer(raw, dtype="<f8")


def minhash_signatures(column: pa.Array | pa.ChunkedArray, num_perm: int = 128, seed: int = 1,
                       scheme: str = "affine32", shingle: str = "word", ngram: int = 5, char_ngram: int = 5,
                       lowercase: bool = True, hashfunc: str = "sha1") -> np.ndarray:
    """MinHash signatures of each row, shape ``(rows, num_perm)``, uint32: equal to
    ``datasketch.MinHash(num_perm, seed, scheme=scheme)`` updated with the row's shingles
    (see ``tokpipe_core::minhash``); computed in Rust on all cores. ``hashfunc="xxh3"``
    matches datasketch given ``hashfunc=lambda b: xxhash.xxh3_64_intdigest(b) & 0xFFFFFFFF``."""
    offsets, data, wide = string_buffers(column)
    raw = _core.minhash_signatures(offsets, data, wide, num_perm, seed, scheme, shingle, ngram, char_ngram, lowercase,
                                   hashfunc)
    return np.frombuffer(raw, dtype="<u4").reshape(len(offsets) - 1, num_perm)


def minhash_dedup_keys(column: pa.Array | pa.ChunkedArray, num_perm: int, seed: int, scheme: str, shingle: str,
                       ngram: int, char_ngram: int, lowercase: bool, hashfunc: str = "sha1") -> pa.Array:
    """Per row: its UTF-8 length (u64) then its signature (u32s), little-endian, as one
    fixed-size binary value of ``8 + 4 * num_perm`` bytes."""
    offsets, data, wide = string_buffers(column)
    raw = _core.minhash_dedup_keys(offsets, data, wide, num_perm, seed, scheme, shingle, ngram, char_ngram, lowercase,
                                   hashfunc)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(8 + 4 * num_perm), len(offsets) - 1,
                                                [None, pa.py_buffer(raw)])


def paragraph_keys(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Per row, one 12-byte key per ``\\n``-separated line: its CCNet hash (u64, 0 for a
    blank line) and its length in bytes (u32), as a ``large_binary`` value."""
    offsets, data, wide = string_buffers(column)
    keys, key_offsets = _core.paragraph_keys(offsets, data, wide)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1,
                                            [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)])


def paragraph_drop_lines(column: pa.Array | pa.ChunkedArray, flags: pa.Array) -> pa.Array:
    """Each row without the lines whose flag (one byte per line, in ``flags``, a binary
    column) is 1; the column keeps its type."""
    offsets, data, wide = string_buffers(column)
    if isinstance(flags, pa.ChunkedArray):
        flags = flags.combine_chunks()
    if not pa.types.is_binary(flags.type):
        flags = flags.cast(pa.binary())
    _, flag_offsets, flag_data = flags.buffers()
    flag_offsets_np = np.frombuffer(flag_offsets, dtype=np.int32)[flags.offset: flags.offset + len(flags) + 1] \
        if flag_offsets is not None else np.zeros(1, dtype=np.int32)
    text, text_offsets = _core.paragraph_drop_lines(offsets, data, wide, flag_offsets_np,
                                                    flag_data if flag_data is not None else b"")
    out = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(text_offsets), pa.py_buffer(text))
    if isinstance(column, pa.ChunkedArray):
        return out.cast(column.type)
    return out.cast(column.type) if column.type != out.type else out
