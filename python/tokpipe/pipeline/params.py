"""A stage's parameter values checked against its constructor's annotations, before any work.

A config is parsed, then run by worker processes: a value of the wrong type that the stage's
constructor stores without looking (``min_doc_words: fifty``) would otherwise fail deep in a
worker, with a numpy traceback, after the run began. :func:`check_params` compares each value
with the annotation of its parameter in the stage's ``__init__`` and refuses a mismatch in one
line naming the parameter, the expected type and the value.

Annotations are read from their text (``int | None``, ``list[str] | None``,
``Sequence[Sequence[float]]``...; the modules use ``from __future__ import annotations``) or
from the objects (``typing.Optional[int]``), never evaluated, so ``int | None`` is understood on
Python 3.9 too. The rules:

- ``int``: an integer, not a boolean; ``float``: any number but a boolean (an integer is a
  number); ``bool``: ``true``/``false`` only; ``str``: a string, or a path (``os.PathLike``),
  taken as its string; ``None``/``Optional``: null.
- ``Literal["a", "b"]``: one of the values.
- ``list[X]``, ``tuple[X, ...]``, ``Sequence[X]`` (and their ``typing`` spellings): a list (or a
  tuple) whose every item is an ``X``; a string is not a list. ``tuple[X, Y]``: that many items.
- ``dict[K, V]``, ``Mapping[K, V]``: a mapping whose keys are ``K`` and values ``V``.
- ``A | B``, ``Union[A, B]``: either.

An annotation it does not know (a class of the stage's own, ``Any``), or a union with such a
member, is not checked: the constructor then judges the value alone. Numpy scalars pass as the
Python numbers they are, and are stored as such (the config is written as JSON).
"""

from __future__ import annotations

import ast
import functools
import inspect
import numbers
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from tokpipe.errors import ConfigError

__all__ = ["ParamType", "parse_annotation", "param_types", "check_params"]

# Spellings of the containers, by the name's last part (``typing.List``, ``collections.abc.Sequence``).
_LISTS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "Collection", "set", "Set", "frozenset",
          "FrozenSet", "AbstractSet"}
_TUPLES = {"tuple", "Tuple"}
_DICTS = {"dict", "Dict", "Mapping", "MutableMapping"}
_SCALARS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "None": "none", "NoneType": "none",
            "PathLike": "str"}
_SINGULAR = {"int": "an integer", "float": "a number", "str": "a string", "bool": "a boolean (true or false)",
             "none": "null"}
_PLURAL = {"int": "integers", "float": "numbers", "str": "strings", "bool": "true/false values", "none": "nulls"}
# How much of a wrong value a message shows.
_SHOWN_CHARS = 60


@dataclass(frozen=True)
class ParamType:
    """What a parameter takes. ``kind``: "int", "float", "str", "bool", "none" (scalars);
    "literal" (``args``: the values); "list" (``args``: the item's type, or None for any);
    "tuple" (the types of each place); "dict" (key and value types, None for any); "union"
    (its members)."""

    kind: str
    args: tuple[Any, ...] = ()

    def accepts(self, value: Any) -> bool:
        return _normalized(self, value) is not _REFUSED

    def describe(self) -> str:
        """``an integer or null``, ``a list of strings``, ``one of 'chars', 'bytes'``."""
        if self.kind in _SINGULAR:
            return _SINGULAR[self.kind]
        if self.kind == "literal":
            return "one of " + ", ".join(repr(v) for v in self.args) if len(self.args) > 1 else repr(self.args[0])
        if self.kind == "list":
            return "a list" + (f" of {self.args[0].plural()}" if self.args[0] is not None else "")
        if self.kind == "tuple":
            return f"a list of {len(self.args)} items ({', '.join(_describe(t) for t in self.args)})"
        if self.kind == "dict":
            key, value = self.args
            return "a mapping" + (f" of {_plural(key)} to {_plural(value)}" if key or value else "")
        return _or([member.describe() for member in self.args])

    def plural(self) -> str:
        """What a list of these holds: ``integers``, ``lists of numbers``."""
        if self.kind in _PLURAL:
            return _PLURAL[self.kind]
        if self.kind == "union":
            return _or([member.plural() for member in self.args])
        if self.kind == "literal":
            return "values among " + ", ".join(repr(v) for v in self.args)
        if self.kind == "dict":
            return "mappings"
        return "lists" + (f" of {self.args[0].plural()}" if self.kind == "list" and self.args[0] else "")


def _describe(kind: Optional[ParamType]) -> str:
    return kind.describe() if kind is not None else "anything"


def _plural(kind: Optional[ParamType]) -> str:
    return kind.plural() if kind is not None else "anything"


def _or(parts: list[str]) -> str:
    parts = list(dict.fromkeys(parts))
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _union(members: list[Optional[ParamType]]) -> Optional[ParamType]:
    """The union of ``members``; None (not checked) when one of them is unknown."""
    if any(member is None for member in members):
        return None
    flat: list[ParamType] = []
    for member in members:
        assert member is not None
        flat += list(member.args) if member.kind == "union" else [member]
    return flat[0] if len(flat) == 1 else ParamType("union", tuple(dict.fromkeys(flat)))


