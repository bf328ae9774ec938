"""``length_filter`` against ``len`` of the text and of its UTF-8 bytes."""

from __future__ import annotations

import pyarrow as pa

from tokpipe.pipeline.base import REASON
from tokpipe.pipeline.stages import LengthFilter


def test_chars_and_bytes_bounds(documents: list[tuple[str, str]]) -> None:
    texts = [t[:n] for (_, t), n in zip(documents, range(0, 4000, 37))] + ["", "日本語", "abc"]
    batch = pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts})
    for unit, measure in (("chars", len), ("bytes", lambda t: len(t.encode()))):
        stage = LengthFilter(min=3, max=500, unit=unit)
        result = stage.process(batch)
        assert result.kept.column("text").to_pylist() == [t for t in texts if 3 <= measure(t) <= 500]
        assert result.rejected is not None
        expected = ["too_short" if measure(t) < 3 else "too_long" for t in texts if not 3 <= measure(t) <= 500]
        assert result.rejected.column(REASON).to_pylist() == expected
    # "日本語" is 3 characters but 9 bytes.
    assert LengthFilter(min=4, unit="bytes").process(batch).kept.column("text").to_pylist().count("日本語") == 1
    assert LengthFilter(min=4, unit="chars").process(batch).kept.column("text").to_pylist().count("日本語") == 0
