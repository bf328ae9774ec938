"""Helpers the reader tests share: read inputs to plain rows, and the shared corpora's path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence, Union

import pyarrow as pa

from tokpipe.pipeline.readers import ReadError, ReaderOptions, plan_tasks, read_task

CORPORA = Path(__file__).resolve().parents[3].parent / "shared" / "corpora"


def require(path: Path) -> Path:
    """``path``, or a failure (never a skip) when the shared test data is missing."""
    if not path.exists():
        raise FileNotFoundError(f"test data missing: {path} (the shared corpora must sit beside the repo)")
    return path


def read_all(inputs: Sequence[Union[str, os.PathLike]], options: ReaderOptions = ReaderOptions()) -> tuple[list[dict[str, Any]], list[ReadError]]:
    """Every document of ``inputs`` as a dict per row, and every read error, in task order."""
    errors: list[ReadError] = []
    rows: list[dict[str, Any]] = []
    for task in plan_tasks(inputs, options):
        for batch in read_task(task, options, errors.append):
            assert isinstance(batch, pa.RecordBatch)
            assert batch.schema.names[:2] == ["id", "text"]
            assert batch.schema.field("id").type == pa.string()
            assert batch.schema.field("text").type == pa.string()
            assert 0 < batch.num_rows <= options.batch_rows
            rows.extend(batch.to_pylist())
    return rows, errors
