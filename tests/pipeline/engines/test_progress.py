"""Progress within work units (``engines.local``, ``readers.meter``): on a single large file,
one task, the reported bytes move before the task is done, for one worker (the run's own
process) and for worker processes (``tokenize`` runs its tasks through the same ``map``);
and progress never reports more than the total, nor goes back.

The test waits for events, not for time: a stage of the test holds the task's first batch
until the test's progress callback has seen a part of the input reported as done (a file it
creates then). Without progress inside tasks, that never happens before the task finishes,
and the stage gives up after a generous minute so the test fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tokpipe import pipeline
from tokpipe.pipeline import Filter, register
from tokpipe.pipeline.engines import ProgressUpdate

# Only a hang (no progress within the task) should reach it.
HANG_S = 60


@register
class WaitForProgress(Filter):
    """Keeps every document, but holds the first batch until ``flag`` exists."""

    name = "test_wait_for_progress"

    def __init__(self, flag: str = "") -> None:
        self.flag = flag
        self.waited = False

    def keep(self, batch: pa.RecordBatch) -> tuple[np.ndarray, str]:
        if not self.waited:
            self.waited = True
            deadline = time.monotonic() + HANG_S
            while not os.path.exists(self.flag) and time.monotonic() < deadline:
                time.sleep(0.01)
        return np.ones(batch.num_rows, dtype=bool), "never"


def big_file(tmp_path: Path) -> Path:
    """About 40 MB of JSON Lines in one file: a single task at the default task size."""
    path = tmp_path / "big.jsonl"
    body = " ".join(f"word{n % 997}" for n in range(700))
    with open(path, "w", encoding="utf-8") as f:
        for n in range(7_000):
            f.write(json.dumps({"text": f"document {n}: {body}"}) + "\n")
    assert path.stat().st_size > 35 << 20
    return path


class Recorder:
    """The progress callback: every update as it came, and the flag file created at the first
    update that reports part, but not all, of the input of ``phase`` as done."""

    def __init__(self, flag: Path, phase: str) -> None:
        self.flag, self.phase = flag, phase
        self.updates: list[tuple[str, int, int]] = []

    def __call__(self, update: ProgressUpdate) -> None:
        self.updates.append((update.phase, update.done, update.total))
        if update.phase == self.phase and 0 < update.done < update.total:
            self.flag.touch()

    def check(self) -> None:
        mine = [(done, total) for phase, done, total in self.updates if phase == self.phase]
        total = mine[0][1]
        assert total > 0
        # The task's bytes, read while it ran: before the update that counts it done.
        first_done = next(i for i, (done, _) in enumerate(mine) if done == total)
        assert any(0 < done < total for done, _ in mine[:first_done]), mine
        assert [done for done, _ in mine] == sorted(done for done, _ in mine)  # never back
        assert all(done <= total for done, _ in mine)


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_moves_within_the_one_task_of_a_big_file(tmp_path: Path, workers: int) -> None:
    source = big_file(tmp_path)
    flag = tmp_path / "seen"
    recorder = Recorder(flag, "segment 1/1")
    config = {"stages": [{"type": "test_wait_for_progress", "flag": str(flag)}]}
    result = pipeline.run([source], tmp_path / "out", config=config, workers=workers, progress=recorder)
    assert result.kept == 7_000
    recorder.check()