def parse_annotation(annotation: Any) -> Optional[ParamType]:
    """The :class:`ParamType` an annotation (its text, or the object) names; None for one
    this module does not check (see the module docstring)."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):
        try:
            node = ast.parse(annotation.strip(), mode="eval").body
        except SyntaxError:
            return None
        return _from_node(node)
    return _from_object(annotation)


def _name(node: ast.expr) -> Optional[str]:
    """The last part of a (dotted) name: ``Sequence`` for ``collections.abc.Sequence``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _from_node(node: ast.expr) -> Optional[ParamType]:
    if isinstance(node, ast.Constant):
        if node.value is None:
            return ParamType("none")
        return parse_annotation(node.value) if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([_from_node(node.left), _from_node(node.right)])
    name = _name(node)
    if name is not None:
        return _from_origin(name, None)
    if isinstance(node, ast.Subscript):
        name = _name(node.value)
        index = node.slice
        items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        if name is None:
            return None
        if name == "Literal":
            try:
                return ParamType("literal", tuple(ast.literal_eval(item) for item in items))
            except ValueError:
                return None
        if name in _TUPLES and len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is Ellipsis:
            return ParamType("list", (_from_node(items[0]),))
        return _from_origin(name, [_from_node(item) for item in items])
    return None


def _from_object(annotation: Any) -> Optional[ParamType]:
    if annotation is None or annotation is type(None):
        return ParamType("none")
    if isinstance(annotation, typing.ForwardRef):
        return parse_annotation(annotation.__forward_arg__)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is None:
        name = getattr(annotation, "__name__", None)
        return _from_origin(name, None) if isinstance(name, str) and isinstance(annotation, type) else None
    if origin is typing.Union or origin is getattr(types, "UnionType", typing.Union):  # A | B: types.UnionType
        return _union([_from_object(arg) for arg in args])
    if origin is typing.Literal:
        return ParamType("literal", tuple(args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return ParamType("list", (_from_object(args[0]),))
    name = getattr(origin, "__name__", None) or getattr(origin, "_name", None)
    return _from_origin(name, [_from_object(arg) for arg in args]) if isinstance(name, str) else None


def _from_origin(name: Optional[str], items: Optional[list[Optional[ParamType]]]) -> Optional[ParamType]:
    """The type ``name[items]`` (``items`` None for a bare name)."""
    if name is None:
        return None
    if name == "Optional" and items and len(items) == 1:
        return _union([items[0], ParamType("none")])
    if name == "Union" and items:
        return _union(items)
    if name in _SCALARS:
        return ParamType(_SCALARS[name])
    if name in _LISTS:
        return ParamType("list", (items[0] if items else None,))
    if name in _TUPLES:
        return ParamType("tuple", tuple(items)) if items else ParamType("list", (None,))
    if name in _DICTS:
        return ParamType("dict", (items[0], items[1]) if items and len(items) == 2 else (None, None))
    return None


_REFUSED = object()


def _normalized(kind: Optional[ParamType], value: Any) -> Any:
    """``value`` as the parameter takes it (a path as its string, a numpy number as a Python
    one), or ``_REFUSED``."""
    if kind is None:
        return value
    k = kind.kind
    if k == "none":
        return None if value is None else _REFUSED
    if k == "bool":
        return value if isinstance(value, bool) else _REFUSED
    if k in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if k == "int" else numbers.Real):
            return _REFUSED
        if type(value) in (int, float):
            return value
        return int(value) if isinstance(value, numbers.Integral) else float(value)  # numpy scalars
    if k == "str":
        if isinstance(value, str):
            return value
        return os.fspath(value) if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str) else _REFUSED
    if k == "literal":
        return value if any(type(value) is type(choice) and value == choice for choice in kind.args) else _REFUSED
    if k in ("list", "tuple"):
        if not isinstance(value, (list, tuple)):
            return _REFUSED
        places = kind.args * len(value) if k == "list" else kind.args
        if len(places) != len(value):
            return _REFUSED
        items = [_normalized(place, item) for place, item in zip(places, value)]
        if any(item is _REFUSED for item in items):
            return _REFUSED
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if k == "dict":
        if not isinstance(value, Mapping):
            return _REFUSED
        key_type, value_type = kind.args
        pairs = [(_normalized(key_type, key), _normalized(value_type, item)) for key, item in value.items()]
        if any(key is _REFUSED or item is _REFUSED for key, item in pairs):
            return _REFUSED
        return value if all(a is b and c is d for (a, c), (b, d) in zip(pairs, value.items())) else dict(pairs)
    for member in kind.args:  # union: the first member that takes it
        taken = _normalized(member, value)
        if taken is not _REFUSED:
            return taken
    return _REFUSED


@functools.lru_cache(maxsize=None)
def param_types(cls: type) -> dict[str, Optional[ParamType]]:
    """Each parameter of ``cls.__init__`` (as a config names it) and its type (None: not
    checked)."""
    signature = inspect.signature(cls.__init__)
    return {name: parse_annotation(p.annotation) for name, p in signature.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def check_params(cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` checked against the annotations of ``cls.__init__`` (see the module
    docstring), as the stage takes them; a ``ConfigError`` naming the first wrong one:
    ``min_doc_words must be an integer or null, got 'fifty'``."""
    types = param_types(cls)
    checked = {}
    for name, value in params.items():
        kind = types.get(name)
        taken = _normalized(kind, value)
        if taken is _REFUSED:
            assert kind is not None
            shown = repr(value)
            if len(shown) > _SHOWN_CHARS:
                shown = shown[:_SHOWN_CHARS - 3] + "..."
            raise ConfigError(f"{name} must be {kind.describe()}, got {shown}")
        checked[name] = taken
    return checked
