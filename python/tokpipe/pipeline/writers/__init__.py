"""Writers of the data pipeline: Parquet or JSON Lines shards (kept and rejected documents) and
the manifest.

The public names::

    ParquetShardWriter  record batches to size-bounded, atomically published Parquet shards
    JsonlShardWriter    the same, to JSON Lines shards (.jsonl, .jsonl.gz, .jsonl.zst)
    OUTPUT_FORMATS      the formats of clean's final shards: parquet, jsonl, jsonl.gz, jsonl.zst
    shard_suffix        an output format's file suffix (".parquet", ".jsonl.gz", ...)
    ShardInfo           one completed shard: name, rows, bytes, sha256
    write_manifest      OUT/manifest.json listing every shard, written last and atomically
    read_manifest       read and check a manifest (FormatError when malformed)
    verify_manifest     compare a dataset folder with its manifest; the problems found
    MANIFEST_NAME       "manifest.json"
    hash_path           a file's size and sha256, read once
"""

from __future__ import annotations

from tokpipe.pipeline.writers._files import hash_path
from tokpipe.pipeline.writers.jsonl import OUTPUT_FORMATS, JsonlShardWriter, shard_suffix
from tokpipe.pipeline.writers.manifest import MANIFEST_NAME, read_manifest, verify_manifest, write_manifest
from tokpipe.pipeline.writers.parquet import ParquetShardWriter, ShardInfo

__all__ = [
    "ParquetShardWriter",
    "JsonlShardWriter",
    "OUTPUT_FORMATS",
    "shard_suffix",
    "ShardInfo",
    "MANIFEST_NAME",
    "write_manifest",
    "read_manifest",
    "verify_manifest",
    "hash_path",
]
