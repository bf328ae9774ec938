"""The schema rule for extra fields (``tokpipe.pipeline.fields``): records read as ``json``
reads them, deep values kept as JSON text, and one schema for a run that never fails and never
depends on how the documents were cut into batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe.pipeline as pipeline
from tokpipe.pipeline.fields import JSON, MAX_NESTING, JsonText, conform, field_column, loads_record, union_schema


def nested(depth: int, leaf: Any = 1, kind: str = "list") -> Any:
    value = leaf
    for n in range(depth):
        value = [value] if kind == "list" or n % 2 else {"k": value}
    return value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), st.integers(0, 2))
def test_shallow_records_read_exactly_as_json_reads_them(record: dict[str, Any], indent: int) -> None:
    text = json.dumps(record, indent=indent or None)
    assert loads_record(text) == json.loads(text)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 40, 200])
@pytest.mark.parametrize("kind", ["list", "mixed"])
def test_a_deep_value_is_its_json_text_and_the_others_are_parsed(depth: int, kind: str) -> None:
    record = {"id": "x", "text": "t", "deep": nested(depth, kind=kind), "shallow": nested(MAX_NESTING, kind=kind),
              "s": "a \"quoted\" [bracket {"}
    text = json.dumps(record)
    got = loads_record(text)
    assert isinstance(got["deep"], JsonText)
    # The reference: the standard library, given the stack to parse the deep value.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * depth))
    try:
        assert json.loads(got["deep"]) == record["deep"]
    finally:
        sys.setrecursionlimit(limit)
    assert {k: v for k, v in got.items() if k != "deep"} == {k: v for k, v in record.items() if k != "deep"}


def test_a_value_too_deep_for_python_is_kept_without_recursion() -> None:
    deep = "[" * 100_000 + "1" + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    got = loads_record('{"text": "t", "meta": ' + deep + "}")
    assert got == {"text": "t", "meta": deep}


# Malformed lines deep enough for the splitting reader, shallow enough for json.loads to be the
# reference: every one must be refused, as json.loads refuses it.
DEEP = 40
MALFORMED = [
    '{"text": "t", "m": ' + "[" * DEEP + "1" + "]" * (DEEP - 1) + "}",       # a list left open
    '{"text": "t", "m": ' + "[" * DEEP + "1," + "]" * DEEP + "}",            # trailing comma
    '{"text": "t", "m": ' + "[" * DEEP + "1 2" + "]" * DEEP + "}",           # missing comma
    '{"text": "t", "m": ' + "[" * DEEP + "tru" + "]" * DEEP + "}",           # bad literal
    '{"text": "t", "m": ' + "[" * DEEP + '"a\x01b"' + "]" * DEEP + "}",      # raw control character
    '{"text": "t", "m": ' + "[" * DEEP + "{1: 2}" + "]" * DEEP + "}",        # a key that is no string
    '{"text": "t", "m": ' + "[" * DEEP + '{"a" 2}' + "]" * DEEP + "}",       # missing colon
    '{"text": "t", "m": ' + "[" * DEEP + "1" + "]" * DEEP + "} extra",       # data after the object
    '{"text": "t" "m": ' + "[" * DEEP + "1" + "]" * DEEP + "}",              # missing comma between fields
    '{"text": "t", "m": ' + "[" * DEEP + "01" + "]" * DEEP + "}",            # leading zero
    "[" * DEEP + "1" + "]" * DEEP,                                           # not an object
]


@pytest.mark.parametrize("line", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_deep_lines_are_refused_as_json_refuses_them(line: str) -> None:
    if line.startswith("{"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)
    with pytest.raises(json.JSONDecodeError):
        loads_record(line)


def test_batch_rule() -> None:
    assert field_column([1, 2, None]).type == pa.int64()
    assert field_column([1, 2.5]).type == pa.float64()
    mixed = field_column([1, "a", True, 2.5, None])
    assert mixed.type == pa.string() and mixed.to_pylist() == ["1", "a", "true", "2.5", None]
    clash = field_column([{"a": 1}, "a", [1]])
    assert clash.type == JSON and [json.loads(v) for v in clash.to_pylist()] == [{"a": 1}, "a", [1]]
    assert field_column([nested(MAX_NESTING)]).type != JSON
    deep = field_column([nested(MAX_NESTING + 1), [1]])
    assert deep.type == JSON and json.loads(deep.to_pylist()[0]) == nested(MAX_NESTING + 1)
    surrogate = field_column(["\ud800", 1])
    assert surrogate.type == JSON and [json.loads(v) for v in surrogate.to_pylist()] == ["\ud800", 1]


@pytest.mark.parametrize(("kinds", "want"), [
    ([pa.int64(), pa.float64()], pa.float64()),
    ([pa.int32(), pa.int64(), pa.null()], pa.int64()),
    ([pa.uint8(), pa.int16()], pa.int64()),
    ([pa.uint64(), pa.int8()], pa.float64()),
    ([pa.int64(), pa.string()], pa.string()),
    ([pa.bool_(), pa.float64()], pa.string()),
    ([pa.string(), pa.large_string()], pa.large_string()),
    ([pa.list_(pa.null()), pa.list_(pa.int64())], pa.list_(pa.int64())),
    ([pa.struct([("a", pa.int64())]), pa.string()], JSON),
    ([pa.list_(pa.int64()), pa.struct([("a", pa.int64())])], JSON),
    ([JSON, pa.int64()], JSON),
    ([pa.null()], pa.null()),
])
def test_run_rule(kinds: list[pa.DataType], want: pa.DataType) -> None:
    schemas = [pa.schema([("f", kind)]) for kind in kinds]
    assert union_schema(schemas).field("f").type == want


RECORDS: list[dict[str, Any]] = [
    {"year": 2020, "score": 1, "meta": {"a": 1, "b": "x"}, "tags": ["a"], "deep": [1], "big": 2**60, "huge": 1,
     "empty": {}},
    {"year": "2021", "score": 2.5, "meta": "unknown", "tags": [], "flag": True, "big": 0.5, "huge": 0.5},
    {"score": None, "meta": {"a": 2, "b": "y"}, "flag": 3, "deep": nested(MAX_NESTING + 3), "huge": 2**70,
     "empty": {}},
    {"year": 1999, "score": 7, "tags": ["b", "c"], "flag": "yes", "deep": [2], "big": 7},
    {"year": 2000.5, "meta": {"a": 3, "b": None}, "empty": {}},
]


def table_of(cut: list[int]) -> pa.Table:
    """The records as batches cut at ``cut``, each built by the batch rule, conformed to the
    run's one schema."""
    bounds = [0, *cut, len(RECORDS)]
    batches = []
    for lo, hi in zip(bounds, bounds[1:]):
        rows = RECORDS[lo:hi]
        names = list(dict.fromkeys(k for r in rows for k in r))
        batches.append(pa.RecordBatch.from_pydict({n: field_column([r.get(n) for r in rows]) for n in names}))
    schema = union_schema([b.schema for b in batches])
    return pa.Table.from_batches([conform(b, schema) for b in batches], schema=schema)


