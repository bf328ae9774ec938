"""Writers of the data pipeline: Parquet shards (kept and rejected documents) and the manifest.

The public names::

    ParquetShardWriter  record batches to size-bounded, atomically published Parquet shards
    ShardInfo           one completed shard: name, rows, bytes, sha256
    write_manifest      OUT/manifest.json listing every shard, written last and atomically
    read_manifest       read and check a manifest (FormatError when malformed)
    verify_manifest     compare a dataset folder with its manifest; the problems found
    MANIFEST_NAME       "manifest.json"
    hash_path           a file's size and sha256, read once
"""

from __future__ import annotations

from tokpipe.pipeline.writers._files import hash_path
from tokpipe.pipeline.writers.manifest import MANIFEST_NAME, read_manifest, verify_manifest, write_manifest
from tokpipe.pipeline.writers.parquet import ParquetShardWriter, ShardInfo

__all__ = [
    "ParquetShardWriter",
    "ShardInfo",
    "MANIFEST_NAME",
    "write_manifest",
    "read_manifest",
    "verify_manifest",
    "hash_path",
]
