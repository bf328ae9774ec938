"""Every error tokpipe raises on purpose is a ``TokpipeError`` (a user can catch them all with
one class), or one of Python's own ``OSError``\\ s for a file that cannot be read or written.

The package's source is read for ``raise`` statements naming one of Python's built-in
exceptions: only the ``OSError`` family and ``NotImplementedError`` (a stage subclass that
leaves out a method it must write, Python's own protocol for that) may appear.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import tokpipe
from tests.conftest import REPO, VOCAB
from tokpipe.errors import ArgumentTypeError, InvalidArgumentError, TokpipeError

PACKAGE = REPO / "python" / "tokpipe"

#: Built-in exceptions the package may raise itself.
ALLOWED = {"NotImplementedError"} | {name for name, value in vars(builtins).items()
                                      if isinstance(value, type) and issubclass(value, OSError)}


def builtin_raises(root: Path) -> list[str]:
    """``path:line: Name`` of each ``raise`` of a built-in exception outside ``ALLOWED``; a
    module's or class's ``__getattr__`` raises ``AttributeError``, as Python requires."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        getattr_raises = {id(node) for function in ast.walk(tree)
                          if isinstance(function, ast.FunctionDef) and function.name == "__getattr__"
                          for node in ast.walk(function)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = raised.id if isinstance(raised, ast.Name) else None
            value = getattr(builtins, name, None) if name else None
            if name == "AttributeError" and id(node) in getattr_raises:
                continue
            if isinstance(value, type) and issubclass(value, BaseException) and name not in ALLOWED:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return found


def test_the_package_raises_no_bare_builtin_exception() -> None:
    found = builtin_raises(PACKAGE)
    assert not found, "raise a TokpipeError subclass (tokpipe.errors) instead:\n" + "\n".join(found)


def test_the_scan_finds_a_bare_value_error(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f(x):\n    if x:\n        raise ValueError('no')\n    raise OSError(2, 'gone')\n",
                                   encoding="utf-8")
    assert builtin_raises(tmp_path) == ["m.py:3: ValueError"]


def test_wrong_kinds_of_argument_are_tokpipe_errors_and_type_errors() -> None:
    with pytest.raises(ArgumentTypeError) as info:
        tokpipe.train_bpe(texts="one string, not a list", vocab_size=300)
    assert isinstance(info.value, TypeError) and isinstance(info.value, TokpipeError)
    with pytest.raises(ArgumentTypeError):
        tokpipe.train_bpe(texts=["fine", 3], vocab_size=300)


def test_wrong_values_are_invalid_argument_errors_and_value_errors() -> None:
    import pyarrow as pa

    from tokpipe.pipeline.kernels import numpy_of
    from tokpipe.pipeline.readers import ReaderOptions

    with pytest.raises(InvalidArgumentError) as info:
        ReaderOptions(split="sentences")
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidArgumentError):
        numpy_of(pa.array([1, None]))
    tok = tokpipe.Tokenizer.from_wordpiece_vocab(VOCAB / "bert_base_uncased_vocab.txt")
    with pytest.raises(InvalidArgumentError):
        tok.encode_arrow(pa.array(["a"]), dtype="int8")
