"""The end of a run that read no document at all: a failure, said in one line.

A run sets unreadable input aside (``errors.jsonl``) and goes on, which is right when a few
records are bad, and wrong when all of them are: ``--text-field content`` over records whose
text is in ``text`` would end with "0 documents kept" and success. So ``tokpipe clean``,
``tokpipe tokenize`` and :func:`tokpipe.pipeline.run` raise :class:`NoDocumentsError` when
the readers yielded no document and set something aside, after the output folder is written
(its manifest and ``errors.jsonl`` say what happened). When records lacked the text field, the
message lists the fields they have (read from the first such error's detail, see
``readers.base.missing_field_detail``) and the one most likely meant.
"""

from __future__ import annotations

import difflib
import json

from tokpipe import storage
from tokpipe.errors import NoDocumentsError
from tokpipe.pipeline import fs
from tokpipe.pipeline.base import StageStats
from tokpipe.pipeline.readers.base import fields_in_detail
from tokpipe.pipeline.writers.manifest import ERRORS_NAME
from tokpipe.storage import Location

__all__ = ["check_documents_read", "suggest_field"]

_MISSING = "missing_text_field"
# Lines of errors.jsonl read to find a record without the text field: it is usually the
# first; past this the message goes without the fields rather than read a huge file.
_LINES_SEARCHED = 100_000
# The names a text field commonly goes by, suggested when none of the fields is close to
# the name given (``content`` and ``text`` are not close to difflib).
_USUAL_TEXT_FIELDS = ("text", "content", "raw_content", "contents", "body", "document", "article", "passage")
_FIELDS_SHOWN = 8


def check_documents_read(out: Location, read: StageStats, text_field: str, result: object = None) -> None:
    """Raises :class:`NoDocumentsError` (carrying ``result``) when ``read`` (the readers'
    stats of a finished run into ``out``) counts no document and some input set aside."""
    if read.kept or not sum(read.dropped.values()):
        return
    shown = storage.redact(str(out))
    reasons = ", ".join(f"{n:,} {reason}" for reason, n in sorted(read.dropped.items(), key=lambda kv: (-kv[1], kv[0])))
    message = f"{shown}: no document was read, all input was set aside as unreadable ({reasons}; see {ERRORS_NAME})"
    if read.dropped.get(_MISSING):
        message += ": " + _field_hint(out, text_field)
    raise NoDocumentsError(message, result)


def _field_hint(out: Location, text_field: str) -> str:
    """What to say of the missing text field: the fields the input has, and the likely one."""
    names, more = _fields_found(out)
    if not names:
        return f"the input has no field {text_field!r}: name the text field with --text-field (text_field= in Python)"
    listed = ", ".join(names[:_FIELDS_SHOWN])
    left = more + max(0, len(names) - _FIELDS_SHOWN)
    if left:
        listed += f" and {left} more"
    hint = f"no field {text_field!r} in the input, whose fields are {listed}"
    suggestion = suggest_field(text_field, names)
    if suggestion is not None:
        return f"{hint}; did you mean {suggestion!r}? (--text-field, or text_field= in Python)"
    return f"{hint}; name the text field with --text-field (text_field= in Python): a top-level field holding a string"


def suggest_field(text_field: str, names: list[str]) -> str | None:
    """The field of ``names`` most likely meant by ``text_field``: the closest by spelling
    (difflib), else the first of the usual names of a text field, else None."""
    close = difflib.get_close_matches(text_field, names, n=1, cutoff=0.5)
    if close:
        return close[0]
    return next((name for name in _USUAL_TEXT_FIELDS if name in names), None)


def _fields_found(out: Location) -> tuple[list[str], int]:
    """The fields listed by the first ``missing_text_field`` error of ``out``'s errors.jsonl."""
    path = out / ERRORS_NAME
    try:
        with fs.open_read(path) as f:
            for n, line in enumerate(f):
                if n >= _LINES_SEARCHED:
                    break
                if _MISSING.encode() not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("reason") == _MISSING:
                    return fields_in_detail(str(record.get("detail", "")))
    except OSError:
        pass  # the message goes without the fields
    return [], 0
