"""WARC reader: web pages from ``.warc``, ``.warc.gz`` (HTML extracted) and ``.wet.gz`` (text).

Needs the ``warc`` extra (``pip install 'tokpipe[warc]'``): FastWARC parses the archive and
Resiliparse turns HTML into text. Without them, reading a WARC raises ``CorpusError`` naming
that install command.

Documents: ``response`` records whose HTTP content type is HTML (main content extracted) or
plain text (decoded as is), and, in WET files, ``conversion`` records (already text). Other
records (requests, metadata, images, PDFs...) are not documents and are passed over. A
document's id is its ``WARC-Record-ID`` (stable and unique by the WARC standard); further
columns: ``url`` (``WARC-Target-URI``), ``warc_date`` and ``content_type`` (the HTTP content
type, or the record's for WET). ``location`` in errors is ``"record N"``, N the 1-based number
of the record in the file counting every record type. A page can extract to an empty text; it
is still yielded (a filter stage decides what is too short).

Bytes are decoded with the page's declared charset, else as UTF-8 when they are valid UTF-8,
else with a detected charset; undecodable bytes
are replaced, since web pages in the wild mix encodings and the extractor must see the page.

Extractor choice (``benches/python/bench_extract.py``, ``benches/RESULTS.md``): on the Python
docs rendered as HTML (496 pages, 47 MB) Resiliparse with ``main_content=True`` extracted 190
pages/s with a bag-of-words F1 of 0.907 against the pages' reST sources; trafilatura 10 pages/s
and 0.894; Resiliparse without main-content detection 426 pages/s but 0.787 (menus, sidebars,
footers kept). On the 22 real pages of ``sample-0000.warc.gz``: 865 vs 58 pages/s. Resiliparse
with main-content detection is as good as trafilatura and 19x faster.

Broken archives: a record whose body is shorter than its ``Content-Length`` (a truncated file)
or a decompression error ends the file with one ``corrupt_stream`` error at that record; the
documents before it are kept. FastWARC can stop quietly at a truncation that falls inside
record headers, so a ``.gz`` archive read without error is also checked end to end with the
standard library's gzip, and a failure there is reported after the last record read.
"""

from __future__ import annotations

import os
import zlib
from typing import Any, Callable, Iterator, Optional

import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import CorpusError

from . import meter
from .base import BatchBuilder, ErrorSink, ReadError, ReaderOptions, Task, utf8_size
from .lines import open_decompressed

