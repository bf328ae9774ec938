"""Helpers the tests of ``tokpipe.pipeline.tokenize`` share: the shuffle's rule and the
expected documents computed independently of the code under test, readers of the output
written from the formats' descriptions, and digests of an output folder.

Expected ids come from tiktoken (the peer), expected orders from the rule the package
documents (splitmix64 of position plus splitmix64 of the seed), computed here in plain Python
integers; nothing expected is produced by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tests.conftest import CORPORA, VOCAB
from tests.parity.peers import tiktoken_encoding
from tokpipe.pipeline.engines import RunOptions
from tokpipe.pipeline.readers import ReaderOptions

GPT2 = str(VOCAB / "gpt2_encoder.json")
M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """Vigna's splitmix64 output function on a 64-bit integer."""
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def expected_order(n: int, seed: int) -> list[int]:
    """Positions sorted by key = splitmix64(position + splitmix64(seed))."""
    offset = splitmix64(seed)
    return sorted(range(n), key=lambda p: splitmix64((p + offset) & M64))


def is_val(position: int, seed: int, fraction: float) -> bool:
    key = splitmix64((position + splitmix64(seed)) & M64)
    return (splitmix64(key ^ 0xD1B54A32D192ED03) >> 11) / float(1 << 53) < fraction


def corpus_records() -> list[dict[str, str]]:
    """Real text: pieces of botchan, Common Crawl documents, and a few empty documents."""
    lines = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    # Pieces of 1 to 20 lines: short and long documents.
    paragraphs, at = [], 0
    while at < len(lines) and len(paragraphs) < 600:
        size = 1 + (len(paragraphs) * 7) % 20
        paragraphs.append("".join(lines[at:at + size]))
        at += size
    records = [{"id": f"b{i}", "text": p} for i, p in enumerate(paragraphs)]
    import gzip

    with gzip.open(CORPORA / "web" / "cc_en_head-0091.jsonl.gz", "rt", encoding="utf-8") as f:
        records += [{"id": f"c{i}", "text": json.loads(line)["text"]} for i, line in enumerate(f)]
    for i in (3, 50, 333):
        records.insert(i, {"id": f"empty{i}", "text": ""})
    return records


def run_options(workers: int = 1, **kw: object) -> RunOptions:
    return RunOptions(workers=workers, reader=ReaderOptions(task_bytes=16 << 10), **kw)  # type: ignore[arg-type]


def expected_docs(records: list[dict[str, str]], eos: int | None = 50256) -> list[tuple[str, list[int]]]:
    """(id, tiktoken ids + EOS) of every document with tokens, in input order."""
    enc = tiktoken_encoding("gpt2")
    out = []
    for r in records:
        ids = enc.encode_ordinary(r["text"])
        if ids:
            out.append((r["id"], ids + ([eos] if eos is not None else [])))
    return out


def read_megatron(prefix: Path) -> tuple[np.dtype, list[np.ndarray]]:
    """A reader written from the format description: header, then int32 lengths, int64 byte
    pointers and int64 document index, over a memory map of the .bin."""
    raw = prefix.with_suffix(".idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack("<Q", raw[9:17])
    assert version == 1
    code = raw[17]
    dtype = {8: np.dtype("<u2"), 4: np.dtype("<i4")}[code]
    sequences, documents = struct.unpack("<QQ", raw[18:34])
    at = 34
    lengths = np.frombuffer(raw, dtype="<i4", count=sequences, offset=at)
    at += 4 * sequences
    pointers = np.frombuffer(raw, dtype="<i8", count=sequences, offset=at)
    at += 8 * sequences
    doc_index = np.frombuffer(raw, dtype="<i8", count=documents, offset=at)
    assert at + 8 * documents == len(raw)
    assert doc_index.tolist() == list(range(sequences + 1))
    data = np.memmap(prefix.with_suffix(".bin"), dtype=np.uint8, mode="r")
    # The sequences need not be in .bin order, but they tile it: each byte is in exactly one.
    order = np.argsort(pointers, kind="stable")
    ends = pointers[order] + lengths[order].astype(np.int64) * dtype.itemsize
    assert (pointers[order][1:] == ends[:-1]).all() and (not len(ends) or (pointers[order][0] == 0 and ends[-1] == len(data)))
    docs = [np.frombuffer(data, dtype=dtype, count=int(n), offset=int(p)) for n, p in zip(lengths, pointers)]
    return dtype, docs


def read_documents(out: Path, split: str) -> list[tuple[str, list[int]]]:
    table = pq.read_table(sorted((out / split).glob("part-*.parquet")))
    return list(zip(table.column("id").to_pylist(), table.column("input_ids").to_pylist()))


def digest(out: Path) -> dict[str, str]:
    """sha256 of every output file (not the staging, not the manifest's run details nor the
    dataset card made from them)."""
    files = sorted(p for p in out.rglob("*")
                   if p.is_file() and ".tokpipe" not in p.parts and p.name not in ("manifest.json", "README.md"))
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def recorded(out: Path) -> dict[str, str]:
    """The sha256 the manifest records for each file, checked against its recorded size."""
    files = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["files"]
    assert all((out / e["path"]).stat().st_size == e["bytes"] for e in files)
    return {e["path"]: e["sha256"] for e in files}
