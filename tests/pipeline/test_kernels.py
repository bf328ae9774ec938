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


def test_large_string_slices_reach_the_kernel_at_their_offset() -> None:
    # The kernels read a column through the Arrow C data interface: a slice's offset applies
    # to 64-bit offsets too, and a slice at the end or of nothing has no rows.
    texts = ["x" * 70, None, "Öl  und\nWasser", "", "z"]
    column = pa.array(texts, type=pa.large_string())
    assert exact_dedup_keys(column.slice(1), True, True).to_pylist() == [reference(t) for t in texts[1:]]
    assert exact_dedup_keys(column.slice(2, 1), True, True).to_pylist() == [reference(texts[2])]
    assert exact_dedup_keys(column.slice(5), True, True).to_pylist() == []
    assert exact_dedup_keys(pa.array([None, None], type=pa.large_string()), True, True).to_pylist() \
        == [reference(None)] * 2


# Characters Python's Unicode tables leave unassigned (Cn) are left out: Rust may know a newer
# Unicode version whose case mappings cover them.
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=40), max_size=20))
def test_keys_equal_hashlib_on_generated_text(texts: list[str]) -> None:
    assert exact_dedup_keys(pa.array(texts, type=pa.string()), True, True).to_pylist() == [reference(t) for t in texts]


# ---------------------------------------------------------------------------------------------
# numpy <-> Arrow through buffers, and the list-gather kernel of tokenize's shuffle, against
# pyarrow's own conversions and its `take`.


def test_numpy_of_and_arrow_of_agree_with_pyarrow() -> None:
    import numpy as np

    from tokpipe.pipeline.kernels import arrow_of, numpy_of, repeat_string

    for dtype in (np.int32, np.int64, np.uint16, np.uint32, np.uint64, np.float64):
        values = np.arange(-3, 97).astype(dtype)
        array = arrow_of(values)
        assert array.equals(pa.array(values))
        assert array.type == pa.from_numpy_dtype(np.dtype(dtype))
        sliced = pa.array(values).slice(7, 40)
        assert np.array_equal(numpy_of(sliced), sliced.to_numpy())
        assert np.array_equal(numpy_of(pa.chunked_array([sliced])), values[7:47])
    assert arrow_of(np.arange(4, dtype=np.uint32), pa.int32()).equals(pa.array([0, 1, 2, 3], pa.int32()))
    with pytest.raises(TypeError):
        arrow_of(np.arange(4, dtype=np.int64), pa.int32())
    with pytest.raises(ValueError):
        numpy_of(pa.array([1, None, 3]))
    assert repeat_string("drop me", 3).equals(pa.array(["drop me"] * 3, pa.string()))
    assert repeat_string("", 2).equals(pa.array(["", ""], pa.string()))
    assert repeat_string("é", 0).equals(pa.array([], pa.string()))


@pytest.mark.parametrize("value_type", [pa.uint16(), pa.uint32()])
def test_gather_lists_equals_arrow_take(value_type: pa.DataType) -> None:
    import random

    import numpy as np

    from tokpipe import _core
    from tokpipe.pipeline.kernels import list_buffers

    rng = random.Random(7)
    columns = []
    for n in (50, 1, 30):
        rows = [[rng.randrange(1 << value_type.bit_width) for _ in range(rng.choice([0, 1, 5, 300]))] for _ in range(n)]
        columns.append(pa.array(rows, pa.large_list(value_type)))
    # A slice (an offset into its offsets) and a column built on a slice of its values.
    columns[0] = columns[0].slice(3, 40)
    child = pa.array([rng.randrange(1 << value_type.bit_width) for _ in range(40)], value_type).slice(10)
    columns.append(pa.LargeListArray.from_arrays(pa.array([0, 3, 3, 8, 30], pa.int64()), child))
    picks = [(rng.randrange(len(columns)), 0) for _ in range(200)]
    picks = [(c, rng.randrange(len(columns[c]))) for c, _ in picks]
    pieces = np.array([c for c, _ in picks], dtype=np.int64)
    rows = np.array([r for _, r in picks], dtype=np.int64)
    offsets, values = _core.gather_lists([list_buffers(c) for c in columns], value_type.bit_width // 8, pieces, rows)
    got = pa.LargeListArray.from_arrays(pa.array(np.frombuffer(offsets, np.int64)),
                                        pa.array(np.frombuffer(values, np.dtype(str(value_type)))))
    want = pa.concat_arrays([columns[c].take(pa.array([r])) for c, r in picks])
    assert got.to_pylist() == want.to_pylist()
    assert len(values) == sum(len(x) for x in want.to_pylist()) * value_type.bit_width // 8
    with pytest.raises(Exception, match="not in the list column"):
        _core.gather_lists([list_buffers(columns[1])], value_type.bit_width // 8, np.zeros(1, np.int64),
                           np.ones(1, np.int64))
    with pytest.raises(Exception, match="no list column"):
        _core.gather_lists([list_buffers(columns[1])], value_type.bit_width // 8, np.ones(1, np.int64),
                           np.zeros(1, np.int64))


def test_owned_buffers_read_in_place_and_outlive_their_call() -> None:
    import gc

    import numpy as np

    from tokpipe import _core

    offsets = np.array([0, 3], np.int64)
    values = np.array([5, 6, 7], np.uint32)
    _, out = _core.gather_lists([(offsets, values)], 4, np.zeros(1, np.int64), np.zeros(1, np.int64))
    assert len(out) == 12 and bytes(out) == values.tobytes()
    view = np.frombuffer(out, np.uint32)
    arrow = pa.py_buffer(out)
    del out
    gc.collect()
    assert view.tolist() == [5, 6, 7] and not view.flags.writeable
    assert np.frombuffer(arrow, np.uint32).tolist() == [5, 6, 7]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text()), max_size=50))
def test_string_array_equals_pyarrows_conversion(values: list[str | None]) -> None:
    """``string_array`` (built from buffers, so that no pandas is imported) holds what
    ``pa.array`` makes of the same list: values, nulls, type."""
    from tokpipe.pipeline.kernels import string_array

    built = string_array(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, type=pa.string()))


@given(st.lists(st.one_of(st.none(), st.booleans()), max_size=200), st.integers(0, 10))
def test_flags_of_reads_a_boolean_column_with_nulls_as_false(values: list[bool | None], offset: int) -> None:
    import numpy as np

    from tokpipe.pipeline.kernels import flags_of

    column = pa.array(values, type=pa.bool_()).slice(min(offset, len(values)))
    expected = [bool(v) for v in values[min(offset, len(values)):]]
    assert flags_of(column).dtype == np.bool_ and flags_of(column).tolist() == expected
    assert flags_of(pa.chunked_array([column, column], type=pa.bool_())).tolist() == expected * 2
