"""``tokpipe.train_bpe``: every input format, and bad input counted, set aside or refused.

The reference for "what the trainer should have seen" is always independent of our readers:
Python's own UTF-8 decoder, ``json`` and ``pyarrow``, handing the texts to ``texts=``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import tokpipe
from tokpipe import CorpusError, CorpusReport, InvalidArgumentError

SMALL = {"vocab_size": 400, "show_progress": False}


def lines_of(text: str) -> list[str]:
    """The sequences HF's file reader makes: each line with its newline."""
    return text.splitlines(keepends=True)


def train(**kwargs: object) -> tuple[tokpipe.Tokenizer, CorpusReport]:
    report: list[CorpusReport] = []
    tok = tokpipe.train_bpe(**{**SMALL, **kwargs}, report=report)  # type: ignore[arg-type]
    return tok, report[0]


@pytest.fixture()
def prose(documents: list[tuple[str, str]]) -> str:
    return documents[0][1][:40_000]


def test_invalid_utf8_is_replaced_and_counted(tmp_path: Path, prose: str) -> None:
    raw = prose.encode() + b"\nbad \xff\xfe bytes\ncut \xe3\x81 short\xc3\n"
    path = tmp_path / "bad.txt"
    path.write_bytes(raw)
    tok, report = train(files=path)
    assert report.invalid_utf8_documents == 2
    assert report.documents == len(lines_of(raw.decode("utf-8", errors="replace")))
    reference = tokpipe.train_bpe(texts=lines_of(raw.decode("utf-8", errors="replace")), **SMALL)
    assert tok.to_str() == reference.to_str()


def test_strict_refuses_invalid_utf8_naming_file_and_line(tmp_path: Path, prose: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nstill fine\nbad \xff\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:3: invalid UTF-8"):
        tokpipe.train_bpe(path, strict=True, **SMALL)


def test_jsonl_bad_records_are_set_aside_with_their_lines(tmp_path: Path, prose: str) -> None:
    good = [prose[:5000], prose[5000:12000], "短い日本語の文。"]
    rows = [json.dumps({"text": good[0], "id": 1}), "{not json", json.dumps({"text": 5}), json.dumps({"body": "x"}),
            json.dumps([1, 2]), json.dumps({"text": good[1]}), "", json.dumps({"text": good[2]}, ensure_ascii=False)]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tok, report = train(files=path)
    assert report.documents == 3
    assert report.set_aside == {"malformed_json": 2, "non_string_text_field": 1, "missing_text_field": 1}
    assert [(Path(p).name, line) for p, line, _ in report.examples] == [("docs.jsonl", n) for n in (2, 3, 4, 5)]
    assert report.examples[1][2].startswith("non_string_text_field")
    assert tok.to_str() == tokpipe.train_bpe(texts=good, **SMALL).to_str()


def test_text_field_is_configurable(tmp_path: Path, prose: str) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"content": prose}) + "\n", encoding="utf-8")
    tok, report = train(files=path, text_field="content")
    assert report.documents == 1 and not report.set_aside
    assert tok.to_str() == tokpipe.train_bpe(texts=[prose], **SMALL).to_str()


def test_gzip_and_zstd_read_like_plain_text(tmp_path: Path, prose: str) -> None:
    records = "".join(json.dumps({"text": chunk}) + "\n" for chunk in (prose[i:i + 3000] for i in range(0, len(prose), 3000)))
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(records.encode()))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(records.encode()))
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(prose.encode()))
    texts = [json.loads(r)["text"] for r in records.splitlines()] * 2 + lines_of(prose)
    tok, report = train(files=tmp_path)
    assert report.files == 3 and report.documents == len(texts)
    assert tok.to_str() == tokpipe.train_bpe(texts=texts, **SMALL).to_str()


