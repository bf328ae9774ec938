"""The Rust kernels behind the stages, against the Python they replace."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpipe.pipeline.kernels import exact_dedup_keys


def reference(text: str | None, lowercase: bool = True, collapse: bool = True) -> bytes:
    text = text or ""
    if lowercase:
        text = text.lower()
    if collapse:
        text = " ".join(text.split())
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_keys_equal_hashlib_on_real_text(documents: list[tuple[str, str]], kind: pa.DataType) -> None:
    texts = [t for _, t in documents] + ["", "  Hello\u3000WORLD\x1cx\n\n ΣΑΣ ", "İstanbul ǅ ß ﬁ"]
    column = pa.array(texts, type=kind)
    for lowercase in (True, False):
        for collapse in (True, False):
            got = exact_dedup_keys(column, lowercase, collapse).to_pylist()
            assert got == [reference(t, lowercase, collapse) for t in texts]


def test_slices_chunks_and_nulls() -> None:
    texts = ["a b", None, "A  B", "c", "", "d e f"]
    column = pa.array(texts, type=pa.string())
    assert exact_dedup_keys(column.slice(2, 3), True, True).to_pylist() == [reference(t) for t in texts[2:5]]
    chunked = pa.chunked_array([column.slice(0, 2), column.slice(2)])
    assert exact_dedup_keys(chunked, True, True).to_pylist() == [reference(t) for t in texts]
    assert exact_dedup_keys(pa.array([], type=pa.string()), True, True).to_pylist() == []


# Characters Python's Unicode tables leave unassigned (Cn) are left out: Rust may know a newer
# Unicode version whose case mappings cover them.
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=40), max_size=20))
def test_keys_equal_hashlib_on_generated_text(texts: list[str]) -> None:
    assert exact_dedup_keys(pa.array(texts, type=pa.string()), True, True).to_pylist() == [reference(t) for t in texts]
