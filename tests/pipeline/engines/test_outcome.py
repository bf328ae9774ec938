"""A run that reads no document fails (issue 22): ``NoDocumentsError`` once the output is
written, naming the fields the input has and the one likely meant."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tokpipe.errors import NoDocumentsError, PipelineError
from tokpipe.pipeline.engines.outcome import suggest_field


@pytest.mark.parametrize(("given", "names", "expected"), [
    ("content", ["added", "id", "metadata", "text"], "text"),  # no spelling in common: the usual name
    ("txt", ["id", "text", "url"], "text"),
    ("Text", ["id", "text"], "text"),
    ("body_text", ["id", "body", "url"], "body"),
    ("text", ["id", "raw_content"], "raw_content"),
    ("text", ["id", "url", "score"], None),
])
def test_suggest_field(given: str, names: list[str], expected: str | None) -> None:
    assert suggest_field(given, names) == expected


def test_parquet_without_the_text_column_raises_once_the_output_is_written(tmp_path: Path) -> None:
    for n in range(2):
        pq.write_table(pa.table({"id": [f"{n}"], "body": ["some text"], "lang": ["en"]}), tmp_path / f"{n}.parquet")
    out = tmp_path / "out"
    with pytest.raises(NoDocumentsError) as raised:
        pipeline.run([tmp_path / "0.parquet", tmp_path / "1.parquet"], out, workers=1)
    assert isinstance(raised.value, PipelineError)
    assert str(raised.value) == (
        f"{out}: no document was read, all input was set aside as unreadable (2 missing_text_field; see errors.jsonl): "
        "no field 'text' in the input, whose fields are id, body, lang; did you mean 'body'? "
        "(--text-field, or text_field= in Python)")
    result = raised.value.result
    assert result is not None and result.kept == 0 and result.errors == 2
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["errors"] == 2


def test_input_of_other_failures_names_them_without_fields(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{broken\n[1, 2]\n{"text": null}\n', encoding="utf-8")
    with pytest.raises(NoDocumentsError) as raised:
        pipeline.run([tmp_path / "bad.jsonl"], tmp_path / "out", workers=1)
    assert str(raised.value) == (f"{tmp_path / 'out'}: no document was read, all input was set aside as unreadable "
                                 "(2 malformed_json, 1 null_text; see errors.jsonl)")


def test_some_documents_read_is_no_failure(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"content": "x"}\n{"text": "a document long enough to be kept"}\n',
                                      encoding="utf-8")
    result = pipeline.run([tmp_path / "a.jsonl"], tmp_path / "out", workers=1)
    assert result.errors == 1 and result.kept == 1
