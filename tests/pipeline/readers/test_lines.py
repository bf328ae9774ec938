"""``readers.lines``: the newline count that numbers the lines of whole blocks, against
Python's ``bytes.count``."""

from __future__ import annotations

import gzip

from hypothesis import given
from hypothesis import strategies as st

from tokpipe.pipeline.readers.lines import count_newlines

from .helpers import CORPORA


@given(st.binary(max_size=5000), st.integers(0, 64))
def test_count_newlines_is_bytes_count(data: bytes, cut: int) -> None:
    assert count_newlines(data) == data.count(b"\n")
    view = memoryview(bytearray(data))[cut:]
    assert count_newlines(view) == bytes(view).count(b"\n")


def test_count_newlines_on_a_real_file() -> None:
    with gzip.open(CORPORA / "web" / "sample-0000.warc.gz", "rb") as f:
        data = f.read()
    assert data.count(b"\n") > 1000
    assert count_newlines(data) == data.count(b"\n")
