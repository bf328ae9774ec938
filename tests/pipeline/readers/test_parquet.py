"""Parquet reader: round trip with extra columns, row and file errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe.pipeline.readers import ReaderOptions

from .helpers import read_all


def test_round_trip_with_extra_columns(tmp_path: Path) -> None:
    path = tmp_path / "docs.parquet"
    table = pa.table({"score": [0.5, 1.5, 2.5], "text": ["a", "bé", "c 🙂"], "id": [10, None, 30]})
    pq.write_table(table, path, row_group_size=2)
    rows, errors = read_all([path], ReaderOptions(batch_rows=2))
    assert errors == []
    assert rows == [
        {"id": "10", "text": "a", "score": 0.5},
        {"id": f"{path}:2", "text": "bé", "score": 1.5},
        {"id": "30", "text": "c 🙂", "score": 2.5},
    ]


def test_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "docs.parquet"
    texts = [b"good", None, b"caf\xe9", b"x" * 50, b"also good"]
    pq.write_table(pa.table({"text": pa.array(texts, type=pa.binary())}), path)
    rows, errors = read_all([path], ReaderOptions(max_document_bytes=20))
    assert [(row["id"], row["text"]) for row in rows] == [(f"{path}:1", "good"), (f"{path}:5", "also good")]
    assert [(e.location, e.reason) for e in errors] == [("row 2", "null_text"), ("row 3", "invalid_utf8"), ("row 4", "document_too_large")]


def test_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "a_missing.parquet"
    pq.write_table(pa.table({"body": ["x"]}), missing)
    numeric = tmp_path / "b_numeric.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), numeric)
    empty = tmp_path / "c_empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], type=pa.string())}), empty)
    corrupt = tmp_path / "d_corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not really parquet")
    rows, errors = read_all([tmp_path])
    assert rows == []
    assert [(Path(e.path).name, e.location, e.reason) for e in errors] == [
        ("a_missing.parquet", "", "missing_text_field"),
        ("b_numeric.parquet", "", "non_string_text_field"),
        ("c_empty.parquet", "", "empty_file"),
        ("d_corrupt.parquet", "", "unreadable_file"),
    ]


def test_a_file_without_the_text_column_lists_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": ["a"], "body": ["x"], "url": ["u"]}), path)
    _, errors = read_all([path], ReaderOptions())
    assert [(e.reason, e.detail) for e in errors] == [("missing_text_field", 'no column \'text\'; fields: ["id", "body", "url"]')]
