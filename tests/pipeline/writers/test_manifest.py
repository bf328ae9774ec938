"""The dataset manifest: round trip, read errors, and verify_manifest's findings.

Expected shard facts come from hashlib, os and pyarrow applied to the files on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokpipe
from tokpipe.errors import FormatError, InvalidArgumentError
from tokpipe.pipeline.writers import (
    MANIFEST_NAME,
    ParquetShardWriter,
    ShardInfo,
    read_manifest,
    verify_manifest,
    write_manifest,
)


def make_batch(start: int, n: int, **extra: list[object]) -> pa.RecordBatch:
    ids = [f"doc-{i:06d}" for i in range(start, start + n)]
    texts = [f"document {i}: " + "lorem ipsum " * (i % 13) for i in range(start, start + n)]
    return pa.record_batch({"id": ids, "text": texts, **extra})


def write_shards(directory: Path, worker: int, batches: list[pa.RecordBatch], shard_size: int) -> list[ShardInfo]:
    shards: list[ShardInfo] = []
    with ParquetShardWriter(directory, worker=worker, shard_size=shard_size) as writer:
        for batch in batches:
            shards += writer.write(batch)
        shards += writer.close()
    return shards


def file_entry(out: Path, rel: str) -> dict[str, object]:
    """A manifest entry computed independently of the writer."""
    path = out / rel
    return {"path": rel, "rows": pq.read_metadata(path).num_rows, "bytes": os.stat(path).st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


class Dataset:
    """A finished output folder: two workers' shards and one worker's rejected shards."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.shards = (write_shards(out, 0, [make_batch(i * 20, 20) for i in range(20)], 8000)
                       + write_shards(out, 1, [make_batch(1000 + i * 20, 20) for i in range(10)], 8000))
        reason = {"reason": ["too_short"] * 6, "stage": ["length"] * 6}
        self.rejected = write_shards(out / "rejected", 0, [make_batch(5000 + i * 6, 6, **reason) for i in range(8)],
                                     1500)
        self.config = {"tokenizer": "gpt2", "shard_size": 8000, "stages": ["length", {"langid": ["en"]}]}
        self.stats = {"documents_in": 540, "documents_out": 600, "seconds": 1.25}

    def write(self, **kwargs: object) -> Path:
        # Shards passed out of order, as workers finishing at different times would report them.
        return write_manifest(self.out, shards=list(reversed(self.shards)), rejected=self.rejected,
                              config=self.config, stats=self.stats, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    data = Dataset(tmp_path / "out")
    assert len(data.shards) > 2 and len(data.rejected) > 1
    return data


def test_round_trip(dataset: Dataset) -> None:
    before = datetime.now(timezone.utc).replace(microsecond=0)
    path = dataset.write(extra={"command": "tokpipe build", "inputs": ["a.jsonl"]})
    after = datetime.now(timezone.utc)
    assert path == dataset.out / MANIFEST_NAME
    manifest = read_manifest(dataset.out)
    assert manifest == json.loads(path.read_text(encoding="utf-8"))

    assert manifest["format"] == "tokpipe-dataset"
    assert manifest["format_version"] == 1
    assert manifest["tokpipe_version"] == tokpipe.__version__
    created = datetime.fromisoformat(manifest["created"])
    assert created.utcoffset() == timedelta(0)
    assert before <= created <= after
    assert manifest["config"] == dataset.config
    assert manifest["stats"] == dataset.stats
    assert manifest["command"] == "tokpipe build"
    assert manifest["inputs"] == ["a.jsonl"]

    kept = sorted(p.name for p in dataset.out.glob("part-*.parquet"))
    dropped = sorted(f"rejected/{p.name}" for p in (dataset.out / "rejected").glob("part-*.parquet"))
    assert manifest["shards"] == [file_entry(dataset.out, rel) for rel in kept]
    assert manifest["rejected"] == [file_entry(dataset.out, rel) for rel in dropped]
    assert manifest["totals"] == {
        "rows": sum(pq.read_metadata(dataset.out / rel).num_rows for rel in kept),
        "bytes": sum(os.stat(dataset.out / rel).st_size for rel in kept),
        "rejected_rows": sum(pq.read_metadata(dataset.out / rel).num_rows for rel in dropped),
    }
    assert manifest["totals"]["rows"] == 600
    assert manifest["totals"]["rejected_rows"] == 48
    # Written atomically: no temp file beside it.
    assert sorted(p.name for p in dataset.out.iterdir() if p.is_file() and not p.name.startswith("part-")) \
        == [MANIFEST_NAME]


def test_rewrite_replaces_manifest(dataset: Dataset) -> None:
    dataset.write()
    dataset.stats = {"documents_out": 1}
    dataset.write()
    assert read_manifest(dataset.out)["stats"] == {"documents_out": 1}


def test_extra_may_not_replace_reserved_keys(dataset: Dataset) -> None:
    with pytest.raises(InvalidArgumentError, match="shards"):
        dataset.write(extra={"shards": []})
    assert not (dataset.out / MANIFEST_NAME).exists()


def test_unserialisable_config_leaves_nothing(dataset: Dataset) -> None:
    dataset.config = {"path": Path("x")}
    with pytest.raises(TypeError):
        dataset.write()
    assert not any(p.name.endswith((".json", ".tmp")) for p in dataset.out.iterdir())


def test_verify_clean(dataset: Dataset) -> None:
    dataset.write()
    assert verify_manifest(dataset.out) == []


def test_verify_catches_a_tampered_byte(dataset: Dataset) -> None:
    dataset.write()
    name = dataset.shards[1].name
    path = dataset.out / name
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01  # same size, different content
    path.write_bytes(bytes(data))
    problems = verify_manifest(dataset.out)
    assert problems and all(name in p for p in problems)
    assert any("sha256" in p for p in problems)


def test_verify_catches_a_truncated_shard(dataset: Dataset) -> None:
    dataset.write()
    name = f"rejected/{dataset.rejected[0].name}"
    path = dataset.out / name
    path.write_bytes(path.read_bytes()[:-10])
    problems = verify_manifest(dataset.out)
    assert any(name in p and "bytes" in p for p in problems)
    assert any(name in p and "sha256" in p for p in problems)
    assert any(name in p and "not a readable Parquet file" in p for p in problems)


def test_verify_catches_a_deleted_shard(dataset: Dataset) -> None:
    dataset.write()
    name = dataset.shards[0].name
    (dataset.out / name).unlink()
    assert verify_manifest(dataset.out) == [f"{name}: listed in the manifest but missing"]


def test_verify_catches_unlisted_shards(dataset: Dataset) -> None:
    dataset.write()
    extra = write_shards(dataset.out, 7, [make_batch(0, 3)], 1 << 20)
    extra_rejected = write_shards(dataset.out / "rejected", 7, [make_batch(0, 3)], 1 << 20)
    problems = verify_manifest(dataset.out)
    assert problems == [
        f"{extra[0].name}: on disk but not listed in the manifest",
        f"rejected/{extra_rejected[0].name}: on disk but not listed in the manifest",
    ]


def test_verify_catches_a_row_count_mismatch(dataset: Dataset) -> None:
    path = dataset.write()
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["shards"][0]["rows"] += 1
    path.write_text(json.dumps(manifest), encoding="utf-8")
    problems = verify_manifest(dataset.out)
    name = manifest["shards"][0]["path"]
    assert any(name in p and "rows in the Parquet footer" in p for p in problems)
    assert any(p.startswith("totals.rows") for p in problems)


def test_read_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_manifest(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"format": "tokpipe-dataset"}',
    ],
)
def test_read_malformed_manifest(tmp_path: Path, text: str) -> None:
    (tmp_path / MANIFEST_NAME).write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=MANIFEST_NAME):
        read_manifest(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.update(format="other"), "format"),
        (lambda m: m.update(format_version=2), "format_version"),
        (lambda m: m.pop("totals"), "totals"),
        (lambda m: m["totals"].pop("rejected_rows"), "rejected_rows"),
        (lambda m: m["shards"][0].pop("sha256"), "sha256"),
        (lambda m: m["shards"][0].update(rows="12"), "rows"),
        (lambda m: m["rejected"][0].update(path="../elsewhere.parquet"), "relative path"),
        (lambda m: m["shards"][0].update(path="/abs/part.parquet"), "relative path"),
    ],
)
def test_read_rejects_bad_fields(dataset: Dataset, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = dataset.write()
    manifest = json.loads(path.read_text(encoding="utf-8"))
    edit(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(FormatError, match=message) as info:
        read_manifest(dataset.out)
    assert str(path) in str(info.value)
    with pytest.raises(FormatError):
        verify_manifest(dataset.out)


def test_loads_with_hugging_face_datasets(dataset: Dataset, tmp_path: Path) -> None:
    import datasets  # in the test extra; imported here because it is slow to import

    dataset.write()
    expected = pa.concat_tables(pq.read_table(dataset.out / s.name) for s in sorted(dataset.shards,
                                                                                     key=lambda s: s.name))
    # data_files, not data_dir: data_dir=OUT would also read manifest.json and rejected/ as
    # data. Rejected rows have two more columns, so they load as a dataset of their own.
    cache = str(tmp_path / "hf-cache")
    kept = datasets.load_dataset("parquet", data_files=str(dataset.out / "part-*.parquet"), cache_dir=cache)
    assert kept["train"].num_rows == expected.num_rows == 600
    assert kept["train"].column_names == ["id", "text"]
    assert sorted(kept["train"]["id"]) == sorted(expected.column("id").to_pylist())
    rejected = datasets.load_dataset("parquet", data_files=str(dataset.out / "rejected" / "part-*.parquet"),
                                     cache_dir=cache)
    assert rejected["train"].column_names == ["id", "text", "reason", "stage"]
    assert rejected["train"].num_rows == 48


def test_shard_folder_loads_with_data_dir(tmp_path: Path) -> None:
    import datasets
    out = tmp_path / "shards"
    batches = [make_batch(i * 20, 20) for i in range(20)]
    write_shards(out, 0, batches, 8000)
    loaded = datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "hf-cache"))
    expected = pa.Table.from_batches(batches)
    assert sorted(loaded["train"]["id"]) == sorted(expected.column("id").to_pylist())
    assert loaded["train"].column_names == ["id", "text"]
