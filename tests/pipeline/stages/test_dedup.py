"""``exact_dedup``'s two steps against a dict that keeps the first copy of each normalised text."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from tokpipe.pipeline.stages import ExactDedup


def batch(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array([str(i) for i in range(len(texts))], pa.string()),
                            "text": pa.array(texts, pa.string())})


def test_keeps_the_first_copy_in_task_order(documents: list[tuple[str, str]]) -> None:
    base = [t for _, t in documents[:30]]
    # Copies across and within tasks, differing only in case and whitespace.
    tasks = [base[:10] + [base[3]], [base[3].upper(), "  " + base[5] + "\n\n"] + base[10:20], base[15:30] + [base[0]]]
    stage = ExactDedup()
    keepers = stage.decide([stage.keys(batch(t)) for t in tasks])
    flat = [t for task in tasks for t in task]
    first: dict[str, int] = {}
    expected = []
    for position, text in enumerate(flat):
        norm = re.sub(r"\s+", " ", text.lower()).strip()
        expected.append(first.setdefault(norm, position))
    assert np.concatenate(keepers).tolist() == expected
    assert sum(k != p for k, p in zip(expected, range(len(flat)))) >= 5


def test_options_and_empty_tasks() -> None:
    strict = ExactDedup(lowercase=False, collapse_whitespace=False)
    keepers = strict.decide([strict.keys(batch(["A b", "a b", "A  b", "A b"])), strict.keys(batch([]))])
    assert keepers[0].tolist() == [0, 1, 2, 0] and keepers[1].tolist() == []
    assert strict.decide([]) == []
