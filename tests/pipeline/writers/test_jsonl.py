"""JSON Lines shards: the line format of every column type, the shard writer (rotation,
compression, determinism, atomic publication, ShardInfo), and ``verify_manifest`` over them.

Expected values come from ``json``, ``base64``, ``datetime``, ``gzip``, ``zstandard``,
``hashlib`` and ``os``, never from the writer.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.fields import JSON
from tokpipe.pipeline.writers import JsonlShardWriter, ShardInfo, verify_manifest, write_manifest
from tokpipe.pipeline.writers.jsonl import json_lines

FORMATS = ("jsonl", "jsonl.gz", "jsonl.zst")


def lines_of(batch: pa.RecordBatch) -> list[str]:
    text = json_lines(batch).to_pybytes().decode("utf-8")
    assert text.endswith("\n") or not text
    return text.split("\n")[:-1]


def dumps(row: dict[str, Any]) -> str:
    """A row as ``json.dumps`` writes it, compact and with UTF-8 kept."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def read_shard(path: Path) -> bytes:
    """A shard's bytes, decompressed by the standard tools."""
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(raw)
    if path.name.endswith(".zst"):
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()
    return raw


# ---------------------------------------------------------------------------------------------
# The line format.

# Every character JSON escapes, and those it must not (DEL, U+2028, non-ASCII), are likely.
_TRICKY = st.sampled_from([chr(c) for c in range(0x20)] + ['"', "\\", "/", "\x7f", "\u2028", "é", "中", "😀", " "])
_TEXTS = st.text(alphabet=st.one_of(_TRICKY, st.characters(blacklist_categories=("Cs",))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXTS, st.one_of(st.none(), _TEXTS), st.integers(-(2**63), 2**63 - 1)), min_size=1,
                max_size=12), st.integers(0, 3))
def test_strings_and_integers_are_written_as_json_dumps_writes_them(rows: list[tuple[str, str | None, int]],
                                                                    start: int) -> None:
    batch = pa.record_batch({"id": [r[0] for r in rows], "text": [r[1] for r in rows],
                             "n": pa.array([r[2] for r in rows], pa.int64())})
    batch = batch.slice(min(start, len(rows) - 1))  # a slice reads its own rows only
    expected = [dumps({"id": r[0], "text": r[1], "n": r[2]}) for r in rows[min(start, len(rows) - 1):]]
    assert lines_of(batch) == expected


def test_nested_values_are_objects_and_arrays_in_column_order() -> None:
    meta = [{"url": "a\nb", "score": 3, "tags": ["x", None]}, None, {"url": None, "score": None, "tags": []}]
    batch = pa.record_batch({"text": ["t0", "t1", "t2"], "meta": pa.array(meta), "flag": [True, False, None],
                             "ids": pa.array([[1, 2], None, []], pa.large_list(pa.int32())),
                             "pair": pa.array([[1, 2], [3, 4], None], pa.list_(pa.int64(), 2)),
                             "kind": pa.array(["a", None, "a"]).dictionary_encode(), "nothing": pa.nulls(3)})
    expected = [{"text": t, "meta": m, "flag": f, "ids": i, "pair": p, "kind": k, "nothing": None}
                for t, m, f, i, p, k in zip(["t0", "t1", "t2"], meta, [True, False, None], [[1, 2], None, []],
                                            [[1, 2], [3, 4], None], ["a", None, "a"])]
    assert lines_of(batch) == [dumps(row) for row in expected]


def test_floats_read_back_as_floats_and_nan_is_null() -> None:
    values = [1.0, 0.1, -0.0, 1e20, 2.5e-7, 1.7976931348623157e308, float("nan"), float("inf"), float("-inf"), None]
    batch = pa.record_batch({"x": pa.array(values, pa.float64()), "y": pa.array([1.0] * 10, pa.float32())})
    parsed = [json.loads(line) for line in lines_of(batch)]
    finite = [v if v is not None and v == v and abs(v) != float("inf") else None for v in values]
    assert [row["x"] for row in parsed] == finite
    # JSON has one number type: an integral float keeps a fraction, so readers type it float.
    assert all(type(row["x"]) is float for row in parsed if row["x"] is not None)
    assert [row["y"] for row in parsed] == [1.0] * 10 and '"y":1.0}' in lines_of(batch)[0]
    assert json.dumps(parsed[2]["x"]) == "-0.0"