__all__ = ["read_warc", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'tokpipe[warc]'"
_CHECK_CHUNK = 1 << 20
# Room for a response's HTTP status line and headers on top of its body.
_HTTP_HEADER_ALLOWANCE = 1 << 20


def _libraries() -> tuple[Any, Any, Callable[[Any], str], Callable[[bytes, str], str], Callable[[bytes], str]]:
    try:
        from fastwarc.warc import ArchiveIterator, WarcRecordType
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.encoding import bytes_to_str, detect_encoding
        from resiliparse.parse.html import HTMLTree
    except ImportError as error:
        raise CorpusError(f"reading WARC files needs FastWARC and Resiliparse ({error.name} is missing): {INSTALL_HINT}") from error

    def extract(html: str) -> str:
        return extract_plain_text(HTMLTree.parse(html), main_content=True)

    return ArchiveIterator, WarcRecordType, extract, bytes_to_str, detect_encoding


def read_warc(task: Task, options: ReaderOptions, on_error: Callable[[ReadError], None]) -> Iterator[pa.RecordBatch]:
    """The documents of one WARC or WET file, as record batches (see the module docstring)."""
    archive_iterator, record_type, extract, bytes_to_str, detect_encoding = _libraries()
    sink = ErrorSink(task.path, options, on_error)
    builder = BatchBuilder(options.batch_rows)
    documents = record_type.response | record_type.conversion
    try:
        stream = storage.open_input(task.path)
        size = storage.open_size(stream)
    except OSError as error:
        sink.report("", "unreadable_file", f"{type(error).__name__}: {error.strerror or error}")
        return
    with stream:
        if size == 0:
            sink.report("", "empty_file", "the file has no bytes")
            return
        number = 0
        broken = False  # a stream error ended the file; the documents before it still go out
        # HTTP is parsed here, not by FastWARC: the whole block must be read to compare its
        # length with Content-Length, which is how a truncated archive shows.
        records = iter(archive_iterator(stream, parse_http=False))
        counted = meter.active()
        while True:
            try:
                record = next(records, None)
                if record is None:
                    break
                number += 1
                if counted:
                    meter.report(stream.tell(), size)  # a record is a read, a few KB at least
                if not record.record_type & documents:
                    continue
                block = record.reader.read(options.max_document_bytes + _HTTP_HEADER_ALLOWANCE)
                block_size = len(block) + _drain(record.reader)
            except (OSError, EOFError, zlib.error) as error:
                sink.report(f"record {number + 1}", "corrupt_stream", f"{type(error).__name__}: {error}; the rest of the file is unread")
                broken = True
                break
            where = f"record {number}"
            if block_size < record.content_length:
                sink.report(where, "corrupt_stream", f"the record ends after {block_size} of its {record.content_length} bytes (truncated file); the rest of the file is unread")
                broken = True
                break
            document = _document_body(record, block)
            if document is None:
                continue
            content_type, charset, body = document
            if block_size > len(block) or len(body) > options.max_document_bytes:
                sink.report(where, "document_too_large", f"record of {block_size} bytes, over max_document_bytes={options.max_document_bytes}")
                continue
            decoded = _decode(body, charset, bytes_to_str, detect_encoding)
            text = extract(decoded) if "html" in content_type else decoded
            text_size = utf8_size(text)
            if text_size > options.max_document_bytes:
                sink.report(where, "document_too_large", f"text of {text_size} bytes > max_document_bytes={options.max_document_bytes}")
                continue
            extras = {
                "url": _unbracket(record.headers.get("WARC-Target-URI")),
                "warc_date": record.headers.get("WARC-Date"),
                "content_type": content_type,
            }
            doc_id = record.record_id or f"{task.path}:{number}"
            full = builder.add(doc_id, text, text_size, extras)
            if full is not None:
                yield full
        if not broken and task.path.lower().endswith(".gz"):
            failure = _gzip_failure(task.path)
            if failure is not None:
                sink.report(f"record {number + 1}", "corrupt_stream", f"{failure}; the rest of the file is unread")
    rest = builder.flush()
    if rest is not None:
        yield rest


def _document_body(record: Any, block: bytes) -> Optional[tuple[str, Optional[str], bytes]]:
    """``(content type, charset or None, body)`` when the record is a text document, else ``None``."""
    warc_type = (record.headers.get("Content-Type") or "").lower()
    if warc_type.startswith("application/http"):
        head, separator, body = block.partition(b"\r\n\r\n")
        if not separator:
            head, separator, body = block.partition(b"\n\n")  # bare-LF servers exist
        content_type, charset = _parse_content_type(_http_header(head, b"content-type"))
    else:
        content_type, charset = _parse_content_type(warc_type)
        body = block
    if "html" in content_type or content_type == "text/plain":
        return content_type, charset, body
    return None


def _http_header(head: bytes, name: bytes) -> str:
    for line in head.split(b"\n")[1:]:  # the first line is the status line
        key, colon, value = line.partition(b":")
        if colon and key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return ""


def _parse_content_type(value: str) -> tuple[str, Optional[str]]:
    """``"text/html; charset=UTF-8"`` -> ``("text/html", "utf-8")``."""
    media_type, *parameters = value.split(";")
    charset = None
    for parameter in parameters:
        key, _, parameter_value = parameter.partition("=")
        if key.strip().lower() == "charset" and parameter_value.strip():
            charset = parameter_value.strip().strip("\"'").lower()
    return media_type.strip().lower(), charset


def _decode(body: bytes, charset: Optional[str], bytes_to_str: Callable[..., str], detect_encoding: Callable[[bytes], str]) -> str:
    """The page as text: its declared charset, else UTF-8 if it decodes, else a detected one."""
    if charset is None:
        try:
            # Most of the web is UTF-8, and detection guesses wrong on short pages.
            return body.decode("utf-8")
        except UnicodeDecodeError:
            charset = detect_encoding(body)
    return bytes_to_str(body, charset)


def _drain(reader: Any) -> int:
    drained = 0
    while True:
        piece = reader.read(_CHECK_CHUNK)
        if not piece:
            return drained
        drained += len(piece)


def _unbracket(uri: Optional[str]) -> Optional[str]:
    # Some writers (wget) put the WARC 1.0 grammar's angle brackets around the URI.
    if uri and uri.startswith("<") and uri.endswith(">"):
        return uri[1:-1]
    return uri


def _gzip_failure(path: str) -> Optional[str]:
    """Why the gzip stream of ``path`` is broken, or ``None`` when it decompresses cleanly."""
    try:
        with open_decompressed(path) as f:
            while f.read(_CHECK_CHUNK):
                pass
    except (OSError, EOFError, zlib.error) as error:
        return f"{type(error).__name__}: {error}"
    return None
