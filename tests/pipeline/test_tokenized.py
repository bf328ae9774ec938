"""``tokenize_corpus`` (``tokpipe tokenize``): exact token accounting, shuffle and split by
their published rule, packing, Megatron output, determinism across workers and reruns, resume.
(Over 500 lines: it tests one 1,200-line module, which the architecture issue splits; its
tests split with it.)

Expected ids come from tiktoken (the peer), expected orders from the rule the module
documents (splitmix64 of position plus splitmix64 of the seed), computed here in plain Python
integers; nothing expected is produced by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tests.conftest import CORPORA, VOCAB
from tests.parity.peers import tiktoken_encoding
from tokpipe.errors import ConfigError
from tokpipe.pipeline.engines import RunOptions
from tokpipe.pipeline.readers import ReaderOptions
from tokpipe.pipeline import tokenized
from tokpipe.pipeline.tokenized import TokenizeOptions, tokenize_corpus

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


@pytest.fixture(scope="module")
def records() -> list[dict[str, str]]:
    return corpus_records()


@pytest.fixture()
def corpus(tmp_path: Path, records: list[dict[str, str]]) -> Path:
    """Three JSONL files; small tasks so several workers share the work."""
    folder = tmp_path / "in"
    folder.mkdir()
    third = len(records) // 3
    for n, part in enumerate((records[:third], records[third:2 * third], records[2 * third:])):
        with open(folder / f"{n}.jsonl", "w", encoding="utf-8") as f:
            for r in part:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return folder


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
    """sha256 of every output file (not the staging, not the manifest's run details)."""
    files = sorted(p for p in out.rglob("*") if p.is_file() and ".tokpipe" not in p.parts and p.name != "manifest.json")
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def recorded(out: Path) -> dict[str, str]:
    """The sha256 the manifest records for each file, checked against its recorded size."""
    files = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["files"]
    assert all((out / e["path"]).stat().st_size == e["bytes"] for e in files)
    return {e["path"]: e["sha256"] for e in files}


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
    dtype, megatron = read_megatron(out / "train" / "megatron")
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
        dataset = IndexedDataset(str(out / split / "megatron"))
        assert len(dataset) == len(positions)
        assert dataset.index.dtype == np.uint16
        assert list(dataset.document_indices) == list(range(len(positions) + 1))
        for i, p in enumerate(positions):
            assert dataset[i].tolist() == docs[p][1]
        assert read_megatron(out / split / "megatron")[1][0].tolist() == docs[positions[0]][1]


def test_the_bin_is_the_staging_linked_or_copied_to_the_same_bytes(corpus: Path, tmp_path: Path) -> None:
    """One worker stages every task's ids in order in one file: that file is the train .bin
    (a hard link, no second copy). Two workers stage into two files, interleaved: the .bin
    is copied together in task order, to the same bytes."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=9, seq_len=40, pack=True)
    one, two = tmp_path / "one", tmp_path / "two"
    tokenize_corpus([str(corpus)], one, options, run_options(1))
    tokenize_corpus([str(corpus)], two, options, run_options(2))
    staged = sorted((one / ".tokpipe" / "seg0" / "kept").glob("ids-*.bin"))
    assert len(staged) == 1
    assert os.path.samefile(staged[0], one / "train" / "megatron.bin")
    assert len(list((two / ".tokpipe" / "seg0" / "kept").glob("ids-*.bin"))) == 2
    assert (two / "train" / "megatron.bin").stat().st_nlink == 1
    assert digest(one) == digest(two)
    # The manifest lists every file with its sha256, whether the .bin was linked (its digest
    # read back) or copied (its digest taken while writing).
    assert recorded(one) == recorded(two) == digest(one)


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


@pytest.mark.parametrize("pack", [False, True])
def test_same_output_for_1_and_2_workers_reruns_and_spilled_buckets(corpus: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch, pack: bool) -> None:
    """The shuffle's three ways give the same files: in place in one pass, in place key range
    by key range (a small shuffle buffer), and spilled to key-range buckets on disk (what
    staging too large for the page cache takes)."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=3, val_fraction=0.1, seq_len=50 if pack else None,
                              pack=pack)
    a, b, c, d = tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"
    tokenize_corpus([str(corpus)], a, options, run_options(1))
    tokenize_corpus([str(corpus)], b, options, run_options(2))
    # A shuffle buffer far smaller than the corpus: many key ranges.
    small = replace(options, shuffle_buffer=20_000)
    result = tokenize_corpus([str(corpus)], c, small, run_options(2))
    assert digest(a) == digest(b) == digest(c)
    assert len(digest(a)) == 9  # errors.jsonl; train and val: shard, documents, .bin, .idx
    rerun = tokenize_corpus([str(corpus)], c, small, run_options(2))
    assert rerun.tasks_run == 0 and digest(c) == digest(a)
    assert result.manifest["totals"] == rerun.manifest["totals"]
    spilled: list[Path] = []
    original = tokenized._write_shuffled_spilling

    def spilling(*args: object, **kwargs: object) -> None:
        spilled.append(args[6])  # type: ignore[arg-type]  # the scratch folder
        original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tokenized, "_page_cache_budget", lambda: 0)
    monkeypatch.setattr(tokenized, "_write_shuffled_spilling", spilling)
    tokenize_corpus([str(corpus)], d, small, run_options(2))
    assert spilled and digest(d) == digest(a)
    assert recorded(a) == recorded(b) == recorded(c) == recorded(d) == digest(a)


