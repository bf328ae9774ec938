"""``tokenize.keys``: each document's split follows the published hash rule, recomputed here
in plain Python integers (``helpers.is_val``), not by the code under test."""

from __future__ import annotations

from pathlib import Path

from tests.pipeline.tokenize.helpers import GPT2, expected_docs, expected_order, is_val, read_documents, run_options
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus


def test_validation_split_follows_the_hash_rule(corpus: Path, tmp_path: Path, records: list[dict[str, str]]) -> None:
    out = tmp_path / "out"
    tokenize_corpus([str(corpus)], out, TokenizeOptions(GPT2, seed=5, val_fraction=0.2), run_options())
    docs = expected_docs(records)
    val = {docs[p][0] for p in range(len(docs)) if is_val(p, 5, 0.2)}
    assert 0.1 * len(docs) < len(val) < 0.3 * len(docs)
    got_val = read_documents(out, "val")
    got_train = read_documents(out, "train")
    assert {i for i, _ in got_val} == val
    assert len(got_val) + len(got_train) == len(docs)
    order = [docs[p] for p in expected_order(len(docs), 5)]
    assert got_val == [d for d in order if d[0] in val]
    assert got_train == [d for d in order if d[0] not in val]
