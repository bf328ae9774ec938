"""The manifests of output folders, and the checks of a folder against its manifest.

``tokpipe clean``'s dataset manifest: ``OUT/manifest.json`` lists every shard with its rows,
size and hash. It is written last, atomically, once every shard is published, so its presence
means the run finished; ``verify_manifest`` then checks the folder against it (a shard
missing, changed or truncated, a row count that disagrees with the Parquet footer or with the
lines of a JSON Lines shard, or a shard on disk that the manifest does not list). Shard paths
are relative to ``OUT`` and use ``/``: the kept documents' shards live under ``OUT/data/``
(``DATA_DIR``; an older tokpipe wrote them in ``OUT`` itself, and its manifest says so), the
rejected documents' under ``OUT/rejected/``, so that each folder holds one table that plain
tools (``pyarrow.dataset``, HF ``datasets``) open without options. A run with
``rejected_by_stage`` puts each stage's drops in a folder of their own,
``OUT/rejected/STAGE/``: the entry of such a shard also records ``stage``, its folder's name.

``verify_tokenized`` checks a ``tokpipe tokenize`` folder against its manifest (which
``pipeline.tokenize`` writes) with the same file checks (``check_file``,
``check_parquet_rows``).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Optional, Union

import pyarrow.parquet as pq

from tokpipe import __version__
from tokpipe.errors import FormatError, InvalidArgumentError
from tokpipe.pipeline import fs
from tokpipe.storage import Location, location
from tokpipe.pipeline.writers._files import hash_path, publish, temp_name
from tokpipe.pipeline.writers.jsonl import JSONL_FORMATS, OUTPUT_FORMATS, count_lines
from tokpipe.pipeline.writers.megatron import MAGIC
from tokpipe.pipeline.writers.parquet import ShardInfo

__all__ = ["MANIFEST_NAME", "ERRORS_NAME", "FORMAT", "FORMAT_VERSION", "DATA_DIR", "REJECTED_DIR", "write_manifest",
           "build_manifest", "publish_manifest", "read_manifest", "verify_manifest", "check_file",
           "check_parquet_rows", "check_jsonl_rows", "is_plain_relative", "verify_tokenized",
           "tokenized_documents_path"]

StrPath = Union[str, "os.PathLike[str]"]

MANIFEST_NAME = "manifest.json"
#: The unreadable inputs, one JSON line each (beside the manifest, for every kind of run).
ERRORS_NAME = "errors.jsonl"
FORMAT = "tokpipe-dataset"
FORMAT_VERSION = 1
#: Sub-folder of ``OUT`` holding the kept documents' shards (``tokpipe clean``).
DATA_DIR = "data"
#: Sub-folder of ``OUT`` holding the rejected documents' shards.
REJECTED_DIR = "rejected"

# Every key write_manifest sets; ``extra`` may not override them.
_KEYS = ("format", "format_version", "tokpipe_version", "created", "config", "stats", "shards", "rejected",
         "totals")
_ENTRY_KEYS = {"path": str, "rows": int, "bytes": int, "sha256": str}
_TOTAL_KEYS = ("rows", "bytes", "rejected_rows")


def _entry(path: str, shard: ShardInfo) -> dict[str, Any]:
    return {"path": path, "rows": shard.rows, "bytes": shard.bytes, "sha256": shard.sha256}


def _rejected_entry(shard: ShardInfo) -> dict[str, Any]:
    """A rejected shard's entry; one in a stage's folder (``STAGE/part-...``) names its stage."""
    entry = _entry(f"{REJECTED_DIR}/{shard.name}", shard)
    if "/" in shard.name:
        entry["stage"] = shard.name.split("/", 1)[0]
    return entry


def write_manifest(
    out_dir: StrPath,
    *,
    shards: Sequence[ShardInfo],
    rejected: Sequence[ShardInfo],
    config: dict[str, Any],
    stats: dict[str, Any],
    extra: Optional[dict[str, Any]] = None,
) -> Path:
    """Write ``out_dir/manifest.json`` atomically and return its path.

    ``shards`` are named relative to ``out_dir``, ``rejected`` relative to
    ``out_dir/rejected`` (as their writers report them); both lists are stored sorted by path.
    ``extra`` adds top-level keys; it may not replace one of the keys set here.
    """
    manifest = build_manifest(shards=shards, rejected=rejected, config=config, stats=stats, extra=extra)
    return publish_manifest(out_dir, manifest)


def build_manifest(
    *,
    shards: Sequence[ShardInfo],
    rejected: Sequence[ShardInfo],
    config: dict[str, Any],
    stats: dict[str, Any],
    extra: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """The manifest :func:`write_manifest` writes, as a dict (what the dataset card is made
    from before the manifest is published: see :func:`publish_manifest`)."""
    extra = dict(extra or {})
    clash = sorted(set(extra) & set(_KEYS))
    if clash:
        raise InvalidArgumentError(f"extra manifest keys clash with reserved keys: {', '.join(clash)}")
    kept = sorted((_entry(s.name, s) for s in shards), key=lambda e: e["path"])
    dropped = sorted((_rejected_entry(s) for s in rejected), key=lambda e: e["path"])
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "tokpipe_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": config,
        "stats": stats,
        "shards": kept,
        "rejected": dropped,
        "totals": {
            "rows": sum(e["rows"] for e in kept),
            "bytes": sum(e["bytes"] for e in kept),
            "rejected_rows": sum(e["rows"] for e in dropped),
        },
        **extra,
    }
    return manifest


def publish_manifest(out_dir: StrPath, manifest: dict[str, Any]) -> Path:
    """Write ``manifest`` (from :func:`build_manifest`) to ``out_dir/manifest.json``
    atomically and return its path: written last, it says the run finished."""
    out = location(out_dir)
    # Serialise before touching the disk so a non-JSON value in config/stats fails cleanly.
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    path = out / MANIFEST_NAME
    tmp = temp_name(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path  # type: ignore[return-value]


def _check_entries(path: Path, key: str, value: Any) -> None:
    if not isinstance(value, list):
        raise FormatError(f"{path}: '{key}' must be a list")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise FormatError(f"{path}: {key}[{i}] must be an object")
        for field, kind in _ENTRY_KEYS.items():
            # bool is an int subclass; a true/false row count is still malformed.
            if field not in entry or not isinstance(entry[field], kind) or isinstance(entry[field], bool):
                raise FormatError(f"{path}: {key}[{i}].{field} missing or not a {kind.__name__}")
        # Paths are read back by verify_manifest: one pointing outside the folder is refused.
        if not is_plain_relative(entry["path"]):
            raise FormatError(f"{path}: {key}[{i}].path {entry['path']!r} is not a plain relative path")


def is_plain_relative(rel: str) -> bool:
    """Whether a path from a manifest (``/``-separated, relative to the output folder) stays
    inside that folder: not absolute, no ``..``, no backslash, not empty."""
    parts = PurePosixPath(rel)
    return bool(parts.parts) and not parts.is_absolute() and ".." not in parts.parts and "\\" not in rel


def read_manifest(out_dir: StrPath) -> dict[str, Any]:
    """Read and check ``out_dir/manifest.json``.

    A missing file raises ``FileNotFoundError``; bad JSON, a missing or mistyped key, or an
    unknown format raises ``FormatError`` naming the file.
    """
    path = location(out_dir) / MANIFEST_NAME
    raw = fs.read_bytes(path)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(manifest, dict):
        raise FormatError(f"{path}: top level must be an object")
    missing = [k for k in _KEYS if k not in manifest]
    if missing:
        raise FormatError(f"{path}: missing keys: {', '.join(missing)}")
    if manifest["format"] != FORMAT:
        raise FormatError(f"{path}: format is {manifest['format']!r}, expected {FORMAT!r}")
    if manifest["format_version"] != FORMAT_VERSION:
        raise FormatError(f"{path}: unsupported format_version {manifest['format_version']!r}")
    for key in ("config", "stats", "totals"):
        if not isinstance(manifest[key], dict):
            raise FormatError(f"{path}: '{key}' must be an object")
    for key in _TOTAL_KEYS:
        if not isinstance(manifest["totals"].get(key), int):
            raise FormatError(f"{path}: totals.{key} missing or not an integer")
    _check_entries(path, "shards", manifest["shards"])
    _check_entries(path, "rejected", manifest["rejected"])
    return manifest


def check_file(out: Location, rel: str, size: Optional[int], sha256: Optional[str]) -> list[str]:
    """A published file (``rel`` from ``out``) against the size and sha256 a manifest records
    for it (``None``: not recorded, not checked): one line per problem, naming the file."""
    path = out / rel
    if not fs.is_file(path):
        return [f"{rel}: listed in the manifest but missing"]
    problems = []
    on_disk = fs.size(path)
    if size is not None and on_disk != size:
        problems.append(f"{rel}: {on_disk} bytes on disk, manifest says {size}")
    if sha256:
        digest = hash_path(path)[1]
        if digest != sha256:
            problems.append(f"{rel}: sha256 {digest} on disk, manifest says {sha256}")
    return problems


def check_parquet_rows(out: Location, rel: str, expected: int, what: str = "rows") -> list[str]:
    """A Parquet file's row count, from its footer alone (no column data is read), against
    the manifest's ``expected`` (of ``what``); nothing for a missing file (``check_file``
    reports it)."""
    path = out / rel
    if not fs.is_file(path):
        return []
    try:
        with fs.parquet_file(path) as parquet:
            rows = parquet.metadata.num_rows
    except Exception as e:  # noqa: BLE001 - any failure to parse the footer is the finding itself
        return [f"{rel}: not a readable Parquet file ({' '.join(str(e).split())[:200]})"]
    return [] if rows == expected else [f"{rel}: {rows} rows in the Parquet footer, manifest says {expected} {what}"]


def check_jsonl_rows(out: Location, rel: str, expected: int) -> list[str]:
    """A JSON Lines shard's rows (its lines, decompressed for ``.gz`` and ``.zst``; the
    whole file is read) against the manifest's ``expected``; nothing for a missing file
    (``check_file`` reports it)."""
    path = out / rel
    if not fs.is_file(path):
        return []
    try:
        rows = count_lines(path)
    except Exception as e:  # noqa: BLE001 - a stream that does not decompress is the finding itself
        return [f"{rel}: not a readable JSON Lines file ({' '.join(str(e).split())[:200]})"]
    return [] if rows == expected else [f"{rel}: {rows} lines in the file, manifest says {expected} rows"]


def _check_shard_rows(out: Location, rel: str, expected: int) -> list[str]:
    if any(rel.endswith(f".{name}") for name in JSONL_FORMATS):
        return check_jsonl_rows(out, rel, expected)
    return check_parquet_rows(out, rel, expected)


def verify_manifest(out_dir: StrPath) -> list[str]:
    """Check ``out_dir`` against its manifest; return the problems found (``[]`` when all is well).

    Reported: a listed shard missing, of the wrong size or sha256, or whose Parquet footer (or,
    for a JSON Lines shard, whose number of lines) gives another row count; a path listed
    twice; totals that disagree with the entries; and a shard (``part-*.parquet``,
    ``part-*.jsonl[.gz|.zst]``) in ``out_dir``, ``out_dir/data``, ``out_dir/rejected`` or a
    stage's folder in it that the manifest does not list.
    A manifest that cannot be read raises as ``read_manifest`` does.
    """
    out = location(out_dir)
    manifest = read_manifest(out)
    problems: list[str] = []
    listed: set[str] = set()
    for key in ("shards", "rejected"):
        for entry in manifest[key]:
            if entry["path"] in listed:
                problems.append(f"{entry['path']}: listed more than once")
                continue
            listed.add(entry["path"])
            problems += check_file(out, entry["path"], entry["bytes"], entry["sha256"])
            problems += _check_shard_rows(out, entry["path"], entry["rows"])
    totals = manifest["totals"]
    for total, key, field in (("rows", "shards", "rows"), ("bytes", "shards", "bytes"),
                              ("rejected_rows", "rejected", "rows")):
        summed = sum(e[field] for e in manifest[key])
        if totals[total] != summed:
            problems.append(f"totals.{total} is {totals[total]}, the {key} entries sum to {summed}")
    on_disk = set()
    suffixes = tuple(f".{name}" for name in OUTPUT_FORMATS)
    # The stage folders of rejected/ (a shard's name spares the check, a request in a bucket).
    stages = [f"{REJECTED_DIR}/{p.name}" for p in fs.listing(out / REJECTED_DIR)
              if not p.name.endswith(suffixes) and fs.is_dir(p)]
    for name in OUTPUT_FORMATS:
        on_disk |= {p.name for p in fs.listing(out, f"part-*.{name}")}
        for folder in (DATA_DIR, REJECTED_DIR, *stages):
            on_disk |= {f"{folder}/{p.name}" for p in fs.listing(out / folder, f"part-*.{name}")}
    for rel in sorted(on_disk):
        if rel not in listed:
            problems.append(f"{rel}: on disk but not listed in the manifest")
    return problems


# ---------------------------------------------------------------------------------------------
# tokpipe tokenize's output (its manifest is written by ``pipeline.tokenize``).


def tokenized_documents_path(manifest: dict[str, Any], split: str) -> str:
    """Where (from OUT, with ``/``) a split's ``id`` and ``length`` per document are: the
    manifest's ``documents_file`` (``documents/train.parquet``), or, in a folder an older
    tokpipe wrote, ``train/documents.parquet`` beside the shards."""
    path: str = manifest["splits"][split].get("documents_file", f"{split}/documents.parquet")
    return path


def _published_paths(manifest: dict[str, Any]) -> list[str]:
    """Every file a run publishes, as its manifest describes the run (paths from OUT, with
    ``/``), whether or not the manifest records its digest."""
    paths = [ERRORS_NAME]
    for name, split in manifest["splits"].items():
        paths += [entry["path"] for entry in split.get("parquet", [])]
        paths.append(tokenized_documents_path(manifest, name))
        if split.get("megatron") is not None:
            paths += [f"{split['megatron']['prefix']}.bin", f"{split['megatron']['prefix']}.idx"]
    return paths


def _check_digest(out: Location, rel: str, entry: dict[str, Any], version: str) -> list[str]:
    """A published file against its size and sha256 in the manifest; a file an older
    tokpipe recorded no sha256 for is "not verified", a problem too."""
    problems = check_file(out, rel, entry.get("bytes"), entry.get("sha256"))
    if not problems and not entry.get("sha256"):
        problems.append(f"{rel}: not verified: the manifest (tokpipe {version}) records no sha256 for it; "
                        "rerun the same `tokpipe tokenize` command to record the digests")
    return problems


def verify_tokenized(out_dir: str | os.PathLike[str], manifest: dict[str, Any]) -> list[str]:
    """Check a tokenized folder against its manifest; return the problems found, one line
    each naming the file (``[]`` when all is well).

    Every published file (``_published_paths``: the Parquet shards, each split's documents
    file, Megatron ``.bin`` and ``.idx``, ``errors.jsonl``) must exist with the size and
    sha256 the manifest's ``files`` records; the Parquet footers' row counts and the
    ``.idx`` header's sequence count must agree with the manifest; and no other file may sit
    in a folder of published files (``train/``, ``documents/``...: a loader globbing
    ``part-*.parquet``, or opening the folder, would read it). A manifest from a tokpipe that
    recorded no digests (no ``files``) still has the shards' digests and the ``.bin``'s size
    checked; every other file is reported as "not verified", a problem: such a folder is
    never called verified."""
    out = location(out_dir)
    version = str(manifest.get("tokpipe_version"))
    problems: list[str] = []
    recorded: dict[str, dict[str, Any]] = {entry["path"]: entry for entry in manifest.get("files", [])}
    for split in manifest["splits"].values():
        # Older manifests: the shards had their digests already, the .bin its size.
        for entry in split.get("parquet", []):
            recorded.setdefault(entry["path"], entry)
        if split.get("megatron") is not None:
            recorded.setdefault(f"{split['megatron']['prefix']}.bin", {"bytes": split["megatron"]["bin_bytes"]})
    paths = dict.fromkeys([*_published_paths(manifest), *recorded])
    for rel in paths:
        if not is_plain_relative(rel):
            problems.append(f"manifest.json: {rel[:200]!r} is not a plain relative path")
            continue
        problems.extend(_check_digest(out, rel, recorded.get(rel, {}), version))
    for name, split in manifest["splits"].items():
        if not is_plain_relative(name):
            continue
        for entry in split.get("parquet", []):
            if is_plain_relative(entry["path"]):
                problems.extend(check_parquet_rows(out, entry["path"], entry["rows"]))
        documents = tokenized_documents_path(manifest, name)
        if is_plain_relative(documents):
            problems.extend(check_parquet_rows(out, documents, split["documents"], "documents"))
        megatron = split.get("megatron")
        idx = f"{megatron['prefix']}.idx" if megatron is not None else ""
        if megatron is not None and is_plain_relative(idx) and fs.is_file(out / idx):
            with fs.open_read(out / idx) as f:
                header = f.read(34)
            if len(header) < 34 or header[:9] != MAGIC:
                problems.append(f"{idx}: not a Megatron index")
            else:
                sequences, _ = struct.unpack("<QQ", header[18:34])
                if sequences != megatron["documents"]:
                    problems.append(f"{idx}: {sequences} sequences, manifest says {megatron['documents']}")
    folders = {*(name for name in manifest["splits"] if is_plain_relative(name)),
               *(rel.rsplit("/", 1)[0] for rel in paths if "/" in rel and is_plain_relative(rel))}
    for folder in sorted(folders):
        if fs.is_dir(out / folder):
            for path in sorted(fs.listing(out / folder)):
                rel = f"{folder}/{path.name}"
                if not path.name.startswith(".") and rel not in paths:
                    problems.append(f"{rel}: on disk but not listed in the manifest")
    return problems
