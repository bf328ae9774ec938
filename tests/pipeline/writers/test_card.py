"""``writers.card``: the dataset card (``README.md``) of a ``tokpipe clean`` and of a ``tokpipe
tokenize`` output. Its YAML header names files that exist; its Markdown summary gives the
numbers of the run, checked here against numbers counted from how the test wrote its input
(and, for tokens, from tiktoken and the published split rule), never against the manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

import tokpipe.pipeline as pipeline
from tests.pipeline.tokenize.helpers import GPT2, corpus_records, expected_docs, is_val, run_options
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus
from tokpipe.pipeline.writers.card import clean_card

LONG = "A document long enough for the length filter, about the weather in town number {n}."


def header(card: str) -> dict[str, Any] | None:
    """The YAML between the card's first two ``---`` lines (None without them)."""
    if not card.startswith("---\n"):
        return None
    text, _ = card[4:].split("\n---\n", 1)
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def section(card: str, title: str) -> list[str]:
    """The lines of the ``## title`` section."""
    lines = card.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def rows(card: str, title: str) -> list[list[str]]:
    """The cells of the table of section ``title``, header and rule left out."""
    table = [line for line in section(card, title) if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table[2:]]


def test_the_clean_card_gives_the_pipeline_funnel_reasons_and_sources(tmp_path: Path) -> None:
    long = [LONG.format(n=n) for n in range(12)]
    short = ["tiny", "small one", "short"]
    duplicates = [long[0]] * 4
    corpus = tmp_path / "in"
    corpus.mkdir()
    odd = corpus / "weird|name`here.jsonl"  # a name with the characters that would break the Markdown
    lines = [json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(long + short + duplicates)]
    lines[5:5] = ["{not json", '{"id": "no text"}']  # two records set aside as unreadable
    odd.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    config = {"stages": [{"type": "length_filter", "min": 30}, {"type": "exact_dedup"}]}
    pipeline.run([odd], out, config=config, workers=1)
    card = (out / "README.md").read_text(encoding="utf-8")

    readable = len(long) + len(short) + len(duplicates)  # 19
    read = readable + 2  # the input's records
    assert header(card) == {"configs": [{"config_name": "default", "data_files": "data/part-*.parquet"},
                                        {"config_name": "rejected", "data_files": "rejected/part-*.parquet"}]}
    assert list(out.glob("data/part-*.parquet")) and list(out.glob("rejected/part-*.parquet"))
    assert f"**{len(long)} documents kept** of {read} input records ({100 * len(long) / read:.1f}%)" in card
    assert f"; {len(short) + len(duplicates)} rejected by a stage, 2 unreadable." in card
    assert rows(card, "Pipeline") == [["1", "length_filter", "min=30"], ["2", "exact_dedup", "(defaults)"]]
    after_length = readable - len(short)
    assert rows(card, "Funnel") == [
        ["read", f"{read}", f"{readable}", "2", f"{100 * readable / read:.1f}%"],
        ["length_filter", f"{readable}", f"{after_length}", f"{len(short)}", f"{100 * after_length / read:.1f}%"],
        ["exact_dedup", f"{after_length}", f"{len(long)}", f"{len(duplicates)}", f"{100 * len(long) / read:.1f}%"]]
    assert rows(card, "Drop reasons") == [
        ["read", "malformed_json", "1", f"{100 / read:.1f}%", f"{100 / read:.1f}%"],
        ["read", "missing_text_field", "1", f"{100 / read:.1f}%", f"{100 / read:.1f}%"],
        ["length_filter", "too_short", f"{len(short)}", f"{100 * len(short) / readable:.1f}%",
         f"{100 * len(short) / read:.1f}%"],
        ["exact_dedup", "duplicate", f"{len(duplicates)}", f"{100 * len(duplicates) / after_length:.1f}%",
         f"{100 * len(duplicates) / read:.1f}%"]]
    sources = [line for line in section(card, "Sources") if line.startswith("- ")]
    assert sources == [f"- `{str(odd).replace('`', chr(39))}`"]


def test_many_sources_are_counted_long_values_cut_and_credentials_redacted() -> None:
    inputs = [f"s3://user:hunter2@bucket/part-{i:03d}.jsonl" for i in range(25)]
    manifest = {"format": "tokpipe-dataset", "inputs": inputs, "errors": 0, "shards": [], "rejected": [],
                "totals": {"rows": 0, "bytes": 0, "rejected_rows": 0}, "stats": {"read": {"in": 0, "kept": 0}}}
    card = clean_card(manifest, ".parquet", [("pii", {"patterns": "x|y" * 200}),
                                             ("pii", {"salt": "pepper-1234", "model": "s3://u:hunter3@b/m.bin"})])
    assert header(card) is None  # no shard: no config to point at nothing
    assert "hunter2" not in card and "hunter3" not in card and "pepper-1234" not in card
    assert rows(card, "Pipeline")[1][2] == 'salt=***, model="s3://***@b/m.bin"'
    listed = [line for line in section(card, "Sources") if line.startswith("- ")]
    assert len(listed) == 21 and listed[-1].startswith("- ... and 5 more")
    cell = rows(card, "Pipeline")[0][2]
    assert len(cell.replace("\\|", "|")) <= 120 and "|" not in cell.replace("\\|", "")


