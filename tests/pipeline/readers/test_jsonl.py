"""JSON Lines reader: round trips in every compression, every bad-line case, real data."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
import zstandard

from tokpipe.errors import CorpusError
from tokpipe.pipeline.readers import ReadError, ReaderOptions
from tokpipe.pipeline.readers.base import fields_in_detail

from .helpers import CORPORA, read_all, require

RECORDS = [
    {"id": "a", "text": "hello world", "n": 1, "meta": {"lang": "en"}},
    {"id": 7, "text": "héllo ünïcode 漢字 🙂", "n": 2, "meta": {"lang": "fr"}},
    {"text": "no id here", "n": 3, "meta": None},
    {"id": "d", "text": "", "n": 4, "meta": {"lang": "de"}},
]


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


@pytest.mark.parametrize("name", ["docs.jsonl", "docs.ndjson", "docs.json", "docs.jsonl.gz", "docs.jsonl.zst"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    data = _jsonl(RECORDS)
    if name.endswith(".gz"):
        data = gzip.compress(data)
    elif name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path = tmp_path / name
    path.write_bytes(data)

    rows, errors = read_all([path])

    assert errors == []
    expected_ids = ["a", "7", f"{path}:3", "d"]
    assert [row["id"] for row in rows] == expected_ids
    assert [row["text"] for row in rows] == [record["text"] for record in RECORDS]
    assert [row["n"] for row in rows] == [1, 2, 3, 4]
    assert [row["meta"] for row in rows] == [{"lang": "en"}, {"lang": "fr"}, None, {"lang": "de"}]
    assert list(rows[0]) == ["id", "text", "n", "meta"]


def test_generated_ids_count_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('\n{"text": "one"}\n   \n{"text": "two"}\n', encoding="utf-8")
    rows, errors = read_all([path])
    assert errors == []
    assert [(row["id"], row["text"]) for row in rows] == [(f"{path}:2", "one"), (f"{path}:4", "two")]


def test_batches_are_bounded_by_batch_rows(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(_jsonl([{"text": f"doc {n}"} for n in range(25)]))
    rows, errors = read_all([path], ReaderOptions(batch_rows=4))  # read_all checks each batch's size
    assert errors == [] and [row["text"] for row in rows] == [f"doc {n}" for n in range(25)]


def test_custom_fields_and_colliding_names(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(_jsonl([{"content": "body", "doc_id": "x1", "id": 99, "text": "other"}]))
    rows, errors = read_all([path], ReaderOptions(text_field="content", id_field="doc_id"))
    assert errors == []
    assert rows == [{"id": "x1", "text": "body", "input_id": 99, "input_text": "other"}]


def test_mixed_scalar_field_widens_to_strings_and_other_clashes_are_json(tmp_path: Path) -> None:
    # The batch rule of tokpipe.pipeline.fields: scalars of different kinds become strings
    # (numbers and booleans as JSON prints them), a clash with a list or an object JSON text.
    path = tmp_path / "docs.jsonl"
    path.write_bytes(_jsonl([{"text": "a", "score": 1, "meta": {"k": [1]}, "flag": True},
                             {"text": "b", "score": "high", "meta": "plain", "flag": 2.5}]))
    rows, errors = read_all([path])
    assert errors == []
    assert [row["score"] for row in rows] == ["1", "high"]
    assert [row["flag"] for row in rows] == ["true", "2.5"]
    assert [json.loads(row["meta"]) for row in rows] == [{"k": [1]}, "plain"]


def test_every_bad_line_is_reported_once_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    lines = [
        b'{"text": "good 1"}',
        b'{"text": "broken',
        b'["an", "array"]',
        b'{"body": "no text field"}',
        b'{"text": 42}',
        b'{"text": null}',
        b'{"text": "caf\xe9 latin-1"}',
        b'{"text": "lone \\ud800 surrogate"}',
        b'{"text": "' + b"x" * 200 + b'"}',
        b"",
        b'{"text": "good 11"}',
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")

    rows, errors = read_all([path], ReaderOptions(max_document_bytes=100))

    assert [(row["id"], row["text"]) for row in rows] == [(f"{path}:1", "good 1"), (f"{path}:11", "good 11")]
    assert [(error.location, error.reason) for error in errors] == [
        ("line 2", "malformed_json"),
        ("line 3", "malformed_json"),
        ("line 4", "missing_text_field"),
        ("line 5", "non_string_text_field"),
        ("line 6", "null_text"),
        ("line 7", "invalid_utf8"),
        ("line 8", "invalid_utf8"),
        ("line 9", "document_too_large"),
    ]
    assert all(error.path == str(path) for error in errors)
    # No error's detail quotes the document.
    for error in errors:
        assert "latin-1" not in error.detail and "xxxx" not in error.detail and "broken" not in error.detail


def test_overlong_line_is_skipped_without_parsing(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    huge = b'{"text": "' + b"y" * ((1 << 20) + 500) + b'"}'
    path.write_bytes(b'{"text": "before"}\n' + huge + b'\n{"text": "after"}\n')
    rows, errors = read_all([path], ReaderOptions(max_document_bytes=10))
    assert [row["text"] for row in rows] == ["before", "after"]
    assert [(error.location, error.reason) for error in errors] == [("line 2", "document_too_large")]


def _complete_lines(partial: bytes) -> list[bytes]:
    return partial.split(b"\n")[:-1]


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    data = _jsonl([{"text": f"document number {n} " * 5} for n in range(5000)])
    compressed = gzip.compress(data)
    truncated = compressed[: len(compressed) // 2]
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(truncated)
    # What the standard library can decompress of the truncated file, in whole lines.
    readable = _complete_lines(zlib.decompressobj(wbits=31).decompress(truncated))

    rows, errors = read_all([path])

    assert [row["text"] for row in rows] == [json.loads(line)["text"] for line in readable]
    assert [(error.location, error.reason) for error in errors] == [(f"line {len(readable) + 1}", "corrupt_stream")]


def test_corrupt_gzip_ends_with_one_stream_error(tmp_path: Path) -> None:
    data = _jsonl([{"text": f"document {n}"} for n in range(20000)])
    compressed = bytearray(gzip.compress(data))
    middle = len(compressed) // 2
    compressed[middle : middle + 64] = b"\xff" * 64
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(bytes(compressed))

    rows, errors = read_all([path])

    # Deflate may decode damaged bytes into garbage lines (reported one by one) before zlib or
    # the CRC check notices; either way the stream ends with exactly one corrupt_stream error.
    assert [error.reason for error in errors].count("corrupt_stream") == 1
    assert errors[-1].reason == "corrupt_stream"
    # Everything before the damage is kept, in order: the lines the standard library decodes
    # from the bytes before the damaged ones.
    intact = len(_complete_lines(zlib.decompressobj(wbits=31).decompress(bytes(compressed[:middle]))))
    assert intact > 1000
    assert [row["text"] for row in rows[:intact]] == [f"document {n}" for n in range(intact)]


def test_truncated_zstd_keeps_what_was_read(tmp_path: Path) -> None:
    data = _jsonl([{"text": f"zstd document {n} " * 3} for n in range(20000)])
    compressed = zstandard.ZstdCompressor().compress(data)
    truncated = compressed[: len(compressed) // 2]
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(truncated)
    readable = _complete_lines(zstandard.ZstdDecompressor().decompressobj().decompress(truncated))

    rows, errors = read_all([path])

    assert [row["text"] for row in rows] == [json.loads(line)["text"] for line in readable]
    assert [(error.location, error.reason) for error in errors] == [(f"line {len(readable) + 1}", "corrupt_stream")]


def test_corrupt_zstd_keeps_the_lines_before_the_damage(tmp_path: Path) -> None:
    # One frame of several 128 KB blocks, damaged past the middle: the lines decoded before
    # the damage are kept, and the error names the line where reading stopped (issue 19:
    # all were lost, and the error said "line 1").
    data = _jsonl([{"text": f"zstd document {n} " * 3} for n in range(20000)])
    good = zstandard.ZstdCompressor().compress(data)
    assert len(good) < 128 << 10 < len(data) // 4

    def damaged(k: int) -> bytes:
        bad = bytearray(good)
        at = len(good) * 3 // 4 + k * 97
        bad[at:at + 16] = b"\xff" * 16
        return bytes(bad)

    def decoded(compressed: bytes) -> tuple[bytes, bool]:
        """What zstandard decodes, fed a few bytes at a time (so it gives each block as it
        ends), and whether it found the damage."""
        decoder = zstandard.ZstdDecompressor().decompressobj()
        out = bytearray()
        try:
            for start in range(0, len(compressed), 64):
                out += decoder.decompress(compressed[start:start + 64])
        except zstandard.ZstdError:
            return bytes(out), True
        return bytes(out), False

    # Damage the decoder notices: zstd frames carry no checksum by default, so some damage
    # only decodes to other bytes.
    compressed = next(bad for bad in map(damaged, range(64)) if decoded(bad)[1])
    intact = _complete_lines(decoded(compressed)[0])
    assert len(intact) > 5000
    path = tmp_path / "bad.jsonl.zst"
    path.write_bytes(compressed)

    rows, errors = read_all([path])

    # The lines before the damage, but for those of the last 16 KiB decoded before it (the
    # reader's decoding step: a failing step loses what it decoded).
    lost = len(intact) - len(rows)
    assert 0 <= lost and sum(len(line) + 1 for line in intact[len(rows):]) <= 16 << 10
    assert [row["text"] for row in rows] == [json.loads(line)["text"] for line in intact[:len(rows)]]
    assert [(error.location, error.reason) for error in errors] == [(f"line {len(rows) + 1}", "corrupt_stream")]


def test_multi_frame_zstd(tmp_path: Path) -> None:
    compressor = zstandard.ZstdCompressor()
    path = tmp_path / "frames.jsonl.zst"
    path.write_bytes(compressor.compress(_jsonl(RECORDS[:2])) + compressor.compress(_jsonl(RECORDS[2:])))
    rows, errors = read_all([path])
    assert errors == [] and [row["text"] for row in rows] == [record["text"] for record in RECORDS]


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.jsonl", b""), ("blank.jsonl", b"\n  \n\n"), ("empty.jsonl.gz", gzip.compress(b""))],
)
def test_empty_file(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    rows, errors = read_all([path])
    assert rows == []
    assert errors == [ReadError(str(path), "", "empty_file", errors[0].detail)]


def test_strict_raises_at_the_first_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{oops\n{"text": 1}\n')
    with pytest.raises(CorpusError) as raised:
        read_all([path], ReaderOptions(strict=True))
    message = str(raised.value)
    assert str(path) in message and "line 2" in message and "malformed_json" in message
    assert "\n" not in message


def test_a_100_mb_single_line(tmp_path: Path) -> None:
    text = "0123456789abcdef" * (100 * (1 << 20) // 16)
    path = tmp_path / "big.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"text": "')
        f.write(text)
        f.write('"}\n{"text": "small"}\n')
    rows, errors = read_all([path])
    assert errors == []
    assert len(rows) == 2 and rows[0]["text"] == text and rows[1]["text"] == "small"


def test_real_common_crawl_jsonl_gz() -> None:
    files = sorted(require(CORPORA / "web").glob("*.jsonl.gz"))
    assert len(files) == 2
    rows, errors = read_all(files)
    expected = []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            expected.extend(json.loads(line) for line in f)
    assert errors == []
    assert [row["id"] for row in rows] == [record["id"] for record in expected]
    assert [row["text"] for row in rows] == [record["text"] for record in expected]
    assert [row["metadata"]["perplexity"] for row in rows] == [record["metadata"]["perplexity"] for record in expected]
    assert [row["source"] for row in rows] == [record["source"] for record in expected]


def test_malformed_json_detail_names_the_column_once(tmp_path: Path) -> None:
    # json's "Unterminated string starting at" with " at column 10" glued on read "at at column".
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "broken\n{"text": }\n')
    rows, errors = read_all([path])
    assert rows == []
    assert [error.detail for error in errors] == ["Unterminated string starting at: column 10",
                                                  "Expecting value: column 10"]


def test_a_record_without_the_text_field_lists_the_fields_it_has(tmp_path: Path) -> None:
    """So that a run that read nothing can say which field was meant (issue 22): names only,
    never values, at most 20 of them, each cut at 40 characters."""
    path = tmp_path / "docs.jsonl"
    wide = {f"f{n:02d}": n for n in range(25)}
    long_name = "n" * 50
    path.write_text(json.dumps({"id": "a", "text": "secret words", "url": "u"}) + "\n"
                    + json.dumps({long_name: 1, "body": "more secret"}) + "\n" + json.dumps(wide) + "\n", encoding="utf-8")
    _, errors = read_all([path], ReaderOptions(text_field="content"))
    assert [e.detail for e in errors] == [
        'no field \'content\'; fields: ["id", "text", "url"]',
        'no field \'content\'; fields: ["' + "n" * 37 + '...", "body"]',
        'no field \'content\'; fields: [' + ", ".join(f'"f{n:02d}"' for n in range(20)) + '] and 5 more',
    ]
    assert fields_in_detail(errors[0].detail) == (["id", "text", "url"], 0)
    assert fields_in_detail(errors[2].detail)[1] == 5
    assert fields_in_detail("no field 'content'") == ([], 0)
