"""What ``tokpipe tokenize`` is asked for (:class:`TokenizeOptions`), what it returns
(:class:`TokenizeResult`), and its output folder's format (the manifest's ``format``)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tokpipe.errors import ConfigError
from tokpipe.pipeline import fs
from tokpipe.storage import Location, location
from tokpipe.pipeline.base import StageStats
from tokpipe.pipeline.writers import MANIFEST_NAME

__all__ = ["TokenizeOptions", "TokenizeResult", "FORMAT", "FORMAT_VERSION", "SPLITS", "DOCUMENTS_DIR", "MEGATRON_DIR",
           "read_tokenized_manifest"]

FORMAT = "tokpipe-tokenized"
#: 2: each split's documents file in ``documents/`` (``documents_file``) and its Megatron pair
#: in ``megatron/``, so that a split's folder holds its Parquet shards alone; 1 had both in
#: the split's folder (still read: the manifest names them).
FORMAT_VERSION = 2
SPLITS = ("train", "val")
#: Folder of each split's ``id`` and ``length`` per document (``documents/train.parquet``).
DOCUMENTS_DIR = "documents"
#: Folder of each split's Megatron pair (``megatron/train.bin``, ``.idx``).
MEGATRON_DIR = "megatron"
_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class TokenizeOptions:
    tokenizer: str
    formats: tuple[str, ...] = ("parquet",)
    append_eos: bool = True
    eos_token: str | None = None
    seq_len: int | None = None
    pack: bool = False
    truncate: bool = False
    pad_tail: bool = False
    shuffle: bool = True
    seed: int = 0
    val_fraction: float = 0.0
    #: Bytes the shuffle may hold in memory for one key range: its index of documents (about
    #: 80 bytes each), or its token ids when the staging is spilled to buckets.
    shuffle_buffer: int = 256 << 20
    threads: int | None = None

    def __post_init__(self) -> None:
        unknown = set(self.formats) - {"parquet", "megatron"}
        if unknown or not self.formats:
            raise ConfigError(f"formats must be parquet and/or megatron, not {', '.join(sorted(unknown)) or 'none'}")
        if (self.pack or self.truncate) and not self.seq_len:
            raise ConfigError("packing and truncation need a sequence length (--seq-len N)")
        if self.seq_len is not None and self.seq_len < 1:
            raise ConfigError(f"seq_len must be at least 1, not {self.seq_len}")
        if self.pad_tail and not self.pack:
            raise ConfigError("pad_tail only applies to packed rows (--pack)")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction must be in [0, 1), not {self.val_fraction}")
        if not 0 <= self.seed <= _MASK:
            raise ConfigError(f"the seed must be in [0, 2**64), not {self.seed}")

    def global_params(self) -> dict[str, Any]:
        """What phase 2 depends on (phase 1 depends on the tokenize stage's params)."""
        params = asdict(self)
        for name in ("tokenizer", "append_eos", "eos_token", "threads"):
            params.pop(name)
        params["formats"] = list(self.formats)
        return params


@dataclass
class TokenizeResult:
    out_dir: Location
    manifest: dict[str, Any]
    stats: dict[str, StageStats] = field(default_factory=dict)
    tasks_run: int = 0
    #: The run's wall time, its earlier calls included (the manifest's ``wall_seconds``),
    #: when this call was not the whole run (a resume, a rerun); None when it was.
    run_wall_seconds: float | None = None


def read_tokenized_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest of a ``tokpipe tokenize`` output folder, or None for another folder."""
    path = location(out_dir) / MANIFEST_NAME
    if not fs.exists(path):
        return None
    manifest: dict[str, Any] = fs.read_json(path)
    return manifest if manifest.get("format") == FORMAT else None
