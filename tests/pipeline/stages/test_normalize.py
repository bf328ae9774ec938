"""``normalize`` against Python's ``unicodedata`` and ``re`` on the shared corpora."""

from __future__ import annotations

import re
import unicodedata

import pyarrow as pa
import pytest

from tokpipe.pipeline.stages import Normalize


def reference(text: str, form: str) -> str:
    """The rules of the stage's docstring, written with the stdlib."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "", text)
    text = unicodedata.normalize(form, text)
    text = re.sub(r"[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_matches_the_stdlib_on_real_text(documents: list[tuple[str, str]], form: str) -> None:
    texts = [t for _, t in documents]
    texts += ["Ｆｕｌｌ\u3000width\r\nline\x00\x07 \t \n\n\n\n\nend\x85 ", "ﬁ ligature ① ㍿", "e\u0301 vs é", ""]
    out = Normalize(form=form).process(pa.record_batch({"id": [str(i) for i in range(len(texts))], "text": texts}))
    for got, text in zip(out.kept.column("text").to_pylist(), texts):
        assert got == reference(text, form)


def test_only_normalization_when_cleanup_is_off() -> None:
    text = "Ａ  \n\n\n\nb\x01"
    out = Normalize(form="NFKC", clean_whitespace=False, remove_control=False).apply(
        pa.record_batch({"id": ["a"], "text": [text]}))
    assert out.column("text").to_pylist() == [unicodedata.normalize("NFKC", text)]


def test_mojibake_repair_undoes_utf8_read_as_cp1252() -> None:
    # The classic breakage: UTF-8 bytes decoded as cp1252, made with the stdlib, must come
    # back whole; correct CJK text must be left alone.
    originals = ["café naïve résumé", "Straße, Ångström, œuvre", "日本語のテキスト"]
    broken = [t.encode("utf-8").decode("cp1252", errors="ignore") for t in originals[:2]] + [originals[2]]
    batch = pa.record_batch({"id": ["a", "b", "c"], "text": broken})
    out = Normalize(form="NFC", fix_mojibake=True).apply(batch)
    assert out.column("text").to_pylist() == originals
    assert broken[0] != originals[0]
