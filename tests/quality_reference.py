"""Reference implementations the quality classifier's Rust kernels are checked against.

- ``arrow_prepare``: the text preparation as tokpipe did it before the Rust kernel, with
  Arrow's kernels over the whole column (``utf8_lower``, a split into lines, a group-by over
  (document, line), an RE2 regex replace): the behaviour the kernel must keep.
- ``python_prepare``: the documented rules written out for one document in plain Python (the
  ``regex`` module for the Unicode script classes, which ``re`` lacks).
- ``fasttext_scores``: the quality score as fastText's own ``predict`` gives it, through its
  Python binding, on prepared lines.

The three libraries behind these (RE2 and utf8proc inside pyarrow, ``regex``, Python's
``unicodedata``) and the Rust tables each carry their own Unicode version; they agree on
every character assigned in Python's ``unicodedata`` (``ASSIGNED``), so generated text is
drawn from those.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex

from tokpipe.quality import POSITIVE, REPEATED_LINE


def assigned(c: str) -> bool:
    """Whether ``c`` is assigned (not ``Cn``) and not a surrogate in Python's Unicode tables."""
    return unicodedata.category(c) not in ("Cn", "Cs")


#: RE2's class of the old implementation (RE2's ``\s`` is ASCII ``[\t\n\f\r ]``).
_RE2_SPLIT = r"([\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]|[^\p{L}\p{M}\p{N}\s_])"
#: The same class for the ``regex`` module: scripts by their Script property, ``\s`` spelled out.
_SPLIT = regex.compile(r"([\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]"
                       r"|[^\p{L}\p{M}\p{N}\t\n\f\r _])")


def arrow_prepare(texts: Sequence[str | None], max_chars: int | None) -> list[str]:
    column = pa.array(list(texts), pa.string()).fill_null("")
    if max_chars is not None:
        column = pc.utf8_slice_codeunits(column, 0, max_chars)
    column = pc.utf8_lower(column)
    lists = pc.split_pattern(column, "\n")
    lines = pc.utf8_trim_whitespace(pc.list_flatten(lists))
    n = len(lines)
    if n:
        doc = pc.list_parent_indices(lists)
        table = pa.table({"doc": doc, "line": lines, "pos": pa.array(np.arange(n, dtype=np.int64))})
        first = table.group_by(["doc", "line"], use_threads=False).aggregate([("pos", "min")]).column("pos_min")
        is_first = np.zeros(n, dtype=bool)
        is_first[first.to_numpy()] = True
        repeated = pa.array(~is_first & (pc.utf8_length(lines).to_numpy(zero_copy_only=False) > 0))
        marked = pc.if_else(repeated, pa.scalar(REPEATED_LINE), lines)
        column = pc.binary_join(pa.ListArray.from_arrays(lists.offsets, marked), " ")
    return pc.replace_substring_regex(column, _RE2_SPLIT, r" \1 ").to_pylist()


def python_prepare(text: str | None, max_chars: int | None) -> str:
    text = text or ""
    if max_chars is not None:
        text = text[:max_chars]
    # Each character by itself: its simple lowercase (the first of a longer full mapping:
    # İ -> i), and no final-sigma rule, as Arrow's utf8_lower.
    lowered = "".join(c.lower()[0] for c in text)
    seen: set[str] = set()
    out = []
    for line in lowered.split("\n"):
        line = line.strip()
        if line and line in seen:
            out.append(REPEATED_LINE)
            continue
        seen.add(line)
        out.append(_SPLIT.sub(r" \1 ", line))
    return " ".join(out)


def fasttext_scores(model: Any, lines: Sequence[str]) -> np.ndarray:
    """fastText's own top-1 prediction of each line (a ``\\n`` appended, as its ``predict``
    does), read as the quality score: the top label's probability, or one minus it."""
    labels, probs = model.f.multilinePredict([line + "\n" for line in lines], 1, 0.0, "strict")
    top = np.array([p[0] for p in probs], dtype=np.float64)
    positive = np.array([ls[0] == POSITIVE for ls in labels])
    return np.clip(np.where(positive, top, 1.0 - top), 0.0, 1.0)
