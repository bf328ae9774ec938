"""WARC reader: the real sample archive (checked against a standard-library parse), synthetic
records of every kind, a truncated archive, and the missing-extra message."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

from tokpipe.errors import CorpusError

from .helpers import CORPORA, read_all, require

SAMPLE = CORPORA / "web" / "sample-0000.warc.gz"


def _records(raw: bytes) -> list[tuple[dict[str, str], bytes]]:
    """(WARC headers, block) of every record, parsed with the standard library only."""
    records = []
    position = 0
    while position < len(raw):
        head_end = raw.index(b"\r\n\r\n", position)
        lines = raw[position:head_end].decode("utf-8").split("\r\n")
        assert lines[0].startswith("WARC/")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        length = int(headers["Content-Length"])
        block = raw[head_end + 4 : head_end + 4 + length]
        records.append((headers, block))
        position = head_end + 4 + length + 4  # the block is followed by CRLF CRLF
    return records


def _http_content_type(block: bytes) -> str:
    head = block.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type":
            return value.strip().lower()
    return ""


def test_real_sample_archive() -> None:
    records = _records(gzip.decompress(require(SAMPLE).read_bytes()))
    expected = [
        (headers["WARC-Record-ID"], headers["WARC-Target-URI"].strip("<>"), headers["WARC-Date"])
        for headers, block in records
        if headers["WARC-Type"] == "response" and "html" in _http_content_type(block)
    ]
    assert len(expected) == 22

    rows, errors = read_all([SAMPLE])

    assert errors == []
    assert [(row["id"], row["url"], row["warc_date"]) for row in rows] == expected
    assert all(row["content_type"] == "text/html" for row in rows)
    # Main-content text, not markup.
    assert all(row["text"].strip() and "<div" not in row["text"] for row in rows)
    assert any("Semantic Scholar" in row["text"] for row in rows)


def _record(warc_type: str, content_type: str, block: bytes, record_id: str) -> bytes:
    head = (
        f"WARC/1.0\r\nWARC-Type: {warc_type}\r\nWARC-Record-ID: {record_id}\r\n"
        f"WARC-Target-URI: http://example.com/{record_id[-2:-1]}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(block)}\r\n\r\n"
    )
    return head.encode() + block + b"\r\n\r\n"


def _http(content_type: str, body: bytes) -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n\r\n".encode() + body


def test_which_records_become_documents(tmp_path: Path) -> None:
    html = b"<html><body><article><h1>Title</h1><p>The main text of the page, long enough to be the main content of it.</p></article></body></html>"
    archive = b"".join(
        [
            _record("request", "application/http;msgtype=request", b"GET / HTTP/1.1\r\n\r\n", "<urn:uuid:1>"),
            _record("response", "application/http;msgtype=response", _http("text/html; charset=utf-8", html), "<urn:uuid:2>"),
            _record("response", "application/http;msgtype=response", _http("image/png", b"\x89PNG..."), "<urn:uuid:3>"),
            _record("response", "application/http;msgtype=response", _http("text/plain", "plain café".encode()), "<urn:uuid:4>"),
            _record("conversion", "text/plain", "wet text".encode(), "<urn:uuid:5>"),
        ]
    )
    path = tmp_path / "synthetic.warc"
    path.write_bytes(archive)
    rows, errors = read_all([path])
    assert errors == []
    assert [(row["id"], row["url"], row["content_type"]) for row in rows] == [
        ("<urn:uuid:2>", "http://example.com/2", "text/html"),
        ("<urn:uuid:4>", "http://example.com/4", "text/plain"),
        ("<urn:uuid:5>", "http://example.com/5", "text/plain"),
    ]
    assert "The main text of the page" in rows[0]["text"] and "<p>" not in rows[0]["text"]
    assert [row["text"] for row in rows[1:]] == ["plain café", "wet text"]


def test_truncated_archive_keeps_the_records_before(tmp_path: Path) -> None:
    compressed = require(SAMPLE).read_bytes()  # one gzip member per record, as WARC tools write
    path = tmp_path / "cut.warc.gz"
    path.write_bytes(compressed[: len(compressed) // 2])
    whole, _ = read_all([SAMPLE])
    rows, errors = read_all([path])
    assert 0 < len(rows) < len(whole)
    assert rows == whole[: len(rows)]
    assert [e.reason for e in errors] == ["corrupt_stream"] and errors[0].location.startswith("record ")


def test_empty_archive(tmp_path: Path) -> None:
    path = tmp_path / "empty.warc.gz"
    path.write_bytes(b"")
    rows, errors = read_all([path])
    assert rows == [] and [(e.location, e.reason) for e in errors] == [("", "empty_file")]


def test_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastwarc.warc", None)  # makes the import fail
    with pytest.raises(CorpusError, match=r"pip install 'tokpipe\[warc\]'"):
        read_all([require(SAMPLE)])
