"""The shuffle's arithmetic: each document's key, its split and its key range, from its
position in input order and the seed alone (so the same for any number of workers).

    key   = splitmix64(position + splitmix64(seed))       its place in the shuffled order
    split = val  when  splitmix64(key ^ C) / 2**64 < val_fraction,  else train

splitmix64 is a bijection on 64-bit integers, so distinct positions get distinct keys.
"""

from __future__ import annotations

import numpy as np

__all__ = ["shuffle_keys", "val_mask", "bucket_of"]

_VAL_SALT = 0xD1B54A32D192ED03


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def shuffle_keys(seed: int, positions: np.ndarray) -> np.ndarray:
    """Each position's sort key for ``seed``: distinct for distinct positions."""
    offset = _splitmix64(np.array([seed], dtype=np.uint64))
    return _splitmix64(positions.astype(np.uint64) + offset)


def val_mask(keys: np.ndarray, fraction: float) -> np.ndarray:
    """True for the documents (by key) in the validation split."""
    if fraction <= 0:
        return np.zeros(len(keys), dtype=bool)
    u = (_splitmix64(keys ^ np.uint64(_VAL_SALT)) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return u < fraction


def bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The key range (0 .. buckets - 1) of each key: its top 32 bits scaled to the count."""
    return (((keys >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32)).astype(np.int64)
