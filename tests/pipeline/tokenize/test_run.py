"""``tokenize.run`` (``tokenize_corpus``, ``tokpipe tokenize``) end to end: exact token
accounting and the manifest, a ``tokpipe clean`` folder as input, the unshuffled output
written while encoding, and a run interrupted or killed that resumes to the uninterrupted
run's output.

Expected ids come from tiktoken, expected orders from the published rule (``helpers``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tests.pipeline.killed_runs import finish, kill_after_markers, start_cli
from tests.pipeline.tokenize.helpers import (GPT2, digest, expected_docs, expected_order, is_val, read_documents,
                                             read_megatron, recorded, run_options)
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus


def test_documents_are_tiktokens_ids_in_the_seeded_order(corpus: Path, tmp_path: Path,
                                                        records: list[dict[str, str]]) -> None:
    out = tmp_path / "out"
    result = tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=7),
                             run_options(2))
    docs = expected_docs(records)
    order = expected_order(len(docs), 7)
    want = [docs[p] for p in order]
    got = read_documents(out, "train")
    assert [i for i, _ in got] == [i for i, _ in want]
    assert got == want
    dtype, megatron = read_megatron(out / "megatron" / "train")
    assert dtype == np.dtype("<u2")  # GPT-2: 50,257 ids < 65,500
    assert [m.tolist() for m in megatron] == [ids for _, ids in want]
    manifest = result.manifest
    assert manifest["dtype"] == "uint16"
    assert pq.read_schema(next((out / "train").glob("part-*.parquet"))).field("input_ids").type.value_type == "uint16"
    total = sum(len(ids) for _, ids in docs)
    assert manifest["totals"] == {"documents": len(docs), "tokens": total}
    assert sum(s["tokens"] for s in manifest["splits"]["train"]["parquet"]) == total
    assert manifest["tokenizer"]["eos_id"] == 50256
    assert manifest["tokenizer"]["sha256"] == hashlib.sha256(Path(GPT2).read_bytes()).hexdigest()
    assert manifest["stats"]["tokenize"]["dropped_empty"] == 3
    assert manifest["splits"]["train"]["megatron"]["dtype"] == "uint16"


def test_an_interrupted_run_resumes_to_the_same_output(corpus: Path, tmp_path: Path) -> None:
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=100, pack=True, seed=1)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    first = tokenize_corpus([str(corpus)], out, options, run_options(1, keep_staging=True))
    # As a killed run leaves it: some tasks without their commit marker, no manifest.
    markers = sorted((out / ".tokpipe" / "seg0").glob("*.json"))
    assert len(markers) > 3
    for marker in markers[1::2]:
        marker.unlink()
    (out / "manifest.json").unlink()
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(2))
    assert resumed.tasks_run == len(markers[1::2]) < first.tasks_run
    assert digest(out) == digest(reference)
    assert recorded(out) == recorded(reference) == digest(reference)


def test_a_clean_output_folder_is_an_input(corpus: Path, tmp_path: Path, records: list[dict[str, str]]) -> None:
    cleaned = tmp_path / "cleaned"
    pipeline.run([corpus], cleaned, config={"stages": [{"type": "length_filter", "min": 1}]}, workers=1)
    out = tmp_path / "out"
    tokenize_corpus([str(cleaned)], out, TokenizeOptions(GPT2, shuffle=False), run_options())
    assert read_documents(out, "train") == expected_docs([r for r in records if r["text"]])


def test_unshuffled_output_written_while_encoding_is_the_input_order(corpus: Path, tmp_path: Path,
                                                                    records: list[dict[str, str]]) -> None:
    """Without a shuffle the final files are written as the tasks finish (a thread follows
    the task markers): the documents stay in input order, split by the hash rule, the same
    for 1 and 2 workers and for a run resumed with some tasks already done."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), shuffle=False, seed=4, val_fraction=0.15)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    tokenize_corpus([str(corpus)], a, options, run_options(1))
    tokenize_corpus([str(corpus)], b, options, run_options(2))
    docs = expected_docs(records)
    val = [is_val(p, 4, 0.15) for p in range(len(docs))]
    assert read_documents(a, "train") == [d for d, v in zip(docs, val) if not v]
    assert read_documents(a, "val") == [d for d, v in zip(docs, val) if v]
    assert digest(a) == digest(b)
    first = tokenize_corpus([str(corpus)], c, options, run_options(1, keep_staging=True))
    markers = sorted((c / ".tokpipe" / "seg0").glob("*.json"))
    for marker in markers[::3]:
        marker.unlink()
    (c / "manifest.json").unlink()
    resumed = tokenize_corpus([str(corpus)], c, options, run_options(2))
    assert 0 < resumed.tasks_run < first.tasks_run
    assert digest(c) == digest(a)
    assert recorded(c) == recorded(a) == digest(a)


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [True, False])
def test_a_killed_tokenize_resumes_to_the_uninterrupted_output(tmp_path: Path, documents: list[tuple[str, str]],
                                                              shuffle: bool) -> None:
    """``kill -9`` in the middle of the tokenizing phase (while, without a shuffle, the final
    files are being written too), then the same command again: the output is the one an
    uninterrupted run writes."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    texts = [t for _, t in documents]
    for n in range(12):
        with open(corpus / f"{n:02d}.jsonl", "w", encoding="utf-8") as f:
            for i, t in enumerate(texts[n % 5::2]):
                f.write(json.dumps({"id": f"{n}-{i}", "text": t}, ensure_ascii=False) + "\n")
    args = [str(corpus), "-t", GPT2, "--format", "both", "--pack", "--seq-len", "512", "--task-size", "64KB",
            "--workers", "1", "-q", *([] if shuffle else ["--no-shuffle"])]

    def cli(out: Path) -> subprocess.Popen[str]:
        return start_cli("tokenize", *args, "-o", str(out))

    reference, out = tmp_path / "reference", tmp_path / "out"
    finish(start_cli("tokenize", *args, "-o", str(reference), "--keep-staging"))  # its markers, counted below
    total = len(list((reference / ".tokpipe" / "seg0").glob("*.json")))
    proc = cli(out)
    assert 3 <= kill_after_markers(proc, out / ".tokpipe" / "seg0", 3) < total
    assert not (out / "manifest.json").exists()
    finish(cli(out))
    assert digest(out) == digest(reference)
    assert recorded(out) == recorded(reference) == digest(reference)


def test_the_staging_goes_after_success_and_the_linked_bin_stays_whole(corpus: Path, tmp_path: Path,
                                                                        records: list[dict[str, str]]) -> None:
    """One worker, no validation split: the train ``.bin`` is the staged ids file, hard-linked.
    Removing the staging unlinks its name only: the ``.bin`` keeps every id, and verifies. A
    rerun of the same command redoes nothing; other write options would need the staging."""
    from tokpipe.errors import PipelineError
    from tokpipe.pipeline.tokenize import verify_tokenized

    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), shuffle=False)
    out = tmp_path / "out"
    first = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert first.tasks_run > 0 and not (out / ".tokpipe").exists()
    assert (out / "megatron" / "train.bin").stat().st_nlink == 1  # the staging's name of it is gone
    _, megatron = read_megatron(out / "megatron" / "train")
    assert [m.tolist() for m in megatron] == [ids for _, ids in expected_docs(records)]
    assert verify_tokenized(out, first.manifest) == []
    files = digest(out)
    again = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert again.tasks_run == 0 and digest(out) == files and again.manifest == first.manifest
    with pytest.raises(PipelineError, match="other write options"):
        tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=64,
                                                             pack=True, shuffle=False), run_options(1))
    assert digest(out) == files


def test_keep_staging_rewrites_other_write_options_without_tokenizing(corpus: Path, tmp_path: Path) -> None:
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, formats=("megatron",), seed=2),
                    run_options(1, keep_staging=True))
    assert (out / ".tokpipe" / "run.json").exists()
    packed = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=64, pack=True, seed=5, val_fraction=0.2)
    rewritten = tokenize_corpus([str(corpus)], out, packed, run_options(1))
    assert rewritten.tasks_run == 0  # written from the kept staging
    assert not (out / ".tokpipe").exists()  # and this run kept none
    tokenize_corpus([str(corpus)], fresh, packed, run_options(1))
    assert digest(out) == digest(fresh)


def test_the_output_opens_in_pyarrow_and_hf_datasets_without_options(corpus: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22: ``load_dataset(TOKENS)`` failed on documents.parquet. Each split's folder
    holds its token shards alone, and the card's ``configs:`` name them (and the documents
    files); the rows are the ones read from the shards the manifest lists."""
    import pyarrow.dataset as pads

    out = tmp_path / "out"
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=32, pack=True, seed=3, val_fraction=0.2)
    manifest = tokenize_corpus([str(corpus)], out, options, run_options(2)).manifest
    listed = {name: pq.read_table([out / e["path"] for e in split["parquet"]])
              for name, split in manifest["splits"].items()}
    assert listed["train"].num_rows > 0 and listed["val"].num_rows > 0
    for name in ("train", "val"):
        assert pads.dataset(str(out / name)).to_table().equals(listed[name]), name
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))
    assert sorted(loaded) == ["train", "validation"]
    assert loaded["train"]["input_ids"] == listed["train"].column("input_ids").to_pylist()
    assert loaded["validation"]["input_ids"] == listed["val"].column("input_ids").to_pylist()
    documents = datasets.load_dataset(str(out), "documents", cache_dir=str(tmp_path / "hf"))
    assert documents["train"].num_rows + documents["validation"].num_rows == manifest["totals"]["documents"]