def test_corrupt_gzip_keeps_what_was_read_and_says_so(tmp_path: Path, prose: str) -> None:
    whole = gzip.compress(prose.encode() * 4)
    (tmp_path / "cut.txt.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "ok.txt").write_text(prose, encoding="utf-8")
    _, report = train(files=tmp_path)
    assert report.set_aside == {"corrupt_stream": 1}
    assert report.examples[0][0].endswith("cut.txt.gz") and "gzip" in report.examples[0][2]
    assert report.documents > len(lines_of(prose))
    with pytest.raises(CorpusError, match=r"cut\.txt\.gz"):
        tokpipe.train_bpe(tmp_path, strict=True, **SMALL)


def test_one_huge_line_is_one_sequence(tmp_path: Path, prose: str) -> None:
    line = prose.replace("\n", " ")
    huge = line * (16_000_000 // len(line) + 1)
    path = tmp_path / "one-line.txt"
    path.write_text(huge, encoding="utf-8")
    tok, report = train(files=path)
    assert report.documents == 1 and report.bytes == len(huge.encode())
    assert tok.to_str() == tokpipe.train_bpe(texts=[huge], **SMALL).to_str()


def test_parquet_column_with_nulls(tmp_path: Path, prose: str) -> None:
    texts = [prose[i:i + 2000] for i in range(0, len(prose), 2000)]
    column = [t if i % 5 else None for i, t in enumerate(texts)]
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"text": column, "n": list(range(len(column)))}), path)
    tok, report = train(files=path)
    kept = [t for t in column if t is not None]
    assert report.documents == len(kept)
    assert report.set_aside == {"null_text_field": len(column) - len(kept)}
    assert tok.to_str() == tokpipe.train_bpe(texts=kept, **SMALL).to_str()
    with pytest.raises(CorpusError, match="row 0"):
        tokpipe.train_bpe(path, strict=True, **SMALL)
    with pytest.raises(CorpusError, match="no column 'body'"):
        tokpipe.train_bpe(path, text_field="body", **SMALL)
    with pytest.raises(CorpusError, match="not strings"):
        tokpipe.train_bpe(path, text_field="n", **SMALL)


def test_corrupt_parquet_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(CorpusError, match=r"broken\.parquet"):
        tokpipe.train_bpe(tmp_path, **SMALL)


def test_missing_and_empty_corpora_are_corpus_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such file"):
        tokpipe.train_bpe(tmp_path / "absent", **SMALL)
    with pytest.raises(CorpusError, match="no training files"):
        tokpipe.train_bpe(tmp_path, **SMALL)
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(CorpusError, match="no text"):
        tokpipe.train_bpe(tmp_path, **SMALL)
    with pytest.raises(CorpusError, match="no text"):
        tokpipe.train_bpe(texts=iter(()), **SMALL)


def test_vocabulary_too_small_for_bytes_and_specials() -> None:
    with pytest.raises(InvalidArgumentError, match="at least 258"):
        tokpipe.train_bpe(texts=["abc"], vocab_size=257, special_tokens=["<a>", "<b>"], show_progress=False)
    with pytest.raises(InvalidArgumentError, match="given twice"):
        tokpipe.train_bpe(texts=["abc"], special_tokens=["<a>", "<a>"], show_progress=False)


def test_inputs_are_files_or_texts_never_guessed(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        tokpipe.train_bpe(**SMALL)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        tokpipe.train_bpe(tmp_path, texts=["a"], **SMALL)
    with pytest.raises(TypeError, match="not one string"):
        tokpipe.train_bpe(texts="a whole string", **SMALL)
    with pytest.raises(TypeError, match="must be strings"):
        tokpipe.train_bpe(texts=["a", 3], **SMALL)  # type: ignore[list-item]


def test_trained_tokenizer_round_trips_every_document(documents: list[tuple[str, str]]) -> None:
    tok = tokpipe.train_bpe(texts=(text for _, text in documents), vocab_size=1500, show_progress=False)
    assert tok.special_tokens == {"<|endoftext|>": 0}
    for name, text in documents:
        assert tok.decode(tok.encode(text)) == text, name
    assert tok.encode("<|endoftext|>", allowed_special="all") == [0]
