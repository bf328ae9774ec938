"""In-memory data (``tokpipe.pipeline.memory``, ``apply`` and ``run``): a ``pyarrow.Table``, a
``datasets.Dataset``, a list of dicts or of strings gives the kept and rejected rows, the read
errors and the stats of a file run of the same documents written as JSON Lines; ids missing
from the data are ``memory:N`` where a file's are ``PATH:N``; data that cannot be documents
is one ``TokpipeError`` line before anything is written."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import tokpipe.pipeline as pipeline
from tokpipe.errors import ArgumentTypeError, InvalidArgumentError, PipelineError, TokpipeError
from tokpipe.pipeline.memory import stage
from tokpipe.pipeline.readers import ReaderOptions

CONFIG = {"stages": [{"type": "normalize"}, {"type": "length_filter", "min": 20}, {"type": "exact_dedup"}]}
LONG = "A document long enough to pass the length filter, number {n}."


def documents() -> list[dict[str, Any]]:
    """Documents of every fate: kept, too short, an exact duplicate (after normalization), a
    null text; some with ids, some without, with extra fields."""
    docs: list[dict[str, Any]] = []
    for n in range(1, 31):
        doc: dict[str, Any] = {"text": LONG.format(n=n), "url": f"https://example.org/{n}", "n": n}
        if n % 3 == 0:
            doc["id"] = f"given-{n}"
        docs.append(doc)
    docs[4]["text"] = "too short"
    docs[9]["text"] = docs[1]["text"]  # a duplicate of document 2
    docs[12]["text"] = "Ａ" + docs[2]["text"][1:]  # NFKC would make it document 3; NFC leaves it
    docs[17]["text"] = None  # set aside by the reader: null_text
    return docs


def file_run(tmp_path: Path, lines: list[Any], **options: Any) -> tuple[pa.Table, pa.Table, list[dict[str, Any]], dict]:
    """The same documents as a JSON Lines file through ``run``: kept, rejected, errors and
    stats, with the file's generated ids (``PATH:N``) renamed ``memory:N``."""
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "file-run"
    result = pipeline.run([str(path)], out, config=CONFIG, **options)
    prefix = f"{path}:"

    def renamed(table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        for row in rows:
            for key in ("id", "duplicate_of"):
                if isinstance(row.get(key), str) and row[key].startswith(prefix):
                    row[key] = "memory:" + row[key][len(prefix):]
        return pa.Table.from_pylist(rows, schema=table.schema)

    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text(encoding="utf-8").splitlines()]
    return (renamed(pipeline.open_dataset(out).to_table()), renamed(pipeline.open_dataset(out, rejected=True).to_table()),
            errors, counts(result.stats))


def as_table(docs: list[dict[str, Any]]) -> pa.Table:
    """The documents as a table: a column per field (null where a document has none)."""
    names = list(dict.fromkeys(name for doc in docs for name in doc))
    return pa.table({name: [doc.get(name) for doc in docs] for name in names})