def test_json_text_columns_are_nested_values_not_strings() -> None:
    deep = "[" * 40 + "1" + "]" * 40
    deeper = "[" * 3000 + "]" * 3000  # past Python's recursion limit: checked, never parsed
    texts = ['{"a": [1, {"b": null}]}', '"s"', "3", '[\n1,\r\n2]', deep, "not json", '{"x": NaN}', None, deeper]
    batch = pa.record_batch({"id": [str(i) for i in range(9)], "meta": pa.array(texts, JSON)})
    lines = lines_of(batch)
    assert len(lines) == 9  # a line break inside a value does not split its line
    assert lines[8] == '{"id":"8","meta":' + deeper + "}"
    got = [json.loads(line)["meta"] for line in lines[:8]]
    assert got[:4] == [{"a": [1, {"b": None}]}, "s", 3, [1, 2]]
    assert json.dumps(got[4]) == deep
    # Text that is not JSON (NaN is Python's, not JSON's) is kept as a string of itself.
    assert got[5:] == ["not json", '{"x": NaN}', None]


def test_binary_timestamps_dates_decimals_maps() -> None:
    import decimal

    when = dt.datetime(2020, 1, 2, 3, 4, 5, 120000)
    batch = pa.record_batch({
        "blob": pa.array([b"\x00\xff\x10", b"", None]),
        "s": pa.array([when] * 3, pa.timestamp("s")),
        "ms": pa.array([when, None, when], pa.timestamp("ms")),
        "us": pa.array([when] * 3, pa.timestamp("us")),
        "zoned": pa.array([when] * 3, pa.timestamp("us", tz="Europe/Paris")),
        "day": pa.array([when.date()] * 3),
        "price": pa.array([decimal.Decimal("-1.20"), None, decimal.Decimal("100.05")], pa.decimal128(6, 2)),
        "wait": pa.array([dt.timedelta(milliseconds=1500)] * 3, pa.duration("ms")),
        "counts": pa.array([[("a", 1), ("b", None)], None, []], pa.map_(pa.string(), pa.int64())),
    })
    rows = [json.loads(line) for line in lines_of(batch)]
    assert [r["blob"] for r in rows] == [base64.b64encode(b"\x00\xff\x10").decode(), "", None]
    assert dt.datetime.fromisoformat(rows[0]["s"]) == when.replace(microsecond=0)
    assert [r["ms"] for r in rows] == ["2020-01-02T03:04:05.120", None, "2020-01-02T03:04:05.120"]
    assert dt.datetime.fromisoformat(rows[0]["us"]) == when
    # Stored as UTC (pyarrow reads a naive datetime into a zoned column as UTC): written in UTC.
    assert rows[0]["zoned"].endswith("Z")
    assert dt.datetime.fromisoformat(rows[0]["zoned"]) == when.replace(tzinfo=dt.timezone.utc)
    assert rows[0]["day"] == "2020-01-02"
    assert '"price":-1.20,' in lines_of(batch)[0] and [r["price"] for r in rows] == [-1.2, None, 100.05]
    assert rows[0]["wait"] == 1500
    assert [r["counts"] for r in rows] == [[{"key": "a", "value": 1}, {"key": "b", "value": None}], None, []]


# ---------------------------------------------------------------------------------------------
# The shard writer.


def make_batch(start: int, n: int) -> pa.RecordBatch:
    ids = [f"doc-{i:06d}" for i in range(start, start + n)]
    texts = [f"text {i}: \"quoted\"\n" + "é🙂x\t" * (i % 17) for i in range(start, start + n)]
    return pa.record_batch({"id": ids, "text": texts, "n": list(range(start, start + n))})


def write(directory: Path, output_format: str, batches: list[pa.RecordBatch], shard_size: int,
          worker: int = 0) -> list[ShardInfo]:
    shards: list[ShardInfo] = []
    with JsonlShardWriter(directory, worker, shard_size, output_format=output_format) as writer:
        for batch in batches:
            shards += writer.write(batch)
        shards += writer.close()
    return shards


