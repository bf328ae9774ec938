"""The JSON Lines reader's Rust fast path against the standard library's ``json``.

The reader hands blocks of lines to Rust and reads only the lines Rust leaves with ``json``;
the result must be what reading every line with ``json.loads`` gives. The reference here does
exactly that, line by line, from the rules the reader documents (numbering, blank lines,
size limits, id printing, the error reasons), and every case is compared against it: tricky
lines of every kind, tiny blocks and read sizes (so lines straddle blocks and reads), small
batches, byte-range tasks, and every real document of the shared corpora.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import tokpipe.pipeline.readers.lines as lines_module
from tokpipe.pipeline.readers import ReaderOptions

from .helpers import read_all

BOM = b"\xef\xbb\xbf"


def expected_id(value: Any) -> str | None:
    """The reader's documented id rule: strings as they are, numbers printed by Python,
    anything else as sorted JSON; null or absent is None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def reference(path: Path, options: ReaderOptions) -> tuple[list[tuple[str, str, dict[str, Any]]], list[tuple[str, str]]]:
    """(id, text, other fields) of every document and (location, reason) of every bad line,
    reading ``path`` one line at a time with ``json.loads``."""
    data = path.read_bytes()
    pieces = data.split(b"\n")
    if data.endswith(b"\n"):
        pieces.pop()
    max_line = options.max_document_bytes + (1 << 20)
    rows: list[tuple[str, str, dict[str, Any]]] = []
    errors: list[tuple[str, str]] = []
    for i, raw in enumerate(pieces):
        number, where = i + 1, f"line {i + 1}"
        whole = i < len(pieces) - 1 or data.endswith(b"\n")
        line = raw[:-1] if whole and raw.endswith(b"\r") else raw
        if len(line) > max_line:
            errors.append((where, "document_too_large"))
            continue
        if number == 1 and line.startswith(BOM):
            line = line[len(BOM):]
        if not line.strip():
            continue
        try:
            decoded = line.decode("utf-8")
        except UnicodeDecodeError:
            errors.append((where, "invalid_utf8"))
            continue
        try:
            record = json.loads(decoded)
        except (json.JSONDecodeError, RecursionError):
            errors.append((where, "malformed_json"))
            continue
        if not isinstance(record, dict):
            errors.append((where, "malformed_json"))
            continue
        if options.text_field not in record:
            errors.append((where, "missing_text_field"))
            continue
        text = record.pop(options.text_field)
        if text is None:
            errors.append((where, "null_text"))
            continue
        if not isinstance(text, str):
            errors.append((where, "non_string_text_field"))
            continue
        doc_id = expected_id(record.pop(options.id_field, None))
        try:
            size = len(text.encode("utf-8"))
            if doc_id is not None:
                doc_id.encode("utf-8")
        except UnicodeEncodeError:
            errors.append((where, "invalid_utf8"))
            continue
        if size > options.max_document_bytes:
            errors.append((where, "document_too_large"))
            continue
        rows.append((doc_id if doc_id is not None else f"{path}:{number}", text, record))
    return rows, errors


# Lines of every kind the fast path must take, or leave to json, exactly as json reads them.
TRICKY = [
    b'{"id": "a", "text": "plain"}',
    b'{"text": "escapes \\n \\t \\" \\\\ \\/ \\u00e9 \\ud83d\\ude00 \\u0000 end"}',
    '{"text": "raw UTF-8: héllo 漢字 🙂", "id": "ü"}'.encode(),
    b'{"text": ""}',
    b'{"id": 7, "text": "int id"}',
    b'{"id": -3, "text": "negative id"}',
    b'{"id": 0, "text": "zero id"}',
    b'{"id": -0, "text": "minus zero id"}',
    b'{"id": 1.5, "text": "float id"}',
    b'{"id": 1e3, "text": "exponent id"}',
    b'{"id": 1E400, "text": "infinite id"}',
    b'{"id": 123456789012345678901234567890, "text": "big id"}',
    b'{"id": true, "text": "bool id"}',
    b'{"id": false, "text": "bool id"}',
    b'{"id": null, "text": "null id"}',
    b'{"id": "", "text": "empty id"}',
    b'{"id": [2, 1], "text": "array id"}',
    b'{"id": {"b": 1, "a": "\xc3\xa9"}, "text": "object id"}',
    b'{"id": NaN, "text": "NaN id"}',
    b'{"id": -Infinity, "text": "infinity id"}',
    b'{"text": "first", "text": "repeated key: last wins"}',
    b'{"id": 1, "text": "t", "id": "repeated id"}',
    b'{"n": 1, "text": "repeated extra", "n": 2}',
    b'{"te\\u0078t": "escaped key", "\\u0069d": "escaped id key"}',
    b'{"text": "extras", "n": 3, "other": {"k": [1, 2.5, null, true]}, "tags": ["x", "y"]}',
    b'{"text": "deep", "deep": {"k": ' + b"[" * 300 + b"]" * 300 + b"}}",
    b'   {"text": "padded"}   ',
    b'\t{"text": "tab and cr"}\r',
    b'{"text": "cr inside \r is not allowed raw"}',
    b"",
    b"   ",
    b"\x0b",
    b"\x0c \t",
    b'{"text": "broken',
    b'{"text": "trailing"} junk',
    b'["an", "array"]',
    b'"a string"',
    b"42",
    b"null",
    b'{"body": "no text field"}',
    b'{"text": null}',
    b'{"text": 42}',
    b'{"text": ["a"]}',
    b'{"text": {"a": 1}}',
    b'{"text": true}',
    b'{"text": "caf\xe9 latin-1"}',
    b'{"text": "bad \xc3 continuation"}',
    b'{"text": "lone \\ud800 surrogate"}',
    b'{"text": "lone low \\udc00 surrogate"}',
    b'{"text": "ok", "id": "lone \\ud800 in id"}',
    b'{"text": "control \x01 char"}',
    b'{"text": "ok", "x": NaN}',
    b'{"text": "single quotes", \'n\': 1}',
    b"{'text': 'python dict'}",
    b'{"text": "x" , }',
    b'\xef\xbb\xbf{"text": "a BOM not on line 1"}',
    b'{"text": "' + b"long " * 60 + b'"}',
]