def test_a_run_that_rejected_nothing_advertises_no_rejected_config() -> None:
    """No rejected shard: no ``rejected`` config in the header, so neither the snippet nor the
    file list may name one (they used to); the funnel's note counts unreadable records where
    the ``read`` row does: in its ``in``, as its ``dropped``."""
    shard = {"path": "data/part-00000-00000.parquet", "rows": 3, "bytes": 100, "sha256": "0" * 64}
    manifest = {"format": "tokpipe-dataset", "inputs": ["in.jsonl"], "errors": 1, "shards": [shard], "rejected": [],
                "totals": {"rows": 3, "bytes": 100, "rejected_rows": 0},
                "stats": {"read": {"in": 4, "kept": 3, "dropped_invalid_json": 1}}}
    card = clean_card(manifest, ".parquet")
    assert [c["config_name"] for c in header(card)["configs"]] == ["default"]
    assert "rejected" not in card.split("## Pipeline")[0].replace("rejected by a stage", "")
    assert not [line for line in section(card, "Files") if "rejected/" in line]
    assert rows(card, "Funnel")[0][:4] == ["read", "4", "3", "1"]
    assert "`read`: every input record; those that could not be read are its `dropped`" in card
    with_rejected = clean_card({**manifest, "rejected": [{**shard, "path": "rejected/part-00000-00000.parquet"}]},
                               ".parquet")
    assert [c["config_name"] for c in header(with_rejected)["configs"]] == ["default", "rejected"]
    assert 'load_dataset("path/to/this/folder", "rejected"' in with_rejected
    assert [line for line in section(with_rejected, "Files") if "rejected/" in line]


def test_a_run_with_rejected_by_stage_has_a_config_for_all_rejected_rows_and_one_per_stage() -> None:
    """The manifest's rejected entries name their stage folder: ``rejected`` then covers the
    folders (``rejected/part-*`` would match nothing), and each folder gets a config."""
    def entry(path: str, stage: str) -> dict[str, Any]:
        return {"path": path, "rows": 1, "bytes": 10, "sha256": "0" * 64, "stage": stage}

    manifest = {"format": "tokpipe-dataset", "inputs": ["in.jsonl"], "errors": 0,
                "shards": [{**entry("data/part-00000-00000.jsonl", ""), "rows": 3}],
                "rejected": [entry("rejected/length_filter/part-00000-00000.jsonl", "length_filter"),
                             entry("rejected/exact_dedup/part-00000-00000.jsonl", "exact_dedup"),
                             entry("rejected/exact_dedup/part-00001-00000.jsonl", "exact_dedup")],
                "totals": {"rows": 3, "bytes": 10, "rejected_rows": 3},
                "stats": {"read": {"in": 6, "kept": 6}, "length_filter": {"in": 6, "kept": 5, "dropped_too_short": 1},
                          "exact_dedup": {"in": 5, "kept": 3, "dropped_duplicate": 2}}}
    card = clean_card(manifest, ".jsonl")
    assert header(card)["configs"] == [
        {"config_name": "default", "data_files": "data/part-*.jsonl"},
        {"config_name": "rejected", "data_files": "rejected/*/part-*.jsonl"},
        {"config_name": "rejected-exact_dedup", "data_files": "rejected/exact_dedup/part-*.jsonl"},
        {"config_name": "rejected-length_filter", "data_files": "rejected/length_filter/part-*.jsonl"}]
    assert 'load_dataset("path/to/this/folder", "rejected-exact_dedup", split="train")' in card
    assert [line for line in section(card, "Files") if "rejected/" in line] == [
        "- `rejected/STAGE/part-*.jsonl`: the documents each stage dropped, one folder a stage (`exact_dedup`, "
        "`length_filter`), with `reason`, `stage` and `duplicate_of`."]


def test_the_tokens_card_gives_the_tokenizer_options_and_splits(tmp_path: Path) -> None:
    records = corpus_records()
    corpus = tmp_path / "in.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "tokens"
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=3, val_fraction=0.2, seq_len=64, pack=True)
    tokenize_corpus([str(corpus)], out, options, run_options(1))
    card = (out / "README.md").read_text(encoding="utf-8")

    docs = expected_docs(records)
    val = [d for p, d in enumerate(docs) if is_val(p, 3, 0.2)]
    train = [d for p, d in enumerate(docs) if not is_val(p, 3, 0.2)]
    tokens = {name: sum(len(ids) for _, ids in split) for name, split in (("train", train), ("validation", val))}
    assert header(card) == {"configs": [
        {"config_name": "default", "data_files": [{"split": "train", "path": "train/part-*.parquet"},
                                                  {"split": "validation", "path": "val/part-*.parquet"}]},
        {"config_name": "documents", "data_files": [{"split": "train", "path": "documents/train.parquet"},
                                                    {"split": "validation", "path": "documents/val.parquet"}]}]}
    assert f"**{sum(tokens.values()):,} tokens** in {len(docs):,} documents, tokenized with `gpt2_encoder.json` " \
           "(vocabulary 50,257" in card
    options_table = dict(tuple(row) for row in rows(card, "Write options"))
    assert options_table["sequence length"] == "64" and options_table["rows"] == "packed, 65 tokens each"
    assert options_table["validation fraction"] == "0.2" and options_table["shuffle"] == "global, seed 3"
    assert options_table["end-of-document token"] == "appended (id 50256)"
    splits = {row[0]: row[1:3] for row in rows(card, "Splits")}
    assert splits == {"train": [f"{len(train):,}", f"{tokens['train']:,}"],
                      "validation": [f"{len(val):,}", f"{tokens['validation']:,}"]}
    funnel = {row[0]: row[1:4] for row in rows(card, "Funnel")}
    empty = sum(1 for r in records if not r["text"])
    assert funnel["tokenize"] == [f"{len(records):,}", f"{len(docs):,}", f"{empty}"]
    assert [line for line in section(card, "Sources") if line.startswith("- ")] == [f"- `{corpus}`"]
    assert "- `megatron/train.bin`, `.idx`: Megatron-LM's indexed dataset (`--data-path megatron/train`)." in card
