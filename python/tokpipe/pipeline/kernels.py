"""Hand Arrow string columns to the Rust kernels in ``tokpipe._core`` without copying them.

A kernel takes a column as its offsets and its UTF-8 data buffers; this module takes them
out of a pyarrow array (any chunking, slicing, ``string`` or ``large_string``) and wraps the
kernel's bytes back into an Arrow array.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tokpipe import _core

__all__ = ["string_buffers", "exact_dedup_keys", "minhash_signatures", "minhash_dedup_keys", "minhash_pair_similarities",
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
