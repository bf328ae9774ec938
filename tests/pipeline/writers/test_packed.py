"""``ParquetShardWriter(file_format="packed")``: packed token rows written by
``tokpipe_core::packed_parquet`` read back by pyarrow (the peer, Apache Arrow's Parquet
reader) exactly as the same rows written by pyarrow's own writer: schema, values, lengths,
row groups, statistics.

The rows are real: every document of the shared corpora encoded by tiktoken (gpt2 for 16-bit
ids, o200k for 32-bit ones), laid end to end and cut into rows, the last one padded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.parity.peers import tiktoken_encoding
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.writers import ParquetShardWriter


@pytest.fixture(scope="module")
def streams(documents: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    """Per encoding, the ids of every document, each followed by the end-of-text id."""
    out = {}
    for name, dtype in (("gpt2", np.uint16), ("o200k", np.uint32)):
        enc = tiktoken_encoding(name)
        ids = [i for _, text in documents for i in [*enc.encode_ordinary(text), enc.eot_token]]
        out[name] = np.array(ids, dtype=dtype)
    return out


def packed_batches(stream: np.ndarray, width: int, rows_per_batch: int) -> list[pa.RecordBatch]:
    """``stream`` cut into rows of ``width`` ids, the last padded with its own last id and
    its ``length`` the real count; batches of ``rows_per_batch`` rows."""
    tail = len(stream) % width
    if tail:
        stream = np.concatenate([stream, np.full(width - tail, stream[-1], dtype=stream.dtype)])
    rows = len(stream) // width
    lengths = np.full(rows, width, dtype=np.int32)
    if tail:
        lengths[-1] = tail
    value_type = pa.from_numpy_dtype(stream.dtype)
    batches = []
    for start in range(0, rows, rows_per_batch):
        end = min(rows, start + rows_per_batch)
        offsets = pa.array(np.arange(0, (end - start + 1) * width, width, dtype=np.int32))
        values = pa.array(stream[start * width: end * width], type=value_type)
        batches.append(pa.record_batch([pa.ListArray.from_arrays(offsets, values), pa.array(lengths[start:end])],
                                       names=["input_ids", "length"]))
    return batches


@pytest.mark.parametrize("encoding", ["gpt2", "o200k"])
@pytest.mark.parametrize("width", [1, 2, 129, 2049])
@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_packed_rows_read_back_as_pyarrows_own_file(tmp_path: Path, streams: dict[str, np.ndarray], encoding: str,
                                                    width: int, compression: str) -> None:
    batches = packed_batches(streams[encoding], width, rows_per_batch=max(1, 300_000 // width))
    ours = ParquetShardWriter(tmp_path / "ours", 0, 1 << 40, compression=compression, file_format="packed")
    theirs = ParquetShardWriter(tmp_path / "theirs", 0, 1 << 40, compression=compression, use_dictionary=False)
    for batch in batches:
        assert ours.write(batch) == [] and theirs.write(batch) == []
    (info,) = ours.close()
    theirs.close()
    path = tmp_path / "ours" / info.name
    reference = tmp_path / "theirs" / info.name
    assert info.rows == sum(b.num_rows for b in batches)

    table, expected = pq.read_table(path), pq.read_table(reference)
    assert table.schema == expected.schema
    assert table.column("input_ids").combine_chunks().equals(expected.column("input_ids").combine_chunks())
    assert table.column("length").combine_chunks().equals(expected.column("length").combine_chunks())
    # Through the dataset API and row group by row group, too.
    assert ds.dataset(path).to_table().equals(table)
    meta, ref_meta = pq.ParquetFile(path).metadata, pq.ParquetFile(reference).metadata
    assert meta.num_rows == ref_meta.num_rows and meta.num_row_groups == ref_meta.num_row_groups == len(batches)
    stream = streams[encoding]
    for g, batch in enumerate(batches):
        group = pq.ParquetFile(path).read_row_group(g)
        assert group.column("input_ids").combine_chunks().equals(batch.column("input_ids").cast(
            expected.schema.field("input_ids").type))
        for column in range(2):
            stats, ref_stats = meta.row_group(g).column(column).statistics, ref_meta.row_group(g).column(column).statistics
            assert (stats.min, stats.max, stats.null_count) == (ref_stats.min, ref_stats.max, ref_stats.null_count)
            assert meta.row_group(g).column(column).compression == ref_meta.row_group(g).column(column).compression
    assert meta.row_group(0).column(0).statistics.min == int(batches[0].column("input_ids").values.to_numpy().min())
    assert meta.schema.to_arrow_schema() == ref_meta.schema.to_arrow_schema()
    # Every id of the stream is in the file once, in order (the padding after it).
    flat = table.column("input_ids").combine_chunks().values.to_numpy()
    assert np.array_equal(flat[: len(stream)], stream)


def test_shards_rotate_and_publish_like_pyarrows(tmp_path: Path, streams: dict[str, np.ndarray]) -> None:
    batches = packed_batches(streams["gpt2"][:400_000], 1025, rows_per_batch=40)
    writer = ParquetShardWriter(tmp_path, 3, shard_size=200_000, file_format="packed")
    shards = [info for batch in batches for info in writer.write(batch)] + writer.close()
    assert len(shards) > 2 and [s.name for s in shards] == [f"part-00003-{i:05d}.parquet" for i in range(len(shards))]
    assert sorted(p.name for p in tmp_path.iterdir()) == [s.name for s in shards]  # no temp file left
    table = pq.read_table([tmp_path / s.name for s in shards])
    assert table.num_rows == sum(s.rows for s in shards) == sum(b.num_rows for b in batches)
    assert all(s.bytes == (tmp_path / s.name).stat().st_size for s in shards)


def test_rows_of_another_width_or_another_shape_are_errors(tmp_path: Path) -> None:
    ids = pa.array(np.arange(12, dtype=np.uint16))
    three = pa.record_batch([pa.ListArray.from_arrays(pa.array([0, 3, 6, 9, 12], pa.int32()), ids),
                             pa.array(np.full(4, 3, dtype=np.int32))], names=["input_ids", "length"])
    ragged = pa.record_batch([pa.ListArray.from_arrays(pa.array([0, 3, 7, 12], pa.int32()), ids),
                              pa.array(np.full(3, 3, dtype=np.int32))], names=["input_ids", "length"])
    writer = ParquetShardWriter(tmp_path / "a", 0, file_format="packed")
    with pytest.raises(InvalidArgumentError, match="same number of ids"):
        writer.write(ragged)
    writer.abort()
    writer = ParquetShardWriter(tmp_path / "b", 0, file_format="packed")
    writer.write(three)
    four = pa.record_batch([pa.ListArray.from_arrays(pa.array([0, 4, 8, 12], pa.int32()), ids),
                            pa.array(np.full(3, 4, dtype=np.int32))], names=["input_ids", "length"])
    with pytest.raises(InvalidArgumentError, match="rows of 4 ids in a file of rows of 3"):
        writer.write(four)
    writer.abort()
    assert list((tmp_path / "b").iterdir()) == []  # the aborted shard's temp file is gone
    too_long = pa.record_batch([three.column(0), pa.array(np.full(4, 5, dtype=np.int32))], names=["input_ids", "length"])
    writer = ParquetShardWriter(tmp_path / "c", 0, file_format="packed")
    with pytest.raises(InvalidArgumentError, match="length"):
        writer.write(too_long)
    writer.abort()
    with pytest.raises(InvalidArgumentError, match="input_ids"):
        ParquetShardWriter(tmp_path / "d", 0, file_format="packed").write(pa.record_batch({"text": ["a"]}))
    with pytest.raises(InvalidArgumentError, match="zstd or none"):
        ParquetShardWriter(tmp_path / "e", 0, compression="snappy", file_format="packed").write(three)