@pytest.mark.parametrize("output_format", FORMATS)
def test_shards_load_with_the_standard_tools_and_their_info_is_true(tmp_path: Path, output_format: str) -> None:
    batches = [make_batch(i * 50, 50) for i in range(8)]
    shards = write(tmp_path / "out", output_format, batches, shard_size=3 * batches[0].nbytes)
    names = sorted(os.listdir(tmp_path / "out"))
    assert names == [s.name for s in shards] == [f"part-00000-{i:05d}.{output_format}" for i in range(3)]
    rows = []
    for shard in shards:
        path = tmp_path / "out" / shard.name
        raw = path.read_bytes()
        assert shard.bytes == len(raw) and shard.sha256 == hashlib.sha256(raw).hexdigest()
        lines = read_shard(path).decode("utf-8").split("\n")[:-1]
        assert shard.rows == len(lines)
        rows += [json.loads(line) for line in lines]
    assert rows == [row for batch in batches for row in batch.to_pylist()]
    assert [s.rows for s in shards] == [150, 150, 100]  # cut after the batch that reached shard_size


def test_the_same_rows_give_the_same_bytes(tmp_path: Path) -> None:
    batches = [make_batch(i * 40, 40) for i in range(4)]
    for output_format in FORMATS:
        first = write(tmp_path / "a", output_format, batches, 1 << 30)
        second = write(tmp_path / "b", output_format, batches, 1 << 30)
        assert [s.sha256 for s in first] == [s.sha256 for s in second]
    header = (tmp_path / "a" / "part-00000-00000.jsonl.gz").read_bytes()[:10]
    assert header[3] == 0 and header[4:8] == b"\0\0\0\0"  # no file name, no time in the gzip header


def test_an_error_drops_the_open_shard_and_keeps_the_finished_ones(tmp_path: Path) -> None:
    out = tmp_path / "out"
    batch = make_batch(0, 30)
    with pytest.raises(RuntimeError, match="boom"):
        with JsonlShardWriter(out, 2, batch.nbytes, output_format="jsonl.zst") as writer:
            writer.write(batch)  # completes shard 0
            writer.write(make_batch(30, 0))  # an empty batch opens nothing
            writer.write(make_batch(30, 5).slice(1, 3))
            raise RuntimeError("boom")
    assert sorted(os.listdir(out)) == ["part-00002-00000.jsonl.zst"]  # no temp file, no half shard


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="output_format"):
        JsonlShardWriter(tmp_path, 0, output_format="csv")
    with pytest.raises(InvalidArgumentError, match="shard_size"):
        JsonlShardWriter(tmp_path, 0, 0)


# ---------------------------------------------------------------------------------------------
# verify_manifest over JSON Lines shards.


@pytest.fixture(params=FORMATS)
def jsonl_dataset(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, list[ShardInfo]]:
    out = tmp_path / "out"
    shards = write(out, request.param, [make_batch(i * 30, 30) for i in range(5)], 2 * make_batch(0, 30).nbytes)
    rejected = write(out / "rejected", request.param, [make_batch(900, 7)], 1 << 30)
    write_manifest(out, shards=shards, rejected=rejected, config={}, stats={})
    return out, shards


def test_a_whole_jsonl_dataset_verifies(jsonl_dataset: tuple[Path, list[ShardInfo]]) -> None:
    assert verify_manifest(jsonl_dataset[0]) == []


def test_a_corrupted_jsonl_shard_fails_verify(jsonl_dataset: tuple[Path, list[ShardInfo]]) -> None:
    out, shards = jsonl_dataset
    path = out / shards[1].name
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x55
    path.write_bytes(bytes(raw))
    problems = verify_manifest(out)
    assert problems and all(p.startswith(shards[1].name) for p in problems)
    assert any("sha256" in p for p in problems)


def test_a_row_count_that_disagrees_with_the_lines_fails_verify(jsonl_dataset: tuple[Path, list[ShardInfo]]) -> None:
    out, shards = jsonl_dataset
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["shards"][0]["rows"] += 1
    manifest["totals"]["rows"] += 1
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert verify_manifest(out) == [f"{shards[0].name}: {shards[0].rows} lines in the file, "
                                    f"manifest says {shards[0].rows + 1} rows"]


def test_an_unlisted_jsonl_shard_fails_verify(jsonl_dataset: tuple[Path, list[ShardInfo]]) -> None:
    out, shards = jsonl_dataset
    stray = shards[0].name.replace("part-00000-", "part-00007-")
    (out / "rejected" / stray).write_bytes((out / shards[0].name).read_bytes())
    assert verify_manifest(out) == [f"rejected/{stray}: on disk but not listed in the manifest"]
