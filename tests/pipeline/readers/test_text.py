"""Text reader: whole files, lines and paragraphs, with their ids and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpipe.errors import CorpusError
from tokpipe.pipeline.readers import ReaderOptions

from .helpers import CORPORA, read_all, require

SAMPLE = "First paragraph,\nline two.\n\n\nSecond paragraph.\r\n   \nThird, 漢字 🙂\n"


def test_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(SAMPLE.encode("utf-8"))
    rows, errors = read_all([path])
    assert errors == [] and rows == [{"id": f"{path}:1", "text": SAMPLE}]


def test_lines(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(SAMPLE.encode("utf-8"))
    rows, errors = read_all([path], ReaderOptions(split="lines"))
    expected = [(f"{path}:{n}", line.rstrip("\r")) for n, line in enumerate(SAMPLE.split("\n"), 1) if line.strip()]
    assert errors == [] and [(row["id"], row["text"]) for row in rows] == expected


def test_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(SAMPLE.encode("utf-8"))
    rows, errors = read_all([path], ReaderOptions(split="paragraphs"))
    assert errors == []
    assert [(row["id"], row["text"]) for row in rows] == [
        (f"{path}:1", "First paragraph,\nline two."),
        (f"{path}:5", "Second paragraph."),
        (f"{path}:7", "Third, 漢字 🙂"),
    ]


@pytest.mark.parametrize("split", ["none", "lines", "paragraphs"])
def test_invalid_utf8_sets_the_document_aside(tmp_path: Path, split: str) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(b"good one\n\ncaf\xe9 bad\n\nlast good\n")
    rows, errors = read_all([path], ReaderOptions(split=split))
    if split == "none":
        assert rows == [] and [(e.location, e.reason) for e in errors] == [("", "invalid_utf8")]
    else:
        assert [row["text"] for row in rows] == ["good one", "last good"]
        assert [(e.location, e.reason) for e in errors] == [("line 3", "invalid_utf8")]


@pytest.mark.parametrize("split", ["none", "lines", "paragraphs"])
def test_too_large(tmp_path: Path, split: str) -> None:
    path = tmp_path / "doc.txt"
    path.write_text("short\n\n" + "long line " * 20 + "\nmore of the long paragraph\n\nend\n", encoding="utf-8")
    rows, errors = read_all([path], ReaderOptions(split=split, max_document_bytes=150))
    if split == "none":
        assert rows == [] and [(e.location, e.reason) for e in errors] == [("", "document_too_large")]
    elif split == "lines":
        assert [row["text"] for row in rows] == ["short", "more of the long paragraph", "end"]
        assert [(e.location, e.reason) for e in errors] == [("line 3", "document_too_large")]
    else:
        assert [row["text"] for row in rows] == ["short", "end"]
        assert [(e.location, e.reason) for e in errors] == [("line 3", "document_too_large")]


@pytest.mark.parametrize("split", ["none", "lines", "paragraphs"])
def test_empty_file(tmp_path: Path, split: str) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    rows, errors = read_all([path], ReaderOptions(split=split))
    assert rows == [] and [(e.path, e.location, e.reason) for e in errors] == [(str(path), "", "empty_file")]


def test_strict(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(CorpusError, match=r"doc\.txt, line 2: invalid_utf8"):
        read_all([path], ReaderOptions(split="lines", strict=True))


def test_real_text_corpus() -> None:
    path = require(CORPORA / "text" / "botchan.txt")
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # a BOM and CRLF line endings
    expected_text = raw[3:].decode("utf-8")
    rows, errors = read_all([path])
    assert errors == [] and rows == [{"id": f"{path}:1", "text": expected_text}]
    rows, errors = read_all([path], ReaderOptions(split="lines"))
    lines = [line.removesuffix("\r") for line in expected_text.split("\n")]
    expected = [(f"{path}:{n}", line) for n, line in enumerate(lines, 1) if line.strip()]
    assert errors == [] and [(row["id"], row["text"]) for row in rows] == expected


def test_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhello\nworld\n")
    rows, _ = read_all([path], ReaderOptions(split="lines"))
    assert [row["text"] for row in rows] == ["hello", "world"]
    json_path = tmp_path / "bom.jsonl"
    json_path.write_bytes(b'\xef\xbb\xbf{"text": "x"}\n')
    rows, errors = read_all([json_path])
    assert errors == [] and [row["text"] for row in rows] == ["x"]
