"""The dominant Unicode script of each document, and the language it suggests.

A document's letters are sorted into scripts by code-point block (:data:`SCRIPT_RANGES`: the
letter blocks of each script; digits, punctuation, symbols and spaces belong to none). Each
script is weighed by the UTF-8 bytes of its letters, and the heaviest wins. Bytes rather than
characters, so that a Chinese technical note full of English terms, code and URLs stays
Chinese: one Han character is worth three Latin letters, about what it carries (the shared
``zh_notes`` hold 9,509 Latin letters and 11,931 Han characters).

Han and Kana count as one script (Japanese writes both) when they are weighed. Then:

======================  =================================  ==========================
dominant                ``--by language`` guess            ``--by script``
======================  =================================  ==========================
Han and Kana            ``ja`` when Kana make at least      ``Han+Kana``
                        5% of the Han and Kana letters,
                        else ``zh``                          or ``Han``
Hangul                  ``ko``                              ``Hangul``
Greek, Hebrew, Thai,    ``el``, ``he``, ``th``, ``hy``,      the script's name
Armenian, Georgian,     ``ka``, ``bn``, ``ta``
Bengali, Tamil
Latin, Cyrillic,        the script's name (many languages   the script's name
Arabic, Devanagari      write it)
no letter at all        ``unknown``                         ``unknown``
======================  =================================  ==========================

The work is numpy over the code points of a batch (UTF-32) and a table lookup per character; no
Python per character.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SCRIPTS", "SCRIPT_RANGES", "script_weights", "dominant_scripts", "guess_languages", "KANA_SHARE_FOR_JA",
           "UNKNOWN"]

#: The scripts told apart, in the order of the columns of :func:`script_weights`.
SCRIPTS = ("Latin", "Greek", "Cyrillic", "Armenian", "Hebrew", "Arabic", "Devanagari", "Bengali", "Tamil", "Thai",
           "Georgian", "Hangul", "Kana", "Han")

#: The label of a document without a letter of any known script.
UNKNOWN = "unknown"

#: Japanese when Kana make at least this share of a document's Han and Kana letters.
KANA_SHARE_FOR_JA = 0.05

#: (first, last code point, script): the letter blocks of each script.
SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x41, 0x5A, "Latin"), (0x61, 0x7A, "Latin"), (0xAA, 0xAA, "Latin"), (0xBA, 0xBA, "Latin"),
    (0xC0, 0xD6, "Latin"), (0xD8, 0xF6, "Latin"), (0xF8, 0x24F, "Latin"),
    (0x370, 0x3FF, "Greek"), (0x400, 0x52F, "Cyrillic"), (0x531, 0x58F, "Armenian"), (0x5D0, 0x5FF, "Hebrew"),
    (0x600, 0x6FF, "Arabic"), (0x750, 0x77F, "Arabic"), (0x8A0, 0x8FF, "Arabic"), (0x900, 0x97F, "Devanagari"),
    (0x980, 0x9FF, "Bengali"), (0xB80, 0xBFF, "Tamil"), (0xE00, 0xE7F, "Thai"), (0x10A0, 0x10FF, "Georgian"),
    (0x1100, 0x11FF, "Hangul"), (0x1E00, 0x1EFF, "Latin"), (0x1F00, 0x1FFF, "Greek"), (0x3005, 0x3007, "Han"),
    (0x3040, 0x30FF, "Kana"), (0x3130, 0x318F, "Hangul"), (0x31F0, 0x31FF, "Kana"), (0x3400, 0x4DBF, "Han"),
    (0x4E00, 0x9FFF, "Han"), (0xAC00, 0xD7AF, "Hangul"), (0xF900, 0xFAFF, "Han"), (0xFB50, 0xFDFF, "Arabic"),
    (0xFE70, 0xFEFF, "Arabic"), (0xFF21, 0xFF3A, "Latin"), (0xFF41, 0xFF5A, "Latin"), (0xFF66, 0xFF9F, "Kana"),
    (0x20000, 0x3FFFF, "Han"),
)

# The language a script stands for when one language (nearly) alone writes it.
_LANGUAGE_OF = {"Hangul": "ko", "Greek": "el", "Hebrew": "he", "Thai": "th", "Armenian": "hy", "Georgian": "ka",
                "Bengali": "bn", "Tamil": "ta"}

# The script of every code point up to U+40000 as 1 + its index in SCRIPTS (0: none), a
# 256 KB table; a lookup per character is a numpy gather. Higher code points are looked up at
# U+40000, which is no letter.
_TABLE_SIZE = 0x40001
_TABLE = np.zeros(_TABLE_SIZE, dtype=np.uint8)
for _first, _last, _name in SCRIPT_RANGES:
    _TABLE[_first:_last + 1] = 1 + SCRIPTS.index(_name)
_HAN, _KANA = SCRIPTS.index("Han"), SCRIPTS.index("Kana")

# Documents are measured in slices of about this many characters: the UTF-32 copy and the
# per-character arrays of one slice stay a few tens of MB.
_SLICE_CHARS = 1 << 22


def script_weights(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per document and script (:data:`SCRIPTS`): (UTF-8 bytes of its letters, number of its
    letters), two int64 arrays of shape ``(len(texts), len(SCRIPTS))``."""
    weights = np.zeros((len(texts), len(SCRIPTS)), dtype=np.int64)
    letters = np.zeros((len(texts), len(SCRIPTS)), dtype=np.int64)
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size + len(texts[end]) <= _SLICE_CHARS):
            size += len(texts[end])
            end += 1
        _measure(texts[start:end], weights[start:end], letters[start:end])
        start = end
    return weights, letters


