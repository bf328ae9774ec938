"""The schema rule for a document's other fields: how they become Arrow columns, and how the
columns of every batch of a run come to share one schema.

Input records carry fields besides ``id`` and ``text`` (crawl metadata: a URL, a score, a
nested ``meta`` object), and nothing guarantees a field has one type: ``"year": 2020`` in one
file and ``"year": "2020"`` in the next, ``meta`` an object here and a string there, or nested
500 levels deep. A run must neither fail on such a field nor set its record aside, and its
output must read as one table. The rule:

1. **Nesting.** A value nested more than :data:`MAX_NESTING` levels deep (lists and objects)
   is kept as its JSON text: Parquet readers refuse deep schemas (pyarrow at about 50 list
   levels), and parsing it would recurse without bound. So is an empty object, which Parquet
   cannot store as a struct. The record is kept.
2. **One batch.** A field's values in one batch become one column of the type pyarrow infers.
   When they have no common type, scalars of different kinds (numbers, booleans, strings)
   become strings (numbers and booleans printed as JSON prints them: ``1``, ``2.5``,
   ``true``; a float with an integral value as an integer, ``1999``, since JSON has one number
   type), and anything else, lists or objects among other kinds, becomes a column of JSON
   text.
3. **The run.** When the output is written, each field gets one type for the whole folder
   (:func:`union_schema`), widened along the same lattice: integers and floats give
   ``float64`` (an integer beyond 2**53 is rounded to the nearest float), an integer beyond
   the 64-bit range makes its field ``string``, mixed scalars give ``string``,
   and a clash that involves a list or an object gives JSON text. A field absent from a
   batch is null there. The kept and the rejected documents each get their own schema.

JSON text columns have Arrow's canonical JSON extension type (``arrow.json``), which Parquet
stores as its ``JSON`` logical type: pyarrow reads it back as such, HF ``datasets`` decodes it
to Python values, DuckDB and Spark see JSON. A JSON value is the field's value as its batch
held it, with numbers printed as above: an object that was one row of a struct column carries
every key of that column (absent ones ``null``).

The schema therefore never fails to exist, whatever the input holds, and never depends on the
number of workers: it is decided from the staged columns, whose batches are cut the same way
for any number of workers. A scalar field's values read the same whichever batches held them.
A nested field whose shape differs between batches is the exception: pyarrow may give one
batch one struct or list type for shapes that, in two batches, widen to JSON text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

import pyarrow as pa

__all__ = ["MAX_NESTING", "JSON", "JsonText", "is_json", "loads_record", "field_column", "union_schema", "conform"]

#: Deepest nesting of lists and objects a field's value keeps as a typed column; deeper values
#: are kept as JSON text. 16 levels is far beyond real metadata and far below the ~50 list
#: levels where Parquet readers give up.
MAX_NESTING = 16
#: The type of a JSON text column.
JSON = pa.json_(pa.string())

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, UnicodeEncodeError)


class JsonText(str):
    """The JSON text of a value kept unparsed because it is nested too deeply."""


# ---------------------------------------------------------------------------------------------
# Reading records without recursing into deep values.

_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
# What `json.loads` accepts besides numbers, strings and containers.
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
# A whole string (escapes included) or one bracket: what nesting depth is counted over.
_DEPTH_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _depth_at_most(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` nests lists and objects at most ``limit`` levels deep."""
    if text.count("[") + text.count("{") <= limit:
        return True  # the common case, decided without a scan
    depth = 0
    for match in _DEPTH_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return False
        elif token in "]}":
            depth -= 1
    return True


def _skip_space(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]


def _fail(text: str, at: int) -> json.JSONDecodeError:
    return json.JSONDecodeError("Expecting value", text, at)


def _scalar_end(text: str, at: int) -> int:
    """The end of the string, number or literal at ``at``."""
    if text.startswith('"', at):
        return scanstring(text, at + 1, True)[1]  # type: ignore[no-any-return]
    for literal in _LITERALS:
        if text.startswith(literal, at):
            return at + len(literal)
    number = _NUMBER.match(text, at)
    if number is None or number.end() == at:
        raise _fail(text, at)
    return number.end()


