"""decontaminate: decisions against a plain Python implementation of GPT-3's rule (sets of
n-gram tuples of normalised words, written from the module's documentation) on the real text of
../shared/corpora, with benchmark passages planted in some documents (some with their case
and punctuation changed); English, Chinese and Japanese; drop vs tag; per-benchmark counts;
short records; bad benchmark files."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA, load_documents
from tests.pipeline.stages.test_text_stats import is_alnum, words_of
from tokpipe.errors import ConfigError
from tokpipe.pipeline.base import REASON
from tokpipe.pipeline.config import parse_config
from tokpipe.pipeline.stages.decontaminate import CONTAMINATED_BY, CONTAMINATED_NGRAM, Decontaminate

# --- The reference, from the module's documentation --------------------------------------------


def normalised_words(text: str) -> list[str]:
    """Script-aware words (text_stats' reference splitter), each reduced to its letters and
    numbers, lower-cased per character."""
    return ["".join(c.lower() for c in word if is_alnum(c)) for word in words_of(text)]


class Reference:
    """n-gram tuples of every record -> the first benchmark that has it."""

    def __init__(self, benchmarks: list[tuple[str, list[str]]], n: int = 13, min_words: int = 8) -> None:
        self.index: dict[tuple[str, ...], str] = {}
        self.lengths: set[int] = set()
        for name, records in benchmarks:
            for record in records:
                words = normalised_words(record)
                if len(words) < min_words:
                    continue
                size = min(n, len(words))
                self.lengths.add(size)
                for i in range(len(words) - size + 1):
                    self.index.setdefault(tuple(words[i:i + size]), name)

    def first_match(self, text: str) -> tuple[str, str] | None:
        words = normalised_words(text)
        for end in range(1, len(words) + 1):
            for size in sorted(self.lengths, reverse=True):
                if end >= size and tuple(words[end - size:end]) in self.index:
                    gram = tuple(words[end - size:end])
                    return self.index[gram], " ".join(gram)
        return None


# --- Real text: benchmarks cut from the corpora, documents with planted passages ---------------

def lines_of(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def benchmark_records() -> dict[str, list[dict[str, str]]]:
    """Question/answer records taken from the English, Japanese and Chinese texts."""
    shakespeare = lines_of(CORPORA / "text" / "tinyshakespeare.txt")
    botchan = lines_of(CORPORA / "text" / "botchan.txt")
    neko = [s + "。" for s in (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").split("。")
            if len(s.strip()) >= 25]
    zh = [line for path in sorted((CORPORA / "text" / "zh_notes").glob("*.txt")) for line in lines_of(path)
          if len(line) >= 30]
    rng = random.Random(24)
    en = [{"question": shakespeare[i], "answer": shakespeare[i + 1]}
          for i in rng.sample(range(len(shakespeare) - 1), 40)]
    en += [{"question": botchan[i], "answer": botchan[i + 1]} for i in rng.sample(range(len(botchan) - 1), 40)]
    ja = [{"question": neko[i], "answer": neko[i + 1]} for i in rng.sample(range(len(neko) - 1), 40)]
    zhr = [{"question": zh[i], "answer": ""} for i in rng.sample(range(len(zh)), 30)]
    return {"en_qa": en, "ja_qa": ja, "zh_qa": zhr}


def shout(text: str) -> str:
    """The same words with their case and punctuation changed."""
    return text.upper().replace(",", "").replace(".", " ... ").replace("'", "") + "!"


def corpus_documents(records: dict[str, list[dict[str, str]]]) -> list[str]:
    """The corpora's documents in pieces of 40 lines, the web documents whole, and copies of
    web documents with a record's passage planted in the middle (half of them shouted)."""
    docs = []
    for _, text in load_documents():
        lines = text.splitlines()
        docs += ["\n".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    web = []
    for path in sorted((CORPORA / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            web += [json.loads(line)["text"] for line in f]
    rng = random.Random(7)
    for name, recs in records.items():
        long_enough = [r for r in recs if len(normalised_words(r["question"] + " " + r["answer"])) >= 13]
        for k, record in enumerate(rng.sample(long_enough, 12)):
            passage = record["question"] + " " + record["answer"]
            if k % 2:
                passage = shout(passage)
            host = web[k % len(web)]
            middle = len(host) // 2
            docs.append(host[:middle] + " " + passage + " " + host[middle:])
    return docs


def write_benchmarks(folder: Path, records: dict[str, list[dict[str, str]]]) -> list[str]:
    """en_qa as JSONL, ja_qa as gzipped JSONL, zh_qa as Parquet."""
    en = folder / "en_qa.jsonl"
    en.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records["en_qa"]), encoding="utf-8")
    ja = folder / "ja_qa.jsonl.gz"
    with gzip.open(ja, "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records["ja_qa"]))
    zh = folder / "zh_qa.parquet"
    pq.write_table(pa.Table.from_pylist(records["zh_qa"]), zh)
    return [str(en), str(ja), str(zh)]


def batch_of(texts: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": [str(i) for i in range(len(texts))], "text": texts})


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], list[tuple[str, str] | None]]:
    """The benchmark files, the documents, and the reference's first match of each."""
    records = benchmark_records()
    paths = write_benchmarks(tmp_path_factory.mktemp("benchmarks"), records)
    reference = Reference([(name, [r["question"] + "\n" + r["answer"] for r in recs])
                           for name, recs in records.items()])
    docs = corpus_documents(records)
    return paths, docs, [reference.first_match(d) for d in docs]


def test_decisions_match_the_reference_on_real_text(real: tuple[list[str], list[str], list]) -> None:
    paths, docs, matches = real
    stage = Decontaminate(benchmarks=paths, text_fields=["question", "answer"], action="tag")
    out = stage.process(batch_of(docs)).kept
    assert out.num_rows == len(docs)
    got = list(zip(out.column(CONTAMINATED_BY).to_pylist(), out.column(CONTAMINATED_NGRAM).to_pylist()))
    want = [m or (None, None) for m in matches]
    mismatches = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not mismatches, f"{len(mismatches)} documents differ, first: {got[mismatches[0]]} vs {want[mismatches[0]]}"
    # Every planted passage is found (shouted or not), in every language, and most pieces are clean.
    planted = got[-36:]
    assert [name for name, _ in planted] == ["en_qa"] * 12 + ["ja_qa"] * 12 + ["zh_qa"] * 12
    clean = sum(name is None for name, _ in got)
    assert 0 < clean < len(docs) - 36
    counts = {name: sum(g == name for g, _ in got) for name in ("en_qa", "ja_qa", "zh_qa")}
    assert {k: v for k, v in stage.stats.extra.items()} == {f"contaminated_{k}": v for k, v in counts.items()}


def test_drop_rejects_what_tag_marks(real: tuple[list[str], list[str], list]) -> None:
    paths, docs, want = real
    stage = Decontaminate(benchmarks=paths, text_fields=["question", "answer"])  # action: drop
    result = stage.process(batch_of(docs))
    dropped_ids = {str(i) for i, w in enumerate(want) if w is not None}
    assert result.rejected is not None
    assert set(result.rejected.column("id").to_pylist()) == dropped_ids
    assert set(result.rejected.column(REASON).to_pylist()) == {"contaminated"}
    assert result.rejected.column(CONTAMINATED_BY).null_count == 0
    assert result.kept.column(CONTAMINATED_BY).null_count == result.kept.num_rows
    assert stage.stats.dropped == {"contaminated": len(dropped_ids)}
    assert sum(stage.stats.extra.values()) == len(dropped_ids)


def test_short_records_are_matched_whole_above_min_words(tmp_path: Path) -> None:
    bench = tmp_path / "short.txt"
    # 10 words: under n=13, at least min_words=8, so matched whole; 5 words: skipped.
    bench.write_text("one two three four five six seven eight nine ten\nalpha beta gamma delta epsilon\n")
    stage = Decontaminate(benchmarks=[str(bench)], action="tag")
    docs = ["x One, two three four five six seven eight nine TEN y",
            "one two three four five six seven eight nine",
            "alpha beta gamma delta epsilon"]
    out = stage.process(batch_of(docs)).kept
    assert out.column(CONTAMINATED_BY).to_pylist() == ["short", None, None]
    assert out.column(CONTAMINATED_NGRAM).to_pylist()[0] == "one two three four five six seven eight nine ten"
    reference = Reference([("short", bench.read_text().splitlines())])
    assert [reference.first_match(d) and reference.first_match(d)[0] for d in docs] == ["short", None, None]
    only_short = tmp_path / "tiny.txt"
    only_short.write_text("yes\nParis\nthe answer is B\n")
    with pytest.raises(ConfigError, match=r"tiny.txt has no record of at least 8 words"):
        Decontaminate(benchmarks=[str(only_short)])


def test_the_first_benchmark_wins_a_shared_ngram_and_cjk_characters_are_words(tmp_path: Path) -> None:
    passage = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    for name in ("first", "second"):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({"text": passage}, ensure_ascii=False) + "\n",
                                                encoding="utf-8")
    stage = Decontaminate(benchmarks=[str(tmp_path / "second.jsonl"), str(tmp_path / "first.jsonl")], action="tag")
    out = stage.process(batch_of(["前略。名前はまだ無い。どこで生れたか", "名前は まだ 無い どこで"])).kept
    assert out.column(CONTAMINATED_BY).to_pylist() == ["second", None]
    assert out.column(CONTAMINATED_NGRAM).to_pylist()[0] == "名 前 は ま だ 無 い ど こ で 生 れ た"
    assert stage.stats.extra == {"contaminated_second": 1, "contaminated_first": 0}


def _config(benchmarks: list[str], **params: object) -> dict[str, object]:
    return {"stages": [{"type": "decontaminate", "benchmarks": benchmarks, **params}]}


def test_bad_benchmarks_are_one_line_config_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    fields = tmp_path / "fields.jsonl"
    fields.write_text(json.dumps({"question": "a b c d e f g h i j k l m n"}) + "\n")
    empty_folder = tmp_path / "none"
    empty_folder.mkdir()
    cases = [
        ([str(empty)], {}, "benchmark file .*empty.jsonl has no records"),
        ([str(blank)], {}, "benchmark file .*blank.txt has no records"),
        ([str(tmp_path / "missing.jsonl")], {}, "no benchmark file or folder at .*missing.jsonl"),
        ([str(fields)], {"text_fields": ["answer"]}, "fields.jsonl has no field 'answer' \\(fields: question\\)"),
        ([str(empty_folder)], {}, "folder .*none holds no .jsonl"),
        ([str(fields), str(fields)], {"text_fields": ["question"]}, "two benchmarks are named 'fields'"),
    ]
    for benchmarks, params, message in cases:
        with pytest.raises(ConfigError, match=message) as caught:
            parse_config(_config(benchmarks, **params))
        assert "\n" not in str(caught.value)


def test_a_folder_is_one_benchmark_and_a_parquet_list_field_is_joined(tmp_path: Path) -> None:
    folder = tmp_path / "mmlu"
    (folder / "sub").mkdir(parents=True)
    table = pa.table({"question": ["What is the capital city of the country that borders Spain"],
                      "choices": [["Paris", "Lyon", "the Pyrenees mountains"]]})
    pq.write_table(table, folder / "sub" / "test.parquet")
    stage = Decontaminate(benchmarks=[str(folder)], text_fields=["question", "choices"], n=8, action="tag")
    out = stage.process(batch_of(["that borders Spain: Paris, Lyon, the Pyrenees mountains", "paris lyon"])).kept
    assert out.column(CONTAMINATED_BY).to_pylist() == ["mmlu", None]
    assert out.column(CONTAMINATED_NGRAM).to_pylist()[0] == "that borders spain paris lyon the pyrenees mountains"


def test_a_run_adds_the_columns_and_counts(tmp_path: Path) -> None:
    import tokpipe.pipeline as pipeline

    bench = tmp_path / "bench.txt"
    bench.write_text("the quick brown fox jumps over the lazy dog near the river bank today\n")
    corpus = tmp_path / "in.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate([
        "He said: The QUICK brown fox jumps over the lazy dog, near the river bank today.", "nothing to see"])))
    config = _config([str(bench)], action="tag")
    result = pipeline.run([str(corpus)], str(tmp_path / "out"), config=config, workers=2)
    kept = pipeline.open_dataset(str(tmp_path / "out")).to_table().sort_by("id")
    assert kept.column(CONTAMINATED_BY).to_pylist() == ["bench", None]
    assert result.stats["decontaminate"].extra["contaminated_bench"] == 1
    assert np.array_equal(kept.column("id").to_pylist(), ["0", "1"])


def test_null_text_is_clean_and_a_pickled_copy_decides_the_same(tmp_path: Path) -> None:
    import pickle

    bench = tmp_path / "b.jsonl"
    words = "one two three four five six seven eight nine ten eleven twelve thirteen"
    bench.write_text(json.dumps({"text": words}) + "\n")
    stage = Decontaminate(benchmarks=[str(bench)], action="tag")
    batch = pa.RecordBatch.from_pydict({"id": ["a", "b", "c"], "text": [
        None, "x One two three four five six seven eight nine ten eleven twelve thirteen", ""]})
    copy = pickle.loads(pickle.dumps(stage))
    for each in (stage, copy):
        assert each.process(batch).kept.column(CONTAMINATED_BY).to_pylist() == [None, "b", None]
    empty = pa.RecordBatch.from_pydict({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())})
    assert stage.process(empty).kept.column(CONTAMINATED_BY).to_pylist() == []