def _measure(texts: Sequence[str], weights: np.ndarray, letters: np.ndarray) -> None:
    points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype="<u4")
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    documents = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    found = _TABLE[np.minimum(points, _TABLE_SIZE - 1)]
    inside = found > 0
    letters_at = points[inside]
    cells = documents[inside] * len(SCRIPTS) + found[inside].astype(np.int64) - 1
    width = 1 + (letters_at >= 0x80).astype(np.int64) + (letters_at >= 0x800) + (letters_at >= 0x10000)
    size = len(texts) * len(SCRIPTS)
    weights += np.bincount(cells, weights=width, minlength=size).astype(np.int64).reshape(weights.shape)
    letters += np.bincount(cells, minlength=size).reshape(letters.shape)


def _dominant(weights: np.ndarray, letters: np.ndarray) -> list[tuple[str, bool]]:
    """Per document: the dominant script (Han standing for Han and Kana together) and whether
    the Kana share makes it Japanese."""
    merged = weights.copy()
    merged[:, _HAN] += merged[:, _KANA]
    merged[:, _KANA] = 0
    winner = merged.argmax(axis=1)
    any_letter = merged.max(axis=1) > 0
    cjk = letters[:, _HAN] + letters[:, _KANA]
    japanese = letters[:, _KANA] >= KANA_SHARE_FOR_JA * np.maximum(cjk, 1)
    return [(SCRIPTS[w] if ok else UNKNOWN, bool(ja and w == _HAN))
            for w, ok, ja in zip(winner.tolist(), any_letter.tolist(), japanese.tolist())]


def dominant_scripts(texts: Sequence[str]) -> list[str]:
    """The dominant script of each text (see the module's table): a name of :data:`SCRIPTS`,
    ``Han+Kana`` for Japanese, or ``unknown``."""
    return ["Han+Kana" if japanese else script for script, japanese in _dominant(*script_weights(texts))]


def guess_languages(texts: Sequence[str]) -> list[str]:
    """The language each text's dominant script suggests (see the module's table): ``zh``,
    ``ja``, ``ko`` and the like, a script's name where many languages write it (``Latin``,
    ``Cyrillic``, ``Arabic``, ``Devanagari``), or ``unknown``."""
    out = []
    for script, japanese in _dominant(*script_weights(texts)):
        if script == "Han":
            out.append("ja" if japanese else "zh")
        else:
            out.append(_LANGUAGE_OF.get(script, script))
    return out