def counts(stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Stats without their timings."""
    return {name: {k: v for k, v in s.as_dict().items() if k != "seconds"} for name, s in stats.items()}


def assert_same_as_file_run(applied: pipeline.Applied, expected: tuple[pa.Table, pa.Table, list[dict[str, Any]], dict],
                            ) -> None:
    kept, rejected, errors, stats = expected
    assert applied.kept.to_pylist() == kept.to_pylist()
    assert applied.kept.schema.names == kept.schema.names
    assert applied.rejected is not None and applied.rejected.to_pylist() == rejected.to_pylist()
    # The same documents set aside for the same reasons, at the same place ("line N" of the
    # file is row N of the data).
    assert [(e.path, e.location, e.reason) for e in applied.errors] == \
        [("memory", e["location"].replace("line", "row"), e["reason"]) for e in errors]
    assert counts(applied.stats) == stats


def test_a_table_gives_a_file_runs_rows(tmp_path: Path) -> None:
    docs = documents()
    expected = file_run(tmp_path, docs)
    assert expected[0].num_rows == 27 and expected[1].num_rows == 2 and len(expected[2]) == 1
    table = as_table(docs)
    applied = pipeline.apply(table, CONFIG, rejected=True)
    assert_same_as_file_run(applied, expected)
    assert applied.kept.column("id").to_pylist()[:3] == ["memory:1", "memory:2", "given-3"]
    # Several workers and several staged files (one a task): the same rows.
    many = pipeline.apply(table, CONFIG, rejected=True, workers=2, task_bytes=500)
    assert_same_as_file_run(many, expected)
    # The other Arrow shapes, and a pandas DataFrame (its index is not a column).
    frame = table.to_pandas()
    frame.index = frame.index * 7
    for data in (table.to_batches()[0], pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=7)),
                 pads.dataset(table), frame):
        assert_same_as_file_run(pipeline.apply(data, CONFIG, rejected=True), expected)


def test_a_hugging_face_dataset_gives_a_file_runs_rows(tmp_path: Path) -> None:
    docs = documents()
    expected = file_run(tmp_path, docs)
    dataset = datasets.Dataset.from_dict(as_table(docs).to_pydict())
    assert_same_as_file_run(pipeline.apply(dataset, CONFIG, rejected=True), expected)
    # Its selection and order count, not the table under it; a streamed dataset too.
    picked = datasets.Dataset.from_dict(as_table(docs[::-1]).to_pydict()).select(range(len(docs) - 1, -1, -1))
    assert_same_as_file_run(pipeline.apply(picked, CONFIG, rejected=True), expected)
    streamed = datasets.Dataset.from_dict(as_table(docs).to_pydict()).to_iterable_dataset(num_shards=3)
    assert_same_as_file_run(pipeline.apply(streamed, CONFIG, rejected=True), expected)


def test_dicts_give_a_file_runs_rows_and_errors(tmp_path: Path) -> None:
    docs: list[Any] = documents()
    # What a JSON Lines file can hold that is no document: each set aside with its reason.
    docs[20] = {"body": "no text field"}
    docs[21] = {"text": 42}
    docs[22] = "a string among the dicts"
    docs[23] = {"text": "a lone \ud800 surrogate is no UTF-8 text"}
    expected = file_run(tmp_path, docs)
    assert [e["reason"] for e in expected[2]] == ["null_text", "missing_text_field", "non_string_text_field",
                                                  "malformed_json", "invalid_utf8"]
    applied = pipeline.apply(docs, CONFIG, rejected=True)
    assert_same_as_file_run(applied, expected)
    # A generator is read once, as it comes.
    assert_same_as_file_run(pipeline.apply((d for d in docs), CONFIG, rejected=True), expected)


def test_strings_give_a_file_runs_rows(tmp_path: Path) -> None:
    texts = [d["text"] for d in documents()]
    expected = file_run(tmp_path, [{"text": t} for t in texts])
    applied = pipeline.apply(texts, CONFIG, rejected=True)
    assert_same_as_file_run(applied, expected)
    assert applied.kept.schema.names == ["id", "text"]
    assert applied.errors[0].location == "row 18" and applied.errors[0].reason == "null_text"


def test_text_and_id_fields_are_the_readers(tmp_path: Path) -> None:
    docs = [{"body": LONG.format(n=n), "key": n, "text": "an input field named text"} for n in range(5)]
    expected = file_run(tmp_path, docs, text_field="body", id_field="key")
    applied = pipeline.apply(as_table(docs), CONFIG, rejected=True, text_field="body", id_field="key")
    assert_same_as_file_run(applied, expected)
    assert applied.kept.column_names == ["id", "text", "input_text"]
    assert applied.kept.column("id").to_pylist() == ["0", "1", "2", "3", "4"]


def test_errors_in_later_files_name_their_row_in_the_data(tmp_path: Path) -> None:
    texts: list[str | None] = [LONG.format(n=n) for n in range(400)]
    texts[350] = None
    # Written as files of about a task's worth each: row 351 is not the first file's.
    staged = stage(pa.table({"text": texts}), tmp_path, ReaderOptions(task_bytes=1000))
    assert len(staged.files) > 10 and staged.offsets[1] < 350 and staged.rows == 400
    applied = pipeline.apply(pa.table({"text": texts}), CONFIG, task_bytes=1000)
    assert [(e.path, e.location, e.reason) for e in applied.errors] == [("memory", "row 351", "null_text")]
    assert applied.kept.num_rows == 399
    with pytest.raises(PipelineError, match=r"^memory, row 351: null_text: ") as raised:
        pipeline.apply(pa.table({"text": texts}), CONFIG, task_bytes=1000, strict=True)
    assert "tokpipe-apply-" not in str(raised.value)


def test_run_takes_in_memory_data_and_texts(tmp_path: Path) -> None:
    docs = documents()
    expected = file_run(tmp_path, docs)
    result = pipeline.run(as_table(docs), tmp_path / "table", config=CONFIG)
    assert counts(result.stats) == expected[3]
    assert pipeline.open_dataset(tmp_path / "table").to_table().to_pylist() == expected[0].to_pylist()
    result = pipeline.run(docs, tmp_path / "dicts", config=CONFIG, workers=2)
    assert pipeline.open_dataset(tmp_path / "dicts").to_table().to_pylist() == expected[0].to_pylist()
    texts = [d["text"] for d in docs]
    result = pipeline.run(pipeline.texts(texts), tmp_path / "texts", config=CONFIG)
    assert result.kept == expected[0].num_rows
    # A list of strings is still a list of paths.
    with pytest.raises(TokpipeError, match="does not exist|no input files"):
        pipeline.run(["A document, not a path."], tmp_path / "paths", config=CONFIG)


@pytest.mark.parametrize(("data", "error", "message"), [
    (5, ArgumentTypeError, "got a int"),
    ([1, 2, 3], ArgumentTypeError, "first item is a int"),
    ("one text", ArgumentTypeError, "got a str"),
    ({"text": ["a", "b"]}, ArgumentTypeError, "got a dict"),
    (pa.table({"content": ["a", "b"]}), InvalidArgumentError, r"no column 'text' \(columns: content\)"),
    (pa.table({"text": [1, 2]}), ArgumentTypeError, "column 'text' is int64, not text"),
    ([], InvalidArgumentError, "holds no documents"),
    ([{"content": "a"}, {"content": "b"}], InvalidArgumentError, "none of the 2 documents has a field 'text'"),
    ([{"text": "a", "when": object()}], ArgumentTypeError, "document 1: a value of type object cannot be written"),
    (datasets.DatasetDict({"train": datasets.Dataset.from_list([{"text": "a"}])}), ArgumentTypeError,
     r"splits \['train'\]: pass one split"),
])
def test_data_that_cannot_be_documents_is_one_line_before_any_run(data: Any, error: type[Exception], message: str,
                                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(error, match=message) as raised:
        pipeline.apply(data, CONFIG)
    assert isinstance(raised.value, TokpipeError) and "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []  # no run's folder left, none begun


def test_options_of_an_output_folder_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="apply\\(\\) returns tables and keeps no folder: overwrite is run\\(\\)'s"):
        pipeline.apply(["a text"], CONFIG, overwrite=True)


def test_texts_of_run_are_strings() -> None:
    with pytest.raises(ArgumentTypeError, match=r"texts\(\) takes a list \(or iterable\) of strings, not one str$"):
        pipeline.apply(pipeline.texts("one text"), CONFIG)  # type: ignore[arg-type]