def write_lines(path: Path, lines: list[bytes], bom: bool = False, last_newline: bool = True) -> None:
    data = b"\n".join(lines) + (b"\n" if last_newline else b"")
    path.write_bytes((BOM if bom else b"") + data)


def compare(path: Path, options: ReaderOptions, extras: tuple[str, ...] = ("n", "tags")) -> None:
    """The reader against the reference; ``extras`` are fields of one type wherever they
    appear, so their columns hold the values themselves (not the JSON-text fallback)."""
    rows, errors = read_all([path], options)
    want_rows, want_errors = reference(path, options)
    assert [(e.location, e.reason) for e in errors] == want_errors
    assert [(r["id"], r["text"]) for r in rows] == [(i, t) for i, t, _ in want_rows]
    if options.extra_fields:
        for row, (_, _, want) in zip(rows, want_rows):
            for name in extras:
                assert row.get(name) == want.get(name), (row, want)
    else:
        assert all(list(row) == ["id", "text"] for row in rows)


@pytest.fixture(params=[None, (97, 13), (5000, 1000)], ids=["default-blocks", "tiny-blocks", "small-blocks"])
def block_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks and reads small enough that lines straddle both, many times per file."""
    if request.param is not None:
        monkeypatch.setattr(lines_module, "BLOCK_BYTES", request.param[0])
        monkeypatch.setattr(lines_module, "_READ_CHUNK", request.param[1])


@pytest.mark.parametrize("extra_fields", [True, False])
@pytest.mark.parametrize("batch_rows", [1024, 3])
@pytest.mark.parametrize("task_bytes", [64 << 20, 700])
def test_tricky_lines_read_as_json_reads_them(tmp_path: Path, block_size: None, extra_fields: bool, batch_rows: int,
                                             task_bytes: int) -> None:
    lines = [line for _ in range(3) for line in TRICKY]
    random.Random(batch_rows + task_bytes).shuffle(lines)
    path = tmp_path / "tricky.jsonl"
    write_lines(path, lines, bom=True, last_newline=False)
    options = ReaderOptions(max_document_bytes=200, batch_rows=batch_rows, task_bytes=task_bytes,
                            extra_fields=extra_fields)
    compare(path, options)


def test_ids_as_python_prints_them(tmp_path: Path) -> None:
    path = tmp_path / "ids.jsonl"
    write_lines(path, [line for line in TRICKY if line.startswith(b'{"id"')])
    rows, errors = read_all([path])
    want, _ = reference(path, ReaderOptions())
    assert [r["id"] for r in rows] == [i for i, _, _ in want]
    # The reference itself follows Python: spot-check it, so a wrong reference cannot agree.
    assert {"7", "-3", "0", "1.5", "1000.0", "inf", "123456789012345678901234567890", "true", "false", "",
            "[2, 1]", '{"a": "é", "b": 1}', "nan", "-inf", "repeated id"} <= {i for i, _, _ in want}


def test_overlong_lines_straddling_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines_module, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(lines_module, "_READ_CHUNK", 1 << 12)
    huge = b'{"text": "' + b"z" * ((1 << 20) + 300) + b'"}'
    lines = [b'{"text": "a"}', huge, b'{"text": "b"}', huge + b"\r", huge, b'{"text": "c"}']
    path = tmp_path / "huge.jsonl"
    for last_newline in (True, False):
        write_lines(path, lines, last_newline=last_newline)
        compare(path, ReaderOptions(max_document_bytes=100, task_bytes=(1 << 20) // 3))


def test_every_real_document_round_trips(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    """The corpora's documents (books, Chinese notes, Japanese, web pages, raw HTML) written
    by ``json.dumps`` with and without ASCII escapes, plus a field of extras, read back."""
    path = tmp_path / "real.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for n, (name, text) in enumerate(documents):
            f.write(json.dumps({"id": name, "text": text, "n": n, "meta": {"name": name}},
                               ensure_ascii=n % 2 == 0) + "\n")
    for options in (ReaderOptions(), ReaderOptions(task_bytes=1 << 20, batch_rows=5)):
        compare(path, options, extras=("n", "meta"))
        rows, _ = read_all([path], options)
        assert [(r["id"], r["text"]) for r in rows] == documents
