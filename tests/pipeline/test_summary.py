"""``tokpipe.pipeline.summary``: the funnel and drop reasons of a manifest.

Two kinds of check: a hand-written manifest whose expected numbers are worked out here by
hand, and real ``clean``/``tokenize`` runs on a generated corpus whose expected counts come
from what the test wrote and from the Parquet files (read with pyarrow), never from tokpipe's
own summaries.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tokpipe.pipeline import run
from tokpipe.pipeline.summary import (UNATTRIBUTED, byte_size, drop_reasons, funnel, overview, pii_counts,
                                      pipeline_stages, run_kind)

HAND = {
    "format": "tokpipe-dataset",
    "config": {"stages": [{"type": "length_filter", "min": 20}, {"type": "exact_dedup"}, {"type": "pii"}]},
    "stats": {
        "read": {"in": 100, "kept": 100, "seconds": 0.0},
        "length_filter": {"in": 100, "kept": 80, "dropped_too_short": 15, "dropped_too_long": 5, "seconds": 1.5},
        # Counts that disagree: 10 dropped, reasons for 6 (the rest must still show).
        "exact_dedup": {"in": 80, "kept": 70, "dropped_duplicate": 6, "seconds": 0.5},
        "pii": {"in": 70, "kept": 70, "pii_email": 3, "pii_phone": 0, "pii_ids_hashed": 9, "seconds": 0.1},
    },
    "shards": [{"path": "a.parquet", "rows": 40, "bytes": 1000}, {"path": "b.parquet", "rows": 30, "bytes": 500}],
    "rejected": [{"path": "rejected/a.parquet", "rows": 30, "bytes": 300}],
    "totals": {"rows": 70, "bytes": 1500, "rejected_rows": 30},
    "inputs": ["corpus/"],
    "errors": 2,
}


def test_funnel_of_a_hand_written_manifest() -> None:
    steps = funnel(HAND)
    assert [(s.stage, s.documents_in, s.kept, s.dropped) for s in steps] == [
        ("read", 100, 100, 0), ("length_filter", 100, 80, 20), ("exact_dedup", 80, 70, 10), ("pii", 70, 70, 0)]
    assert [s.share_kept for s in steps] == [1.0, 0.8, 0.7, 0.7]
    assert steps[1].share_dropped == 0.2 and steps[2].share_dropped == 10 / 80
    assert steps[1].seconds == 1.5 and steps[1].tokens is None


def test_drop_reasons_largest_first_and_none_hidden() -> None:
    reasons = [(r.stage, r.reason, r.count) for r in drop_reasons(HAND)]
    assert reasons == [("length_filter", "too_short", 15), ("length_filter", "too_long", 5),
                       ("exact_dedup", "duplicate", 6), ("exact_dedup", UNATTRIBUTED, 4)]
    first = drop_reasons(HAND)[0]
    assert (first.share_of_stage, first.share_of_input) == (0.15, 0.15)
    assert drop_reasons(HAND)[2].share_of_stage == 6 / 80


def test_overview_and_pii() -> None:
    o = overview(HAND)
    assert (o.kind, o.documents_read, o.documents_kept, o.documents_rejected, o.unreadable) == ("clean", 100, 70, 30, 2)
    assert (o.kept_bytes, o.rejected_bytes, o.shards, o.tokens, o.inputs) == (1500, 300, 2, None, ("corpus/",))
    assert pii_counts(HAND) == {"email": 3, "phone": 0}
    assert [name for name, _ in pipeline_stages(HAND)] == ["length_filter", "exact_dedup", "pii"]
    assert pipeline_stages(HAND)[0][1] == {"min": 20}


def test_an_empty_manifest_gives_zeros_not_errors() -> None:
    empty = {"format": "tokpipe-dataset", "stats": {"read": {"in": 0, "kept": 0}}}
    assert funnel(empty)[0].share_kept == 0.0
    assert drop_reasons(empty) == [] and pii_counts(empty) == {}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict]]:
    """A clean run (too short, duplicates) and a tokenize run over its output."""
    root = tmp_path_factory.mktemp("summary")
    records = []
    for i in range(60):
        if i % 10 == 0:
            text = "short"  # 6 of these: under the 20-character minimum
        elif i % 10 == 1:
            text = "the same text repeated in several documents, a duplicate"
        else:
            text = f"document number {i} with enough words to pass every rule here"
        records.append({"id": f"d{i}", "text": text})
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + "{broken\n",
                                       encoding="utf-8")
    clean = root / "clean"
    run([root / "corpus.jsonl"], clean, config={"stages": [{"type": "length_filter", "min": 20, "unit": "chars"},
                                                           {"type": "exact_dedup"}]}, workers=1)
    return root, clean, records


def test_summary_of_a_real_clean_run(outputs: tuple[Path, Path, list[dict]]) -> None:
    _, clean, records = outputs
    manifest = json.loads((clean / "manifest.json").read_text(encoding="utf-8"))
    kept = sum(pq.read_metadata(p).num_rows for p in clean.glob("data/part-*.parquet"))
    rejected = pq.read_table(sorted((clean / "rejected").glob("*.parquet")), columns=["stage", "reason"]).to_pylist()
    # From what the test wrote: 6 short texts, 6 copies of one text (5 duplicates).
    assert kept == 60 - 6 - 5 and len(rejected) == 11
    by_reason = Counter((r["stage"], r["reason"]) for r in rejected)
    # An unreadable record is dropped by ``read``, for the reason errors.jsonl gives it.
    errors = [json.loads(line) for line in (clean / "errors.jsonl").read_text(encoding="utf-8").splitlines()]
    by_reason.update(("read", e["reason"]) for e in errors)
    assert len(errors) == 1
    assert {(r.stage, r.reason): r.count for r in drop_reasons(manifest)} == dict(by_reason)
    steps = funnel(manifest)
    assert [s.stage for s in steps] == ["read", "length_filter", "exact_dedup"]
    assert (steps[0].documents_in, steps[0].kept) == (61, 60) and steps[-1].kept == kept
    o = overview(manifest)
    assert (o.documents_read, o.documents_kept, o.documents_rejected, o.unreadable) == (61, kept, 11, 1)
    assert o.kept_bytes == sum(p.stat().st_size for p in clean.glob("data/part-*.parquet"))


def test_summary_of_a_real_tokenize_run(outputs: tuple[Path, Path, list[dict]], vocab_dir: Path) -> None:
    import subprocess
    import sys

    root, clean, _ = outputs
    tokens = root / "tokens"
    result = subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", "tokenize", str(clean),
                             "-t", str(vocab_dir / "cl100k_base.tiktoken.gz"), "-o", str(tokens), "-q"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tokens / "manifest.json").read_text(encoding="utf-8"))
    # Every document's length, from whichever documents tables the folder holds.
    tables = [p for p in tokens.rglob("*.parquet") if not p.relative_to(tokens).parts[0].startswith(".")
              and "length" in pq.read_schema(p).names and "input_ids" not in pq.read_schema(p).names]
    lengths = [n for p in tables for n in pq.read_table(p).column("length").to_pylist()]
    assert len(lengths) == 49
    assert run_kind(manifest) == "tokenize"
    o = overview(manifest)
    assert (o.documents_read, o.documents_kept, o.tokens) == (49, len(lengths), sum(lengths))
    assert funnel(manifest)[-1].tokens == sum(lengths)
    assert drop_reasons(manifest) == []
    assert pipeline_stages(manifest)[0][0] == "tokenize"


@pytest.mark.parametrize(("size", "text"), [
    (0, "0 B"), (999, "999 B"), (1000, "1.00 kB"), (12_345, "12.3 kB"), (99_949, "99.9 kB"), (123_456, "123 kB"),
    (999_499, "999 kB"), (999_500, "1.00 MB"), (1_234_567, "1.23 MB"), (4_560_000_000, "4.56 GB"),
    (7 * 10**15, "7,000 TB")])
def test_byte_size_is_si_with_three_significant_digits(size: int, text: str) -> None:
    # The one way the dataset card and the report write a size (tests/report checks both use it).
    assert byte_size(size) == text


def test_a_tokenize_overview_counts_unreadable_records_once() -> None:
    """36 records read, 6 of them unreadable, 30 tokenized: nothing was rejected by a stage
    (the overview used to say 6 rejected and 6 unreadable)."""
    manifest = {"format": "tokpipe-tokenized", "errors": 6, "totals": {"documents": 30, "tokens": 900},
                "stats": {"read": {"in": 36, "kept": 30, "dropped_invalid_json": 6},
                          "tokenize": {"in": 30, "kept": 30, "tokens": 900}}}
    o = overview(manifest)
    assert (o.documents_read, o.documents_kept, o.documents_rejected, o.unreadable) == (36, 30, 0, 6)
