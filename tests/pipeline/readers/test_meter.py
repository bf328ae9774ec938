"""``readers.meter``: each reader reports how far it has read its task, in the units of the
task's size (file bytes, compressed ones for a compressed file), block by block: the meter's
counter moves while a task is read, and reaches the task's size at its end."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tokpipe.pipeline.engines.units import task_bytes
from tokpipe.pipeline.readers import ReaderOptions, meter, plan_tasks, read_task
from tokpipe.pipeline.readers.lines import BLOCK_BYTES


@pytest.fixture()
def counter() -> Iterator[object]:
    slots = meter.slots(1)
    meter.attach(slots, 0)
    try:
        yield slots
    finally:
        meter.detach()


def _lines(n: int) -> bytes:
    # Random words: compressed files stay several blocks of compressed bytes long.
    rng = random.Random(7)
    words = [f"w{rng.randrange(10**6)}" for _ in range(5000)]
    return b"".join(json.dumps({"text": " ".join(rng.choices(words, k=60))}).encode() + b"\n" for _ in range(n))


def _counted_while_reading(path: Path, counter: object, options: ReaderOptions = ReaderOptions()) -> tuple[list[int], int]:
    """The counter's value after each batch of ``path``'s only task, and the task's size."""
    (task,) = plan_tasks([path], options)
    size = task_bytes(task)
    meter.start(size)
    seen = []
    for _ in read_task(task, options, lambda error: None):
        seen.append(counter[0])  # type: ignore[index]
    seen.append(counter[0])  # type: ignore[index]
    return seen, size


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_a_line_file_is_counted_block_by_block_up_to_its_size(tmp_path: Path, counter: object, suffix: str) -> None:
    data = _lines(60_000)  # about 3 blocks of lines
    assert len(data) > 2 * BLOCK_BYTES
    path = tmp_path / f"in{suffix}"
    path.write_bytes(gzip.compress(data) if suffix == ".jsonl.gz" else
                     zstandard.ZstdCompressor().compress(data) if suffix == ".jsonl.zst" else data)
    seen, size = _counted_while_reading(path, counter, ReaderOptions(task_bytes=1 << 30))
    assert size == path.stat().st_size
    assert seen == sorted(seen)
    assert seen[-1] == size
    assert any(0 < n < size for n in seen), seen  # it moved before the end of the task


def test_a_range_of_a_big_file_counts_its_own_bytes(tmp_path: Path, counter: object) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_lines(40_000))
    options = ReaderOptions(task_bytes=path.stat().st_size // 3)
    tasks = plan_tasks([path], options)
    assert len(tasks) >= 3
    for task in tasks:
        meter.start(task_bytes(task))
        for _ in read_task(task, options, lambda error: None):
            pass
        assert counter[0] == task_bytes(task)  # type: ignore[index]


def test_a_parquet_file_is_counted_by_rows(tmp_path: Path, counter: object) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": [f"document {n}" for n in range(10_000)]}), path, row_group_size=1000)
    seen, size = _counted_while_reading(path, counter)
    assert seen[-1] == size == path.stat().st_size
    assert any(0 < n < size for n in seen), seen


def test_nothing_is_counted_without_a_counter(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(_lines(100))
    meter.start(path.stat().st_size)  # no counter attached: a report is a test and nothing else
    try:
        assert not meter.active()
        assert sum(b.num_rows for b in read_task(plan_tasks([path], ReaderOptions())[0], ReaderOptions(),
                                                   lambda error: None)) == 100
    finally:
        meter.stop()
