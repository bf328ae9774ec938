"""ParquetShardWriter: round trips, rotation, schema changes, atomic publication, ShardInfo.

Expected values come from pyarrow, hashlib and os applied to the files, never from the writer.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.writers import ParquetShardWriter, ShardInfo


def make_batch(start: int, n: int, **extra: list[object]) -> pa.RecordBatch:
    """``n`` documents numbered from ``start``, of varied lengths, plus any extra columns."""
    ids = [f"doc-{i:06d}" for i in range(start, start + n)]
    texts = [f"text {i} " + "é🙂x" * (i % 17) for i in range(start, start + n)]
    return pa.record_batch({"id": ids, "text": texts, **extra})


def all_files(directory: Path) -> list[str]:
    """Every entry of ``directory``, hidden ones included."""
    return sorted(os.listdir(directory))


def collect(writer: ParquetShardWriter, batches: list[pa.RecordBatch]) -> list[ShardInfo]:
    shards: list[ShardInfo] = []
    for batch in batches:
        shards += writer.write(batch)
    return shards + writer.close()


def test_round_trip_one_shard(tmp_path: Path) -> None:
    batches = [make_batch(0, 10), make_batch(10, 25), make_batch(35, 1)]
    with ParquetShardWriter(tmp_path, worker=0) as writer:
        shards = [s for b in batches for s in writer.write(b)]
        assert shards == []  # far below the default 256 MiB
    # Closed by the context manager: the one shard is on disk under its final name.
    assert all_files(tmp_path) == ["part-00000-00000.parquet"]
    expected = pa.Table.from_batches(batches)
    assert pq.read_table(tmp_path / "part-00000-00000.parquet").equals(expected)
    assert ds.dataset(tmp_path, format="parquet").to_table().equals(expected)


def test_shards_are_zstd(tmp_path: Path) -> None:
    with ParquetShardWriter(tmp_path, worker=0) as writer:
        writer.write(make_batch(0, 50))
    meta = pq.read_metadata(tmp_path / "part-00000-00000.parquet")
    codecs = {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups)
              for c in range(meta.num_columns)}
    assert codecs == {"ZSTD"}


def test_compression_is_configurable(tmp_path: Path) -> None:
    with ParquetShardWriter(tmp_path, worker=0, compression="snappy") as writer:
        writer.write(make_batch(0, 50))
    meta = pq.read_metadata(tmp_path / "part-00000-00000.parquet")
    assert meta.row_group(0).column(0).compression == "SNAPPY"


def test_unknown_compression_leaves_nothing(tmp_path: Path) -> None:
    writer = ParquetShardWriter(tmp_path, worker=0, compression="no-such-codec")
    with pytest.raises(pa.ArrowException):
        writer.write(make_batch(0, 3))
    assert all_files(tmp_path) == []
    assert writer.next_shard == 0


def test_rotation_at_shard_size(tmp_path: Path) -> None:
    batches = [make_batch(i * 7, 7) for i in range(300)]
    sizes = [b.nbytes for b in batches]  # the writer's measure, computed by pyarrow
    shard_size = sum(sizes) // 9  # several shards, each of many batches
    writer = ParquetShardWriter(tmp_path, worker=3, shard_size=shard_size)
    shards: list[ShardInfo] = []
    crossed_at: list[int] = []  # index of the write that returned each shard
    for i, batch in enumerate(batches):
        done = writer.write(batch)
        shards += done
        crossed_at += [i] * len(done)
    last = writer.close()
    assert len(last) == 1
    shards += last

    names = [s.name for s in shards]
    assert names == [f"part-00003-{n:05d}.parquet" for n in range(len(shards))]
    assert len(shards) >= 5
    assert all_files(tmp_path) == names
    rows = [pq.read_metadata(tmp_path / n).num_rows for n in names]
    assert sum(rows) == sum(b.num_rows for b in batches)
    assert [s.rows for s in shards] == rows

    # Attribute batches to shards by row count (7 rows each), then check the size rule: every
    # shard but the last reached shard_size, and only with its final batch.
    first = 0
    for k, shard in enumerate(shards):
        count = shard.rows // 7
        in_shard = sizes[first:first + count]
        if k < len(shards) - 1:
            assert sum(in_shard) >= shard_size
            assert sum(in_shard[:-1]) < shard_size
            # The write that crossed the size is the one that returned the shard.
            assert crossed_at[k] == first + count - 1
        first += count
    assert first == len(batches)

    # Row order is kept across shards.
    read = ds.dataset([str(tmp_path / n) for n in names], format="parquet").to_table()
    assert read.equals(pa.Table.from_batches(batches))


def test_first_shard_and_next_shard(tmp_path: Path) -> None:
    writer = ParquetShardWriter(tmp_path, worker=12, shard_size=1, first_shard=40)
    assert writer.next_shard == 40
    done = writer.write(make_batch(0, 3))
    assert [s.name for s in done] == ["part-00012-00040.parquet"]
    assert writer.next_shard == 41
    done = writer.write(make_batch(3, 3))
    assert [s.name for s in done] == ["part-00012-00041.parquet"]
    assert writer.next_shard == 42
    assert writer.close() == []
    assert all_files(tmp_path) == ["part-00012-00040.parquet", "part-00012-00041.parquet"]


def test_batch_larger_than_shard_size_stays_whole(tmp_path: Path) -> None:
    big = make_batch(0, 5000)
    small = make_batch(5000, 2)
    writer = ParquetShardWriter(tmp_path, worker=0, shard_size=1000)
    assert big.nbytes > 1000
    done = writer.write(big)
    assert [(s.name, s.rows) for s in done] == [("part-00000-00000.parquet", 5000)]
    assert pq.read_table(tmp_path / done[0].name).equals(pa.Table.from_batches([big]))
    done = writer.write(small)
    assert done == []
    assert [(s.name, s.rows) for s in writer.close()] == [("part-00000-00001.parquet", 2)]


def test_schema_change_rotates_and_keeps_every_column(tmp_path: Path) -> None:
    plain = make_batch(0, 4)
    lang = make_batch(4, 3, lang=["en", "fr", "de"])
    lang2 = make_batch(7, 2, lang=["it", "es"])
    scored = make_batch(9, 2, score=[0.5, 1.5], lang=["en", "en"])
    back = make_batch(11, 5)
    writer = ParquetShardWriter(tmp_path, worker=0)
    shards = collect(writer, [plain, lang, lang2, scored, back])
    groups = [[plain], [lang, lang2], [scored], [back]]
    assert [s.name for s in shards] == [f"part-00000-{n:05d}.parquet" for n in range(4)]
    for shard, group in zip(shards, groups):
        table = pq.read_table(tmp_path / shard.name)
        expected = pa.Table.from_batches(group)
        assert table.schema.names == expected.schema.names
        assert table.equals(expected)
        assert shard.rows == expected.num_rows


def test_schema_metadata_alone_does_not_rotate(tmp_path: Path) -> None:
    a = make_batch(0, 3)
    b = make_batch(3, 3).replace_schema_metadata({"origin": "elsewhere"})
    shards = collect(ParquetShardWriter(tmp_path, worker=0), [a, b])
    assert [s.rows for s in shards] == [6]


def test_empty_batches_are_ignored(tmp_path: Path) -> None:
    empty_other_schema = make_batch(0, 0, lang=pa.array([], pa.string()))
    writer = ParquetShardWriter(tmp_path, worker=0, shard_size=1)
    assert writer.write(make_batch(0, 0)) == []
    assert writer.close() == []
    assert all_files(tmp_path) == []

    writer = ParquetShardWriter(tmp_path, worker=1)
    shards = collect(writer, [make_batch(0, 2), empty_other_schema, make_batch(2, 2)])
    # The empty batch with another schema neither rotated the shard nor added a column.
    assert [s.rows for s in shards] == [4]
    assert pq.read_schema(tmp_path / shards[0].name).names == ["id", "text"]


def test_shard_is_hidden_until_complete(tmp_path: Path) -> None:
    writer = ParquetShardWriter(tmp_path, worker=0)
    writer.write(make_batch(0, 10))
    # While open, only the hidden temp file exists: no reader can see a partial shard.
    assert all_files(tmp_path) == [".part-00000-00000.parquet.tmp"]
    assert ds.dataset(tmp_path, format="parquet").files == []
    writer.close()
    assert all_files(tmp_path) == ["part-00000-00000.parquet"]


def test_no_temp_files_left_after_close(tmp_path: Path) -> None:
    batches = [make_batch(i * 10, 10, lang=["x"] * 10) if i % 5 == 0 else make_batch(i * 10, 10)
               for i in range(40)]
    shards = collect(ParquetShardWriter(tmp_path, worker=0, shard_size=2000), batches)
    assert all_files(tmp_path) == sorted(s.name for s in shards)
    assert not any(name.startswith(".") or name.endswith(".tmp") for name in all_files(tmp_path))


def test_exception_in_context_leaves_no_partial_file(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with ParquetShardWriter(tmp_path, worker=0) as writer:
            writer.write(make_batch(0, 10))
            raise RuntimeError("boom")
    assert all_files(tmp_path) == []


def test_exception_keeps_completed_shards(tmp_path: Path) -> None:
    first = make_batch(0, 20)
    completed: list[ShardInfo] = []
    with pytest.raises(KeyError):
        with ParquetShardWriter(tmp_path, worker=2, shard_size=first.nbytes) as writer:
            completed += writer.write(first)  # reaches shard_size: completed and published
            writer.write(make_batch(20, 5))  # the partial second shard
            raise KeyError("stop")
    assert [s.name for s in completed] == ["part-00002-00000.parquet"]
    assert all_files(tmp_path) == ["part-00002-00000.parquet"]
    assert pq.read_table(tmp_path / "part-00002-00000.parquet").equals(pa.Table.from_batches([first]))


def test_shard_info_matches_the_files(tmp_path: Path) -> None:
    batches = [make_batch(i * 50, 50) for i in range(30)]
    shards = collect(ParquetShardWriter(tmp_path, worker=0, shard_size=20_000), batches)
    assert len(shards) > 1
    for shard in shards:
        path = tmp_path / shard.name
        assert shard.bytes == os.stat(path).st_size
        assert shard.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert shard.rows == pq.ParquetFile(path).metadata.num_rows == pq.read_table(path).num_rows


def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    writer = ParquetShardWriter(tmp_path, worker=0)
    writer.write(make_batch(0, 3))
    assert len(writer.close()) == 1
    assert writer.close() == []
    with pytest.raises(InvalidArgumentError):
        writer.write(make_batch(3, 3))


def test_abort_drops_only_the_open_shard(tmp_path: Path) -> None:
    writer = ParquetShardWriter(tmp_path, worker=0, shard_size=1)
    done = writer.write(make_batch(0, 3))
    writer.write(make_batch(0, 0))
    writer.abort()
    writer.abort()
    assert all_files(tmp_path) == [done[0].name]
    assert writer.close() == []


def test_rejected_documents(tmp_path: Path) -> None:
    rejected_dir = tmp_path / "rejected"
    batch = make_batch(0, 4, reason=["too_short", "language", "too_short", "duplicate"],
                       stage=["length", "langid", "length", "dedup"])
    with ParquetShardWriter(rejected_dir, worker=5) as writer:
        writer.write(batch)
    assert all_files(rejected_dir) == ["part-00005-00000.parquet"]
    table = pq.read_table(rejected_dir / "part-00005-00000.parquet")
    assert table.schema.names == ["id", "text", "reason", "stage"]
    assert table.equals(pa.Table.from_batches([batch]))


def test_creates_missing_directory(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    with ParquetShardWriter(target, worker=0) as writer:
        writer.write(make_batch(0, 1))
    assert all_files(target) == ["part-00000-00000.parquet"]


def test_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        ParquetShardWriter(tmp_path, worker=0, shard_size=0)
    with pytest.raises(InvalidArgumentError):
        ParquetShardWriter(tmp_path, worker=-1)
    with pytest.raises(InvalidArgumentError):
        ParquetShardWriter(tmp_path, worker=0, first_shard=-1)
    with pytest.raises(TypeError):
        ParquetShardWriter(tmp_path, worker=0).write(pa.Table.from_batches([make_batch(0, 1)]))  # type: ignore[arg-type]


def test_arrow_staging_shards_round_trip_without_checksum(tmp_path: Path) -> None:
    """``file_format="arrow"``: uncompressed Arrow IPC files under the same naming, rotation
    and publication rules; ``checksum=False`` leaves the digest empty."""
    batches = [make_batch(0, 30), make_batch(30, 30), make_batch(60, 5)]
    writer = ParquetShardWriter(tmp_path, worker=3, shard_size=batches[0].nbytes + 1, file_format="arrow",
                                checksum=False)
    shards = collect(writer, batches)
    assert [s.name for s in shards] == ["part-00003-00000.arrow", "part-00003-00001.arrow"]
    assert all_files(tmp_path) == [s.name for s in shards]
    tables = [pa.ipc.open_file(pa.memory_map(str(tmp_path / s.name))).read_all() for s in shards]
    assert pa.concat_tables(tables).equals(pa.Table.from_batches(batches))
    for shard, table in zip(shards, tables):
        assert shard.rows == table.num_rows and shard.sha256 == ""
        assert shard.bytes == (tmp_path / shard.name).stat().st_size
    with pytest.raises(InvalidArgumentError):
        ParquetShardWriter(tmp_path, worker=0, file_format="csv")


def test_dictionary_encoding_can_be_turned_off(tmp_path: Path) -> None:
    with ParquetShardWriter(tmp_path, worker=0, use_dictionary=False) as writer:
        writer.write(make_batch(0, 50))
    meta = pq.read_metadata(tmp_path / "part-00000-00000.parquet")
    encodings = {e for c in range(meta.num_columns) for e in meta.row_group(0).column(c).encodings}
    assert "RLE_DICTIONARY" not in encodings and "PLAIN_DICTIONARY" not in encodings
    assert pq.read_table(tmp_path / "part-00000-00000.parquet").equals(pa.Table.from_batches([make_batch(0, 50)]))
