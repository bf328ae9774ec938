"""Stage and Filter: the stats they own, the rejected rows they label, and user stages."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tokpipe.pipeline import Filter, Stage, register, registered_stages
from tokpipe.pipeline.base import REASON, STAGE, StageStats, Verdict


def docs(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch({"id": [f"d{i}" for i in range(len(texts))], "text": texts, "lang": ["en"] * len(texts)})


class ShortDocs(Filter):
    """The ten-line user stage the docs promise."""

    name = "test_short_docs"

    def __init__(self, min_chars: int = 5) -> None:
        self.min_chars = min_chars

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        return pc.greater_equal(pc.utf8_length(batch["text"]), self.min_chars), "too_short"


def test_a_user_filter_is_a_keep_mask_and_a_reason() -> None:
    stage = ShortDocs(5)
    texts = ["hello world", "hi", "", "exactly", "1234"]
    result = stage.process(docs(texts))
    assert result.kept.column("text").to_pylist() == [t for t in texts if len(t) >= 5]
    assert result.kept.schema.names == ["id", "text", "lang"]
    assert result.rejected is not None
    assert result.rejected.column("text").to_pylist() == [t for t in texts if len(t) < 5]
    assert set(result.rejected.column(REASON).to_pylist()) == {"too_short"}
    assert set(result.rejected.column(STAGE).to_pylist()) == {"test_short_docs"}
    stage.process(docs(["a", "longer text"]))
    assert stage.stats.as_dict() == {"in": 7, "kept": 3, "dropped_too_short": 4, "seconds": pytest.approx(0, abs=5)}


def test_per_row_reasons_and_a_keep_everything_batch() -> None:
    class ByFirstLetter(Filter):
        name = "test_first_letter"

        def keep(self, batch: pa.RecordBatch) -> Verdict:
            texts = batch["text"].to_pylist()
            return [t[0] == "k" for t in texts], [f"starts_with_{t[0]}" for t in texts]

    stage = ByFirstLetter()
    result = stage.process(docs(["keep", "apple", "kiwi", "banana"]))
    assert result.rejected is not None
    assert result.rejected.column(REASON).to_pylist() == ["starts_with_a", "starts_with_b"]
    assert stage.process(docs(["kk"])).rejected is None
    assert dict(stage.stats.dropped) == {"starts_with_a": 1, "starts_with_b": 1}


def test_a_mask_of_the_wrong_length_is_an_error() -> None:
    class Broken(Filter):
        name = "test_broken"

        def keep(self, batch: pa.RecordBatch) -> Verdict:
            return [True], "x"

    with pytest.raises(ValueError, match="1 flags for 3 documents"):
        Broken().process(docs(["a", "b", "c"]))


def test_a_mapping_stage_counts_in_and_kept() -> None:
    class Upper(Stage):
        name = "test_upper"

        def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
            return batch.set_column(1, "text", pc.utf8_upper(batch["text"]))

    stage = Upper()
    assert stage.process(docs(["ab", "c"])).kept.column("text").to_pylist() == ["AB", "C"]
    assert (stage.stats.input, stage.stats.kept) == (2, 2)


def test_registry_names_are_unique_and_hold_the_built_ins() -> None:
    assert {"normalize", "length_filter", "exact_dedup"} <= set(registered_stages())
    register(ShortDocs)
    assert registered_stages()["test_short_docs"] is ShortDocs

    class Impostor(Filter):
        name = "normalize"

    with pytest.raises(TypeError, match="taken"):
        register(Impostor)


def test_stats_round_trip_and_merge() -> None:
    a = StageStats("s", input=10, kept=7, seconds=1.5)
    a.dropped.update({"x": 2, "y": 1})
    b = StageStats.from_dict("s", a.as_dict())
    b.merge(a)
    assert b.as_dict() == {"in": 20, "kept": 14, "dropped_x": 4, "dropped_y": 2, "seconds": 3.0}
