"""``paragraph_dedup`` against a plain-Python reference of CCNet's paragraph dedup: its
``normalize_for_dedup`` and ``str_hash`` (cc_net/text_normalizer.py, cc_net/dedup.py) written
out from their published rule, with the one documented difference (blank lines are kept)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import tokpipe.pipeline as pipeline
from tokpipe.pipeline.stages import ParagraphDedup

# CCNet's UNICODE_PUNCT keys and its non-printing characters.
UNICODE_PUNCT = "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►"
NON_PRINTING = "".join(map(chr, list(range(0, 32)) + list(range(127, 160))))
PUNCT_OR_NON_PRINTING = re.compile("[" + re.escape(UNICODE_PUNCT + NON_PRINTING) + "]")


def normalize_for_dedup(line: str) -> str:
    line = line.strip()
    if not line:
        return line
    line = line.lower()
    line = re.sub(r"\d", "0", line)
    return PUNCT_OR_NON_PRINTING.sub("", line)


def str_hash(s: str) -> int:
    return int(np.frombuffer(hashlib.sha1(s.encode()).digest()[:8], dtype=np.uint64)[0])


def reference(texts: list[str]) -> tuple[list[str | None], int, int]:
    """Each text after dedup (None when dropped), paragraphs removed, bytes removed."""
    seen: set[int] = set()
    out: list[str | None] = []
    removed = removed_bytes = 0
    for text in texts:
        kept, non_blank, kept_non_blank = [], 0, 0
        for line in text.split("\n"):
            norm = normalize_for_dedup(line)
            if not norm:
                kept.append(line)
                continue
            non_blank += 1
            h = str_hash(norm)
            if h in seen:
                removed += 1
                removed_bytes += len(line.encode())
            else:
                seen.add(h)
                kept.append(line)
                kept_non_blank += 1
        out.append(None if non_blank and not kept_non_blank else "\n".join(kept))
    return out, removed, removed_bytes


def corpus(documents: list[tuple[str, str]]) -> list[str]:
    """Real documents, then documents stitched from their lines with case, digit, spacing and
    CJK-punctuation changes CCNet's normalisation erases, and some fresh lines."""
    texts = [t[:30_000] for _, t in documents[:40]]
    lines = [line for t in texts for line in t.split("\n") if line.strip()]
    stitched = []
    for k in range(15):
        picked = lines[k * 37 % len(lines): k * 37 % len(lines) + 6]
        p, q = picked[4], picked[5]
        variants = ["  " + p.upper() + " ", re.sub(r"\d", "7", q), q + "！", "fresh line %d" % k]
        stitched.append("\n".join(picked[:3] + variants + ["", picked[3]]))
    stitched.append("\n".join(lines[:5]))  # nothing new: dropped
    stitched.append("\n\n")                 # blank only: kept as is
    return texts + stitched


def run_stage(tasks: list[list[str]]) -> tuple[list[str | None], ParagraphDedup]:
    stage = ParagraphDedup()
    decisions = stage.decide([stage.keys(pa.record_batch({"text": pa.array(t, pa.string())})) for t in tasks])
    out: list[str | None] = []
    for task, decision in zip(tasks, decisions):
        batch = pa.record_batch({"text": pa.array(task, pa.string())})
        revised, reasons = stage.revise(batch, decision.columns)
        for text, reason in zip(revised.column("text").to_pylist(), reasons):
            out.append(None if reason else text)
    return out, stage


def test_matches_the_ccnet_reference(documents: list[tuple[str, str]]) -> None:
    texts = corpus(documents)
    expected, removed, removed_bytes = reference(texts)
    tasks = [texts[:13], texts[13:14], [], texts[14:]]
    got, stage = run_stage(tasks)
    assert got == expected
    assert removed > 50 and expected.count(None) >= 1
    extra = stage.stats.extra
    assert (extra["paragraphs_removed"], extra["bytes_removed"]) == (removed, removed_bytes)
    assert stage.stats.dropped["duplicate_paragraphs"] == expected.count(None)


def test_through_the_executor(documents: list[tuple[str, str]], tmp_path: Path) -> None:
    texts = corpus(documents)
    expected, removed, _ = reference(texts)
    root = tmp_path / "in"
    root.mkdir()
    for n in range(3):
        part = range(n * 20, min(len(texts), (n + 1) * 20))
        (root / f"part{n}.jsonl").write_text("".join(json.dumps({"id": f"d{i:03d}", "text": texts[i]}) + "\n"
                                                     for i in part), encoding="utf-8")
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        result = pipeline.run([root], out, config={"stages": [{"type": "paragraph_dedup"}]}, workers=workers)
        kept = {r["id"]: r["text"] for r in pq.read_table(sorted(out.glob("data/part-*.parquet"))).to_pylist()}
        assert kept == {f"d{i:03d}": t for i, t in enumerate(expected) if t is not None}
        rejected = pq.read_table(sorted(out.glob("rejected/part-*.parquet"))).to_pylist()
        assert [(r["id"], r["text"], r["reason"]) for r in rejected] == \
            [(f"d{i:03d}", texts[i], "duplicate_paragraphs") for i, t in enumerate(expected) if t is None]
        stats = result.stats["paragraph_dedup"].as_dict()
        assert stats["paragraphs_removed"] == removed and stats["kept"] == len(kept)