def test_writes_are_bounded_by_tokens_whatever_the_bucketing(corpus: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of documents handed to the writers closes at _WRITE_TOKENS tokens as well as at
    _WRITE_ROWS documents (issue 19: 4,096 documents of 1 MiB were gathered at once, 5.7 GB
    for 2 GiB of input), and its cut, so the files' bytes, still do not depend on how the
    shuffle bucketed the documents."""
    budget = 2_000
    monkeypatch.setattr(tokenized, "_WRITE_TOKENS", budget)
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=5, val_fraction=0.1)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    tokenize_corpus([str(corpus)], a, options, run_options(1))
    tokenize_corpus([str(corpus)], b, replace(options, shuffle_buffer=20_000), run_options(1))
    monkeypatch.setattr(tokenized, "_page_cache_budget", lambda: 0)  # spilled buckets
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


def test_an_interrupted_run_resumes_to_the_same_output(corpus: Path, tmp_path: Path) -> None:
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=100, pack=True, seed=1)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    first = tokenize_corpus([str(corpus)], out, options, run_options(1))
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


def test_damaged_staging_is_found_and_its_task_redone(corpus: Path, tmp_path: Path) -> None:
    """What a power loss can leave (staging is not fsynced): a task's marker whose staging
    file came back short, one whose file came back zero-filled, a marker cut to nothing. The
    rerun redoes exactly those tasks, and the output is the uninterrupted run's."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=100, pack=True, seed=2)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    tokenize_corpus([str(corpus)], out, options, run_options(1))
    seg = out / ".tokpipe" / "seg0"
    staged = sorted((seg / "kept").glob("part-*.arrow"))
    assert len(staged) > 4
    with open(staged[1], "r+b") as f:
        f.truncate(os.path.getsize(staged[1]) // 2)
    with open(staged[3], "r+b") as f:
        f.write(bytes(os.path.getsize(staged[3])))
    (seg / "000002.json").write_bytes(b"")
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert resumed.tasks_run == 3
    assert digest(out) == digest(reference)
    assert resumed.manifest["totals"] == json.loads((reference / "manifest.json").read_text())["totals"]


def test_a_short_ids_file_redoes_the_tasks_past_its_end(corpus: Path, tmp_path: Path) -> None:
    """The raw ids file has no magic bytes: a task whose ids range ends past the file's end
    (what a power loss can leave) is redone, and only those tasks."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=100, pack=True, seed=2)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    first = tokenize_corpus([str(corpus)], out, options, run_options(1))
    seg = out / ".tokpipe" / "seg0"
    (ids,) = sorted((seg / "kept").glob("ids-*.bin"))
    ends = sorted(json.loads(m.read_text())["ids"]["end"] for m in seg.glob("*.json"))
    cut = ends[len(ends) // 2] - 1
    os.unlink(out / "train" / "megatron.bin")  # the .bin is the same file: cut the staging alone
    with open(ids, "r+b") as f:
        f.truncate(cut)
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert resumed.tasks_run == sum(end > cut for end in ends) < first.tasks_run
    assert digest(out) == digest(reference)


def test_tasks_staged_the_old_way_are_redone(corpus: Path, tmp_path: Path) -> None:
    """A marker from a tokpipe that staged ids in Arrow files names no ids range: the rerun
    redoes that task instead of failing, and the output is the uninterrupted run's."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=5)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    tokenize_corpus([str(corpus)], out, options, run_options(1))
    marker = sorted((out / ".tokpipe" / "seg0").glob("*.json"))[1]
    summary = json.loads(marker.read_text())
    del summary["ids"]
    marker.write_text(json.dumps(summary))
    (out / "manifest.json").unlink()
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert resumed.tasks_run == 1
    assert digest(out) == digest(reference)


def test_a_clean_output_folder_is_an_input(corpus: Path, tmp_path: Path, records: list[dict[str, str]]) -> None:
    cleaned = tmp_path / "cleaned"
    pipeline.run([corpus], cleaned, config={"stages": [{"type": "length_filter", "min": 1}]}, workers=1)
    out = tmp_path / "out"
    tokenize_corpus([str(cleaned)], out, TokenizeOptions(GPT2, shuffle=False), run_options())
    assert read_documents(out, "train") == expected_docs([r for r in records if r["text"]])


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
    dtype, megatron = read_megatron(out / "train" / "megatron")
    assert dtype == np.dtype("<i4")
    assert [m.tolist() for m in megatron] == want


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="seq-len"):
        TokenizeOptions(GPT2, pack=True)
    with pytest.raises(ConfigError, match="formats"):
        TokenizeOptions(GPT2, formats=("csv",))
    with pytest.raises(ConfigError, match="val_fraction"):
        TokenizeOptions(GPT2, val_fraction=1.0)


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
    first = tokenize_corpus([str(corpus)], c, options, run_options(1))
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
    import os
    import signal
    import subprocess
    import sys
    import time

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
        return subprocess.Popen([sys.executable, "-c", "from tokpipe.cli import main; main()", "tokenize", *args,
                                 "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def finish(proc: subprocess.Popen[str]) -> None:
        _, stderr = proc.communicate()
        assert proc.returncode == 0, stderr

    reference, out = tmp_path / "reference", tmp_path / "out"
    finish(cli(reference))
    total = len(list((reference / ".tokpipe" / "seg0").glob("*.json")))
    proc = cli(out)
    markers = out / ".tokpipe" / "seg0"
    while proc.poll() is None and len(list(markers.glob("*.json"))) < 3:
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert 3 <= len(list(markers.glob("*.json"))) < total
    assert not (out / "manifest.json").exists()
    finish(cli(out))
    assert digest(out) == digest(reference)
    assert recorded(out) == recorded(reference) == digest(reference)
