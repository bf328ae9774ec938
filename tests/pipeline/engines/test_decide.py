"""``engines.decide``: a global stage's keys read back from the staged shards, a task at a time
(``LazyColumns``) or a row group at a time (``pieces``), and no more of them held than that.

Expected values are the columns written here with pyarrow; memory is counted with
``tracemalloc``, which sees numpy's buffers (the fixed-size keys are read into one).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe.pipeline.base import PiecewiseKeys, key_pieces
from tokpipe.pipeline.engines.decide import LazyColumns

WIDTH = 520  # a minhash key of 128 values


def staged_tasks(tmp_path: Path, tasks: int, files: int, rows: int, group: int) -> tuple[list[list[Path]], list[bytes]]:
    """``tasks`` tasks of ``files`` Parquet files each, ``rows`` keys a file in row groups of
    ``group`` rows; the files and every task's keys as bytes, in order."""
    rng = np.random.default_rng(5)
    paths, expected = [], []
    for t in range(tasks):
        task_paths, task_bytes = [], b""
        for f in range(files):
            raw = rng.integers(0, 256, size=rows * WIDTH, dtype=np.uint8).tobytes()
            keys = pa.FixedSizeBinaryArray.from_buffers(pa.binary(WIDTH), rows, [None, pa.py_buffer(raw)])
            path = tmp_path / f"task{t}-{f}.parquet"
            pq.write_table(pa.table({"key": keys}), path, row_group_size=group)
            task_paths.append(path)
            task_bytes += raw
        paths.append(task_paths)
        expected.append(task_bytes)
    return paths, expected


def test_a_task_and_its_pieces_are_its_staged_keys_in_order(tmp_path: Path) -> None:
    files, expected = staged_tasks(tmp_path, tasks=3, files=2, rows=250, group=100)
    keys = LazyColumns(files, "key", pa.binary(WIDTH))
    assert len(keys) == 3
    assert [k.buffers()[1].to_pybytes()[k.offset * WIDTH:(k.offset + len(k)) * WIDTH] for k in keys] == expected
    assert isinstance(keys, PiecewiseKeys)
    for task in range(3):
        pieces = list(keys.pieces(task))
        # Row groups of 100, 100 and 50 rows in each of the two files.
        assert [len(p) for p in pieces] == [100, 100, 50, 100, 100, 50]
        assert b"".join(p.to_pylist()[i] for p in pieces for i in range(len(p))) == expected[task]
        assert [len(p) for p in key_pieces(keys, task)] == [len(p) for p in pieces]


def test_keys_without_pieces_come_whole() -> None:
    keys = [pa.array([b"a", b"b"]), pa.array([b"c"])]
    assert not isinstance(keys, PiecewiseKeys)
    assert [k.to_pylist() for k in key_pieces(keys, 1)] == [[b"c"]]


def test_iterating_over_tasks_holds_one_task_at_a_time(tmp_path: Path) -> None:
    """Sequence's own iterator kept the task it had yielded while it read the next one: two
    tasks' keys at the peak. Each task here is 2 MB of keys."""
    files, _ = staged_tasks(tmp_path, tasks=4, files=1, rows=4000, group=1000)
    task_bytes = 4000 * WIDTH
    keys = LazyColumns(files, "key", pa.binary(WIDTH))
    tracemalloc.start()
    try:
        seen = 0
        for k in keys:
            seen += len(k)
            del k
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == 16000
    assert task_bytes <= peak < 1.5 * task_bytes