def _value_end(text: str, at: int) -> int:
    """The end of the JSON value starting at ``at`` (no whitespace before it), checked as
    ``json.loads`` would check it, with an explicit stack instead of recursion."""
    closers: list[str] = []
    while True:
        # A value starts at `at`.
        opener = text[at:at + 1]
        if opener in ("[", "{"):
            at = _skip_space(text, at + 1)
            closer = "]" if opener == "[" else "}"
            if text.startswith(closer, at):
                at += 1
            else:
                closers.append(closer)
                if closer == "}":
                    at = _key_end(text, at)
                continue
        else:
            at = _scalar_end(text, at)
        # A value ended at `at`: close containers, or go on to the next element.
        while closers:
            at = _skip_space(text, at)
            if text.startswith(",", at):
                at = _skip_space(text, at + 1)
                if closers[-1] == "}":
                    at = _key_end(text, at)
                break
            if text.startswith(closers[-1], at):
                closers.pop()
                at += 1
                continue
            raise json.JSONDecodeError(f"Expecting ',' delimiter or {closers[-1]!r}", text, at)
        else:
            return at


def _key(text: str, at: int) -> tuple[str, int]:
    """An object's key at ``at``, and where its value starts (past the colon and spaces)."""
    if not text.startswith('"', at):
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
    key, at = scanstring(text, at + 1, True)
    at = _skip_space(text, at)
    if not text.startswith(":", at):
        raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
    return key, _skip_space(text, at + 1)


def _key_end(text: str, at: int) -> int:
    return _key(text, at)[1]


def is_json(text: str) -> bool:
    """Whether ``text`` is one JSON value, as ``json.loads`` would find it, however deeply it
    nests (checked with an explicit stack, never by recursion)."""
    try:
        end = _value_end(text, _skip_space(text, 0))
    except (json.JSONDecodeError, IndexError):
        return False
    return _skip_space(text, end) == len(text)


def loads_record(text: str) -> Any:
    """``json.loads(text)``, except that a value of a top-level object nested more than
    :data:`MAX_NESTING` levels deep is a :class:`JsonText` of its JSON text, checked but not
    parsed. Raises ``json.JSONDecodeError`` where ``json.loads`` would."""
    if _depth_at_most(text, MAX_NESTING + 1):
        return json.loads(text)
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        _value_end(text, at)  # a deep array or a malformed line: found bad as json.loads would
        raise json.JSONDecodeError("Expecting an object", text, at)
    record: dict[str, Any] = {}
    at = _skip_space(text, at + 1)
    if text.startswith("}", at):
        at += 1
    else:
        while True:
            key, value_start = _key(text, at)
            value_end = _value_end(text, value_start)
            raw = text[value_start:value_end]
            record[key] = json.loads(raw) if _depth_at_most(raw, MAX_NESTING) else JsonText(raw)
            at = _skip_space(text, value_end)
            if text.startswith(",", at):
                at = _skip_space(text, at + 1)
                continue
            if text.startswith("}", at):
                at += 1
                break
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
    if _skip_space(text, at) != len(text):
        raise json.JSONDecodeError("Extra data", text, at)
    return record


# ---------------------------------------------------------------------------------------------
# One field of one batch.


def _nesting(kind: pa.DataType) -> int:
    """How many levels of lists, structs and maps ``kind`` nests; more than any limit when it
    holds a struct without fields (an empty object), which Parquet cannot store."""
    if pa.types.is_struct(kind) and kind.num_fields == 0:
        return MAX_NESTING + 1
    if kind.num_fields == 0:
        return 0
    return 1 + max(_nesting(kind.field(i).type) for i in range(kind.num_fields))


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float))  # bool is an int


