"""``readers.lines``: the newline count that numbers the lines of whole blocks, against
Python's ``bytes.count``; the memory a long line may take."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from hypothesis import given
from hypothesis import strategies as st

from tokpipe.pipeline.readers.lines import count_newlines

from .helpers import CORPORA


@given(st.binary(max_size=5000), st.integers(0, 64))
def test_count_newlines_is_bytes_count(data: bytes, cut: int) -> None:
    assert count_newlines(data) == data.count(b"\n")
    view = memoryview(bytearray(data))[cut:]
    assert count_newlines(view) == bytes(view).count(b"\n")


def test_count_newlines_on_a_real_file() -> None:
    with gzip.open(CORPORA / "web" / "sample-0000.warc.gz", "rb") as f:
        data = f.read()
    assert data.count(b"\n") > 1000
    assert count_newlines(data) == data.count(b"\n")


# ---------------------------------------------------------------------------------------------
# Memory: a line is held only up to what it may take (issue 19: a 3 MB .jsonl.gz holding one
# 3 GiB record peaked at 4.2 GB, the same in zstd at 7.3 GB, before being set aside).

_BOMB_READER = """
import sys
from tokpipe.pipeline.readers import ReaderOptions, plan_tasks, read_task
options = ReaderOptions(max_document_bytes=int(sys.argv[2]))
errors, documents = [], 0
for task in plan_tasks([sys.argv[1]], options):
    for batch in read_task(task, options, errors.append):
        documents += batch.num_rows
# VmHWM, this process's own peak: ru_maxrss would count the parent's memory at the fork.
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(documents, [(e.location, e.reason) for e in errors], peak << 10)
"""


def _write_bomb(path: Path, line_bytes: int) -> None:
    """Two small records around one record of ``line_bytes``, compressed by the suffix."""
    head, tail = b'{"text": "before"}\n{"text": "', b'"}\n{"text": "after"}\n'
    chunk = b"a" * (16 << 20)
    if path.suffix == ".gz":
        opened = gzip.open(path, "wb", compresslevel=1)
    else:
        import zstandard

        opened = zstandard.open(path, "wb")
    with opened as f:
        f.write(head)
        for _ in range(line_bytes // len(chunk)):
            f.write(chunk)
        f.write(tail)


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_compressed_bomb_is_set_aside_holding_no_more_than_the_limit(tmp_path: Path, suffix: str) -> None:
    limit = 256 << 20
    path = tmp_path / f"bomb.jsonl{suffix}"
    _write_bomb(path, 4 * limit)  # a 1 GiB line, a few MB on disk
    assert path.stat().st_size < 8 << 20
    result = subprocess.run([sys.executable, "-c", _BOMB_READER, str(path), str(limit)], capture_output=True,
                            text=True, check=True)
    peak = int(result.stdout.split()[-1])
    assert result.stdout.startswith("2 [('line 2', 'document_too_large')]"), result.stdout
    # The line is held up to the limit (and a block over it), never beyond, and never twice:
    # the interpreter, pyarrow and the extension take about 100 MB of their own.
    assert peak < limit + (200 << 20), f"peak RSS {peak >> 20} MiB for a limit of {limit >> 20} MiB"