def test_the_run_schema_does_not_depend_on_the_batch_cut() -> None:
    whole = table_of([])
    for cut in ([1], [2], [1, 2, 3, 4], [3]):
        assert table_of(cut).equals(whole), cut
    assert whole.schema.field("year").type == pa.string()
    assert whole.column("year").to_pylist() == ["2020", "2021", None, "1999", "2000.5"]
    assert whole.schema.field("score").type == pa.float64()
    assert whole.schema.field("meta").type == JSON and whole.schema.field("deep").type == JSON
    assert [None if v is None else json.loads(v) for v in whole.column("meta").to_pylist()] == \
        [{"a": 1, "b": "x"}, "unknown", {"a": 2, "b": "y"}, None, {"a": 3, "b": None}]
    assert json.loads(whole.column("deep").to_pylist()[2]) == nested(MAX_NESTING + 3)
    assert whole.column("flag").to_pylist() == [None, "true", "3", "yes", None]
    # Integers beyond 2**53 beside floats round to floats; beyond 64 bits, the field is text.
    assert whole.schema.field("big").type == pa.float64()
    assert whole.column("big").to_pylist() == [float(2**60), 0.5, None, 7.0, None]
    assert whole.column("huge").to_pylist() == ["1", "0.5", str(2**70), None, None]
    # An empty object is JSON text: Parquet cannot store a struct without fields.
    assert whole.schema.field("empty").type == JSON
    assert [None if v is None else json.loads(v) for v in whole.column("empty").to_pylist()] == \
        [{}, None, {}, None, {}]