def _canonical(value: Any) -> Any:
    """``value`` with its integral floats as integers (below 2**53, where that is exact).
    JSON has one number type, and a value must print the same whether its batch held it as
    an integer or, next to a float, as a float (``1999`` and ``1999.0``)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


def _scalar_text(value: Any) -> str:
    """A scalar as a string column holds it: strings as they are, others as JSON prints them."""
    return value if isinstance(value, str) else json.dumps(_canonical(value))


def _json_text(value: Any) -> str:
    if isinstance(value, JsonText):
        return value
    return json.dumps(_canonical(value), sort_keys=True, default=str)


def field_column(values: Sequence[Any]) -> pa.Array:
    """One field's values in one batch (``None`` where a record lacks it) as one column, by
    the batch rule of the module docstring."""
    deep = any(type(value) is JsonText for value in values)
    if not deep:
        try:
            column = pa.array(values)
        except _ARROW_ERRORS:
            pass
        else:
            if _nesting(column.type) <= MAX_NESTING:
                return column
        if all(value is None or _is_scalar(value) for value in values):
            numbers = [value for value in values if value is not None]
            if all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in numbers) and \
                    all(isinstance(value, float) or -(1 << 63) <= value < 1 << 63 for value in numbers):
                # Integers and floats, some integer beyond 2**53 (which pyarrow will not
                # round): floats, as the run rule makes of int64 and float64 batches.
                return pa.array([None if value is None else float(value) for value in values], type=pa.float64())
            try:
                return pa.array([None if value is None else _scalar_text(value) for value in values], type=pa.string())
            except UnicodeEncodeError:
                pass  # a lone surrogate, which only JSON's escapes can carry
    return pa.array([None if value is None else _json_text(value) for value in values], type=JSON)


# ---------------------------------------------------------------------------------------------
# The run: one type per field over every batch.


def _number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _nested(kind: pa.DataType) -> bool:
    return kind.num_fields > 0 or kind == JSON


def _castable(kinds: Sequence[pa.DataType], target: pa.DataType) -> bool:
    """Whether Arrow can cast every type in ``kinds`` to ``target`` (asked of empty arrays:
    a cast kernel exists or not whatever the values)."""
    try:
        for kind in kinds:
            pa.array([], type=kind).cast(target)
    except _ARROW_ERRORS:
        return False
    return True


def _unify(kinds: Sequence[pa.DataType]) -> pa.DataType:
    """The one type of a field that has ``kinds`` in different batches (the run rule)."""
    kinds = list(dict.fromkeys(k for k in kinds if not pa.types.is_null(k)))
    if len(kinds) <= 1:
        return kinds[0] if kinds else pa.null()
    if any(_nested(k) for k in kinds):
        if JSON in kinds or not all(_nested(k) for k in kinds):
            return JSON
        return _permissive(kinds) or JSON  # list<null> and list<int64>, structs with other keys
    families = {_family(k) for k in kinds}
    if len(families) > 1 or families == {"string"}:
        return pa.large_string() if pa.large_string() in kinds else pa.string()
    if families == {"number"}:
        if not all(pa.types.is_integer(k) for k in kinds):
            return pa.float64()
        if len({pa.types.is_signed_integer(k) for k in kinds}) == 1:
            return max(kinds, key=lambda k: k.bit_width)
        # Signed and unsigned: int64 holds both unless a uint64 is among them.
        return pa.float64() if pa.uint64() in kinds else pa.int64()
    return _permissive(kinds) or pa.string()  # timestamps of two units, binary and large_binary


def _permissive(kinds: Sequence[pa.DataType]) -> pa.DataType | None:
    """pyarrow's permissive promotion of ``kinds``, if there is one every kind casts to."""
    try:
        union = pa.unify_schemas([pa.schema([("f", k)]) for k in kinds], promote_options="permissive").field("f").type
    except _ARROW_ERRORS:
        return None
    return union if _castable(kinds, union) else None


def _family(kind: pa.DataType) -> str:
    """Scalars of one family widen within it; scalars of different families become strings."""
    if _number(kind):
        return "number"
    if _string(kind):
        return "string"
    return str(kind.id)


def union_schema(schemas: Sequence[pa.Schema], first: Sequence[pa.Field] = ()) -> pa.Schema:
    """One schema for batches of ``schemas``: ``first`` (the fields every batch has), then
    every other field in order of first appearance, with its one type (see the module
    docstring). Never fails."""
    kinds: dict[str, list[pa.DataType]] = {f.name: [f.type] for f in first}
    for schema in schemas:
        for f in schema:
            kinds.setdefault(f.name, []).append(f.type)
    return pa.schema([pa.field(name, _unify(types)) for name, types in kinds.items()])


def _rendered(column: pa.Array, target: pa.DataType) -> pa.Array:
    """``column``'s values written out as ``target`` holds them: JSON text, or the string of
    a scalar (as :func:`field_column` writes both within a batch)."""
    values = column.to_pylist()
    if target == JSON:  # a string is its JSON string literal, as within a batch
        return pa.array([None if v is None else _json_text(v) for v in values], type=JSON)
    if pa.types.is_boolean(column.type) or _number(column.type):
        return pa.array([None if v is None else _scalar_text(v) for v in values], type=target)
    try:
        return column.cast(target, safe=False)
    except _ARROW_ERRORS:  # binary that is not UTF-8, say: printed as Python prints it
        return pa.array([None if v is None else str(v) for v in values], type=target)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns in its order: missing ones null, others converted
    to the field's type (widened, or written out as strings or JSON text)."""
    if batch.schema.remove_metadata().equals(schema):
        return batch
    columns = []
    for f in schema:
        index = batch.schema.get_field_index(f.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, type=f.type))
            continue
        column = batch.column(index)
        if column.type == f.type:
            columns.append(column)
        elif f.type == JSON or (_string(f.type) and not _string(column.type)):
            columns.append(_rendered(column, f.type))
        else:
            # Unchecked: an int64 beyond 2**53 rounds to the nearest float64, as widening
            # means, where a checked cast would fail the run.
            columns.append(column.cast(f.type, safe=False))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
