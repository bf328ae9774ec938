"""MinHash parity with datasketch: our signatures are ``datasketch.MinHash(num_perm, seed,
scheme=...)`` updated with the same shingles (UTF-8 bytes), value for value, on the real
documents of ``../shared/corpora``; our bands and rows are ``MinHashLSH``'s for the threshold.

The shingles fed to datasketch are built here from the documented rule (``" ".join(
text.lower().split())``, then windows of n words or n characters), not by tokpipe.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from datasketch import MinHash, MinHashLSH
from datasketch.lsh import _optimal_param

from tokpipe import _core
from tokpipe.pipeline.kernels import minhash_signatures
from tokpipe.pipeline.stages.minhash import optimal_params


def reference_shingles(text: str, kind: str, n: int) -> list[bytes]:
    normalised = " ".join(text.lower().split())
    if not normalised:
        return []
    units = normalised.split(" ") if kind == "word" else list(normalised)
    if len(units) <= n:
        return [normalised.encode()]
    joiner = " " if kind == "word" else ""
    return [joiner.join(units[i:i + n]).encode() for i in range(len(units) - n + 1)]


def datasketch_signature(shingles: list[bytes], num_perm: int, seed: int, scheme: str,
                         hashfunc: Callable[[bytes], int] | None = None) -> np.ndarray:
    m = MinHash(num_perm=num_perm, seed=seed, scheme=scheme, hashfunc=hashfunc)
    for start in range(0, len(shingles), 4096):  # bounded (shingles x num_perm) matrices
        m.update_batch(shingles[start:start + 4096])
    return np.asarray(m.hashvalues, dtype=np.uint64)


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
@pytest.mark.parametrize(("kind", "n"), [("word", 5), ("word", 1), ("char", 5), ("char", 3)])
@pytest.mark.parametrize(("num_perm", "seed"), [(128, 1), (100, 42), (256, 2**32 - 1)])
def test_signatures_equal_datasketch(documents: list[tuple[str, str]], scheme: str, kind: str, n: int,
                                     num_perm: int, seed: int) -> None:
    # The first 20,000 characters of each document keep datasketch's time reasonable; the full
    # documents are compared once below.
    texts = [t[:20_000] for _, t in documents] + ["", "  \n ", "one", "Two words"]
    ours = minhash_signatures(pa.array(texts), num_perm, seed, scheme, kind, n, n)
    for i, text in enumerate(texts):
        expected = datasketch_signature(reference_shingles(text, kind, n), num_perm, seed, scheme)
        assert np.array_equal(ours[i].astype(np.uint64), expected), f"document {i} ({documents[i][0] if i < len(documents) else text!r})"


def test_whole_documents_with_defaults(documents: list[tuple[str, str]]) -> None:
    texts = [t for _, t in documents]
    ours = minhash_signatures(pa.array(texts), 128, 1, "affine32", "word", 5)
    for i, text in enumerate(texts):
        assert np.array_equal(ours[i].astype(np.uint64),
                              datasketch_signature(reference_shingles(text, "word", 5), 128, 1, "affine32"))


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_xxh3_hashfunc_equals_datasketch_with_that_hashfunc(documents: list[tuple[str, str]], scheme: str) -> None:
    texts = [t[:20_000] for _, t in documents]
    ours = minhash_signatures(pa.array(texts), 128, 1, scheme, "word", 5, hashfunc="xxh3")
    for i, text in enumerate(texts):
        expected = datasketch_signature(reference_shingles(text, "word", 5), 128, 1, scheme,
                                        lambda b: xxhash.xxh3_64_intdigest(b) & 0xFFFFFFFF)
        assert np.array_equal(ours[i].astype(np.uint64), expected)


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_permutations_equal_datasketch(scheme: str) -> None:
    for num_perm, seed in [(1, 0), (128, 1), (300, 123456789)]:
        a, b = _core.minhash_permutations(num_perm, seed, scheme)
        theirs = MinHash(num_perm=num_perm, seed=seed, scheme=scheme).permutations
        assert np.array_equal(np.array(a, dtype=np.uint64), np.asarray(theirs[0], dtype=np.uint64))
        assert np.array_equal(np.array(b, dtype=np.uint64), np.asarray(theirs[1], dtype=np.uint64))


@pytest.mark.parametrize("num_perm", [16, 32, 64, 128, 256])
def test_bands_and_rows_equal_datasketch(num_perm: int) -> None:
    # MinHashLSH's own choice (it refuses fewer than 2 bands, so the optimiser it calls is
    # asked directly for the rest).
    for threshold in [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]:
        expected = _optimal_param(threshold, num_perm, 0.5, 0.5)
        if expected[0] >= 2:
            lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
            assert expected == (lsh.b, lsh.r)
        assert optimal_params(threshold, num_perm) == expected, threshold
    for weights in [(0.2, 0.8), (0.9, 0.1)]:
        assert optimal_params(0.7, num_perm, *weights) == _optimal_param(0.7, num_perm, *weights)


TRICKY = [
    "ΟΔΥΣΣΕΥΣ ΣΟΦΟΣ Σ ΣΑΣ ΑΣ. ΣΑΣ, Σ",  # final sigma: ς at a word's end, σ elsewhere
    "İSTANBUL ıi İi ǅungla ΐ ẞtraße",  # lowercasing that changes length
    "a\x1cb\x1dc\x1ed\x1fe\u00a0f\u2003g\u3000h\u2028i\u0085j",  # Python whitespace, not all of it Rust's
    "word " * 3 + "x" * 54 + " " + "y" * 55 + " " + "z" * 56 + " " + "w" * 119 + " " + "v" * 120 + " end",
    ("短い日本語の文と、ずっと長い漢字の連なり" * 4 + " ") * 3,  # long "words" without spaces
]


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
@pytest.mark.parametrize(("kind", "n"), [("word", 5), ("word", 1), ("char", 5), ("char", 30)])
def test_tricky_text_equals_datasketch(scheme: str, kind: str, n: int) -> None:
    """Lowercasing that Python does in context (final sigma), whitespace only Python counts,
    and shingles of every SHA-1 block count (one block up to 55 bytes, two up to 119, more
    past that), which take different hashing paths."""
    texts = TRICKY + ["\n".join(TRICKY)]
    ours = minhash_signatures(pa.array(texts), 128, 1, scheme, kind, n, n)
    for i, text in enumerate(texts):
        expected = datasketch_signature(reference_shingles(text, kind, n), 128, 1, scheme)
        assert np.array_equal(ours[i].astype(np.uint64), expected), repr(text[:40])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("aAbΣσςİIıZ ßẞ\u00a0\x1c\t\n漢字かな.,-") | st.characters(exclude_categories=("Cs",)),
                        max_size=80), min_size=1, max_size=8))
def test_generated_text_equals_datasketch(texts: list[str]) -> None:
    for kind, n in (("word", 2), ("char", 3)):
        ours = minhash_signatures(pa.array(texts, pa.string()), 32, 7, "affine32", kind, n, n)
        for i, text in enumerate(texts):
            expected = datasketch_signature(reference_shingles(text, kind, n), 32, 7, "affine32")
            assert np.array_equal(ours[i].astype(np.uint64), expected), repr(text)
