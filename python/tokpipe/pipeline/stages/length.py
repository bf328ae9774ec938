"""``length_filter``: keep documents whose length, in characters or UTF-8 bytes, is in range."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Filter, Verdict, register
from tokpipe.pipeline.documents import TEXT


@register
class LengthFilter(Filter):
    """Drops documents shorter than ``min`` (reason ``too_short``) or longer than ``max``
    (``too_long``), counted in ``unit``: ``chars`` (code points) or ``bytes`` (UTF-8)."""

    name = "length_filter"

    def __init__(self, min: int = 1, max: int | None = None, unit: str = "chars") -> None:  # noqa: A002
        if unit not in ("chars", "bytes"):
            raise InvalidArgumentError(f"length_filter: unit must be chars or bytes, not {unit!r}")
        if min < 0 or (max is not None and max < min):
            raise InvalidArgumentError(f"length_filter: need 0 <= min <= max, got min={min}, max={max}")
        self.min = min
        self.max = max
        self.unit = unit

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        text = batch.column(TEXT)
        length = (pc.utf8_length(text) if self.unit == "chars" else pc.binary_length(text)).fill_null(0)
        length = length.to_numpy(zero_copy_only=False)
        too_short = length < self.min
        too_long = length > self.max if self.max is not None else np.zeros(len(length), dtype=bool)
        reasons = np.where(too_short, "too_short", "too_long")
        return ~(too_short | too_long), reasons
