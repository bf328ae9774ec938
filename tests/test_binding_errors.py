"""Errors the binding (``tokpipe._core``) raises of its own belong to the ``TokpipeError``
hierarchy, keeping the built-in class callers already catch (issue 20).

The binding checks some arguments before the core sees them (buffers, lengths, option strings)
and some objects refuse calls once closed or used up; those are ``InvalidArgumentError`` (a
``ValueError``) and ``StateError`` (a ``RuntimeError``). Errors of the core itself are mapped
by the same code (``errors.rs``), and every call that releases the GIL goes through one gate
(``gate.rs``; ``tests/test_rust_layering.py`` checks that no other code does).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokpipe import _core
from tokpipe.errors import InvalidArgumentError, StateError, TokpipeError


def test_a_used_up_trainer_is_a_state_error() -> None:
    trainer = _core.BpeTrainer(300, 0, [], None, False, "gpt2")
    trainer.feed(["some text to learn from", "and a little more"])
    trainer.train()
    with pytest.raises(StateError, match="already trained") as raised:
        trainer.train()
    assert isinstance(raised.value, RuntimeError) and isinstance(raised.value, TokpipeError)
    with pytest.raises(StateError, match="already trained"):
        trainer.feed(["more"])


def test_a_closed_zstd_file_is_a_state_error(tmp_path: Path) -> None:
    import zstandard

    path = tmp_path / "lines.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"one\ntwo\n"))
    file = _core.ZstdFile(str(path))
    buffer = bytearray(64)
    assert file.readinto(buffer) == 8
    file.close()
    with pytest.raises(StateError, match="closed"):
        file.readinto(buffer)


def test_buffers_the_binding_cannot_read_are_invalid_arguments() -> None:
    import pyarrow as pa

    column = pa.array(["abc", "def"])
    assert len(_core.exact_dedup_keys(column.__arrow_c_array__())) == 2 * 16
    # Every other byte of a buffer: not contiguous.
    strided = np.frombuffer(b"aabbccddeeff", dtype=np.uint8)[::2]
    with pytest.raises(InvalidArgumentError, match="not contiguous") as raised:
        _core.count_newlines(strided)
    assert isinstance(raised.value, ValueError)
    # String offsets that are not at a whole int32's address (a buffer sliced one byte in).
    offsets = pa.py_buffer(b"\0" + np.array([0, 3, 6], dtype=np.int32).tobytes())[1:]
    misaligned = pa.StringArray.from_buffers(2, offsets, pa.py_buffer(b"abcdef"))
    with pytest.raises(InvalidArgumentError, match="not aligned"):
        _core.exact_dedup_keys(misaligned.__arrow_c_array__())


def test_columns_the_binding_cannot_import_are_invalid_arguments() -> None:
    # String columns come in through the Arrow C data interface; anything but a string or
    # large_string array's capsule pair is refused by name.
    import pyarrow as pa

    with pytest.raises(InvalidArgumentError, match='got format "z"') as raised:
        _core.exact_dedup_keys(pa.array([b"binary"]).__arrow_c_array__())
    assert isinstance(raised.value, ValueError)
    with pytest.raises(InvalidArgumentError, match='got format "l"'):
        _core.text_stats(pa.array([1, 2]).__arrow_c_array__())
    for not_a_pair in ((1, 2), (1, 2, 3), "text"):
        with pytest.raises(InvalidArgumentError, match="capsule pair"):
            _core.exact_dedup_keys(not_a_pair)
    # A pair whose array another consumer has already taken (moved out of its capsule).
    schema, array = pa.array(["abc"]).__arrow_c_array__()
    pa.Array._import_from_c_capsule(schema, array)
    with pytest.raises(InvalidArgumentError, match="already consumed"):
        _core.exact_dedup_keys((schema, array))


def test_option_strings_the_binding_checks_are_invalid_arguments() -> None:
    tok = _core.Tokenizer.from_json(
        '{"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1}},'
        ' "pre_tokenizer": {"type": "BertPreTokenizer"}}'
    )
    with pytest.raises(InvalidArgumentError, match="allowed_special"):
        tok.encode("a", allowed_special="everything")
    with pytest.raises(InvalidArgumentError, match="byte-level BPE"):
        tok.save_tiktoken("/nonexistent/never-written.tiktoken")
