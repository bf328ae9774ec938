"""``normalize``: Unicode normalization and whitespace/control-character cleanup.

Everything runs as Arrow compute kernels over the whole text column (no Python call per
document). Mojibake repair (``fix_mojibake``) uses ftfy, which is per document and optional.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Stage, register
from tokpipe.pipeline.documents import TEXT, replace_text

_FORMS = ("NFC", "NFKC", "NFD", "NFKD")

# C0 controls other than tab and newline, DEL, and C1 controls: invisible in text, noise to a
# model. Carriage returns go too: "\r\n" becomes "\n" and a lone "\r" becomes a newline.
_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]"


@register
class Normalize(Stage):
    """Unicode normalization (``form``: NFC, NFKC, NFD, NFKD or none), then optional cleanup:
    control characters removed, line endings made ``\\n``, trailing spaces on each line
    dropped, runs of more than one blank line collapsed, and the text stripped."""

    name = "normalize"

    def __init__(self, form: str | None = "NFC", clean_whitespace: bool = True, remove_control: bool = True,
                 fix_mojibake: bool = False) -> None:
        if form is not None and form.upper() not in _FORMS:
            raise InvalidArgumentError(f"normalize: form must be one of {', '.join(_FORMS)} or null, not {form!r}")
        self.form = form.upper() if form else None
        self.clean_whitespace = clean_whitespace
        self.remove_control = remove_control
        self.fix_mojibake = fix_mojibake
        if fix_mojibake:
            try:
                import ftfy  # noqa: F401
            except ImportError:
                raise InvalidArgumentError("normalize: fix_mojibake needs ftfy (pip install ftfy)") from None

    def may_reject(self) -> bool:
        return False  # it only rewrites the text

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        text = batch.column(TEXT)
        if self.fix_mojibake:
            import ftfy

            text = pa.array([None if t is None else ftfy.fix_text(t) for t in text.to_pylist()], type=pa.string())
        if self.remove_control:
            text = pc.replace_substring(text, "\r\n", "\n")
            text = pc.replace_substring(text, "\r", "\n")
            text = pc.replace_substring_regex(text, _CONTROL, "")
        if self.form:
            text = pc.utf8_normalize(text, form=self.form)
        if self.clean_whitespace:
            text = pc.replace_substring_regex(text, r"[ \t\p{Zs}]+\n", "\n")
            text = pc.replace_substring_regex(text, r"\n{3,}", "\n\n")
            text = pc.utf8_trim_whitespace(text)
        return replace_text(batch, text)