def test_odd_values_never_fail_the_run(tmp_path: Path) -> None:
    # Each of these ended the run at the pack step, after all the work, and every rerun
    # (issue 19 and its second read): a field that is {} in every record of a batch, and an
    # integer beyond 2**53 in one file beside a float in another (top level and nested).
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_lines(inputs / "a.jsonl", [json.dumps({"id": f"a{n}", "text": f"{TEXT} a{n}", "meta": {}, "n": 2**60,
                                                 "s": {"x": 2**60}}) for n in range(3)])
    write_lines(inputs / "b.jsonl", [json.dumps({"id": "b", "text": TEXT + " b", "n": 0.5, "s": {"x": 0.5}})])
    result = pipeline.run([inputs], tmp_path / "out", workers=1)
    assert result.kept == 4
    table = kept(tmp_path / "out")
    rows = {r["id"]: r for r in table.to_pylist()}
    assert rows["a0"]["n"] == float(2**60) and rows["b"]["n"] == 0.5
    assert json.loads(rows["a0"]["meta"]) == {} and rows["b"]["meta"] is None


# ---------------------------------------------------------------------------------------------
# The defects of issue 19 through a whole run: each ended the run (and every rerun) before.


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


TEXT = "A document long enough to pass the default length filter of the pipeline. " * 3


def kept(out: Path) -> pa.Table:
    return pq.read_table(sorted(out.glob("data/part-*.parquet")))


@pytest.mark.parametrize("depth", [50, 3000])
def test_a_deeply_nested_field_keeps_its_record(tmp_path: Path, depth: int) -> None:
    meta = "[" * depth + "1" + "]" * depth
    write_lines(tmp_path / "in.jsonl", ['{"id": "deep", "text": "%s", "meta": %s}' % (TEXT, meta),
                                        json.dumps({"id": "flat", "text": TEXT + "other", "meta": [2]})])
    result = pipeline.run([tmp_path / "in.jsonl"], tmp_path / "out", workers=1)
    assert result.errors == 0 and result.kept == 2
    table = kept(tmp_path / "out")
    assert table.schema.field("meta").type == JSON
    assert dict(zip(table.column("id").to_pylist(), table.column("meta").to_pylist())) == {"deep": meta, "flat": "[2]"}


@pytest.mark.parametrize("same_file", [False, True], ids=["across-files", "across-batches"])
def test_a_field_whose_type_changes_widens_instead_of_failing(tmp_path: Path, same_file: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    first = [json.dumps({"id": f"a{n}", "text": f"{TEXT} {n}", "meta": n}) for n in range(1030)]
    second = [json.dumps({"id": "b", "text": TEXT + " last", "meta": "a string"})]
    if same_file:  # past the first 1,024-record batch
        write_lines(inputs / "one.jsonl", first + second)
    else:
        write_lines(inputs / "a.jsonl", first[:3])
        write_lines(inputs / "b.jsonl", second)
    result = pipeline.run([inputs], tmp_path / "out", workers=2)
    assert result.errors == 0
    table = kept(tmp_path / "out")
    assert table.schema.field("meta").type == pa.string()
    values = dict(zip(table.column("id").to_pylist(), table.column("meta").to_pylist()))
    assert values["a1"] == "1" and values["b"] == "a string"
    # The folder reads as one table, as the dataset card promises.
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    loaded = datasets.load_dataset(str(tmp_path / "out"), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert sorted(loaded["id"]) == sorted(values)
