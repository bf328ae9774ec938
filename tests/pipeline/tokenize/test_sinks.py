"""``tokenize.sinks``: what a split's writers put in each format (documents and packed rows
in Parquet, truncation and the padded tail, the Megatron pair as megatron-core reads it, the
ids' dtype) and the token budget of a run of documents handed to them.

Expected ids come from tiktoken, expected orders from the published rule (``helpers``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import VOCAB
from tests.parity.peers import tiktoken_encoding
from tests.pipeline.tokenize.helpers import (GPT2, digest, expected_docs, expected_order, is_val, read_documents,
                                             read_megatron, run_options)
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus
from tokpipe.pipeline.tokenize import shuffle, sinks


@pytest.mark.parametrize("shuffle, workers, val_fraction", [(False, 1, 0.0), (True, 1, 0.0), (True, 2, 0.2)])
def test_megatron_cores_indexed_dataset_reads_the_output(corpus: Path, tmp_path: Path, records: list[dict[str, str]],
                                                         shuffle: bool, workers: int, val_fraction: float) -> None:
    """megatron-core reads each split's documents in output order, also when the .idx lists
    them in shuffled order over a .bin in input order (linked from the staging, or copied)."""
    import warnings

    with warnings.catch_warnings():
        # megatron-core warns at import about optional GPU packages (Transformer Engine, Apex).
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    out = tmp_path / "out"
    seed = 6
    tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, formats=("megatron",), shuffle=shuffle, seed=seed,
                                                        val_fraction=val_fraction), run_options(workers))
    docs = expected_docs(records)
    order = expected_order(len(docs), seed) if shuffle else list(range(len(docs)))
    val = {p for p in range(len(docs)) if is_val(p, seed, val_fraction)}
    for split, positions in (("train", [p for p in order if p not in val]), ("val", [p for p in order if p in val])):
        if not positions:
            continue
        dataset = IndexedDataset(str(out / "megatron" / split))
        assert len(dataset) == len(positions)
        assert dataset.index.dtype == np.uint16
        assert list(dataset.document_indices) == list(range(len(positions) + 1))
        for i, p in enumerate(positions):
            assert dataset[i].tolist() == docs[p][1]
        assert read_megatron(out / "megatron" / split)[1][0].tolist() == docs[positions[0]][1]


def test_packed_rows_are_the_shuffled_stream_cut_every_n_plus_1(corpus: Path, tmp_path: Path,
                                                                records: list[dict[str, str]]) -> None:
    out = tmp_path / "out"
    n = 64
    result = tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, seq_len=n, pack=True, seed=11), run_options())
    docs = expected_docs(records)
    stream = [t for p in expected_order(len(docs), 11) for t in docs[p][1]]
    rows = pq.read_table(sorted((out / "train").glob("part-*.parquet"))).column("input_ids").to_pylist()
    assert all(len(r) == n + 1 for r in rows)
    packed = result.manifest["splits"]["train"]["packed"]
    assert packed["dropped_tail_tokens"] == len(stream) % (n + 1)
    assert packed["rows"] == len(rows) == len(stream) // (n + 1)
    # No token lost or duplicated: the rows are the stream, minus the counted tail.
    assert [t for r in rows for t in r] + stream[len(stream) - packed["dropped_tail_tokens"]:] == stream


def test_truncate_and_pad_tail(corpus: Path, tmp_path: Path, records: list[dict[str, str]]) -> None:
    out = tmp_path / "out"
    n = 30
    result = tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, seq_len=n, pack=True, truncate=True,
                                                                 pad_tail=True, shuffle=False), run_options())
    docs = expected_docs(records)
    stream = [t for _, ids in docs for t in ids[: n + 1]]
    table = pq.read_table(sorted((out / "train").glob("part-*.parquet")))
    rows, real = table.column("input_ids").to_pylist(), table.column("length").to_pylist()
    tail = len(stream) % (n + 1)
    assert tail, "the corpus should leave a partial row to pad"
    assert rows[-1] == stream[len(stream) - tail:] + [50256] * (n + 1 - tail)
    assert real[-1] == tail and set(real[:-1]) == {n + 1}
    assert [t for r in rows for t in r][: len(stream)] == stream
    split = result.manifest["splits"]["train"]
    assert split["truncated_tokens"] == sum(max(0, len(ids) - n - 1) for _, ids in docs)
    assert split["packed"]["padded_tokens"] == n + 1 - tail


def test_writes_are_bounded_by_tokens_whatever_the_bucketing(corpus: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of documents handed to the writers closes at _WRITE_TOKENS tokens as well as at
    _WRITE_ROWS documents (issue 19: 4,096 documents of 1 MiB were gathered at once, 5.7 GB
    for 2 GiB of input), and its cut, so the files' bytes, still do not depend on how the
    shuffle bucketed the documents."""
    budget = 2_000
    monkeypatch.setattr(sinks, "_WRITE_TOKENS", budget)
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=5, val_fraction=0.1)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    tokenize_corpus([str(corpus)], a, options, run_options(1))
    tokenize_corpus([str(corpus)], b, replace(options, shuffle_buffer=20_000), run_options(1))
    monkeypatch.setattr(shuffle, "_page_cache_budget", lambda: 0)  # spilled buckets
    tokenize_corpus([str(corpus)], c, replace(options, shuffle_buffer=20_000), run_options(1))
    assert digest(a) == digest(b) == digest(c)
    groups = 0
    for shard in (a / "train").glob("part-*.parquet"):
        metadata = pq.ParquetFile(shard).metadata
        lengths = pq.read_table(shard, columns=["length"]).column("length").to_numpy()
        start = 0
        for g in range(metadata.num_row_groups):
            rows = metadata.row_group(g).num_rows
            group = lengths[start:start + rows]
            start += rows
            # Under the budget but for the document that reached it.
            assert group[:-1].sum() < budget
            groups += 1
    assert groups > 3, "the budget should have cut several row groups"


def test_o200k_ids_are_uint32_and_megatron_int32(tmp_path: Path, records: list[dict[str, str]]) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    with open(folder / "x.jsonl", "w", encoding="utf-8") as f:
        for r in records[:80]:
            f.write(json.dumps(r) + "\n")
    out = tmp_path / "out"
    result = tokenize_corpus([str(folder)], out, TokenizeOptions(str(VOCAB / "o200k_base.tiktoken.gz"),
                                                                 formats=("parquet", "megatron"), shuffle=False),
                             run_options())
    enc = tiktoken_encoding("o200k")
    eot = enc.eot_token
    want = [enc.encode_ordinary(r["text"]) + [eot] for r in records[:80] if r["text"]]
    assert result.manifest["dtype"] == "uint32"
    assert [ids for _, ids in read_documents(out, "train")] == want
    assert pq.read_schema(next((out / "train").glob("part-*.parquet"))).field("input_ids").type.value_type == "uint32"
    dtype, megatron = read_megatron(out / "megatron" / "train")
    assert dtype == np.dtype("<i4")
    assert [m.tolist() for m in megatron] == want
