"""The script-based language guess (``tokeval.scripts``) on the shared English, Japanese and
Chinese texts, and on short strings of other scripts whose answer the module's table gives."""

from __future__ import annotations

import pytest

from tests.conftest import CORPORA
from tokpipe.tokeval.scripts import KANA_SHARE_FOR_JA, dominant_scripts, guess_languages, script_weights, SCRIPTS

TEXT = CORPORA / "text"


def test_the_shared_books_and_notes_get_their_language() -> None:
    files = {"botchan.txt": "Latin", "tinyshakespeare.txt": "Latin", "wagahaiwa_nekodearu.txt": "ja"}
    files.update({f"zh_notes/{p.name}": "zh" for p in (TEXT / "zh_notes").glob("*.txt")})
    texts = [(TEXT / name).read_text(encoding="utf-8") for name in files]
    assert guess_languages(texts) == list(files.values())
    assert dominant_scripts(texts) == [{"Latin": "Latin", "ja": "Han+Kana", "zh": "Han"}[v] for v in files.values()]


def test_chinese_notes_full_of_english_stay_chinese() -> None:
    # More Latin letters than Han characters, but fewer letter bytes: still Chinese.
    text = "我们用注意力机制训练大模型: transformer attention"
    assert sum(c.isascii() and c.isalpha() for c in text) > sum("\u4e00" <= c <= "\u9fff" for c in text)
    assert guess_languages([text]) == ["zh"]


@pytest.mark.parametrize(("text", "language", "script"), [
    ("Привет, мир", "Cyrillic", "Cyrillic"),
    ("مرحبا بالعالم", "Arabic", "Arabic"),
    ("안녕하세요 세계", "ko", "Hangul"),
    ("Καλημέρα κόσμε", "el", "Greek"),
    ("שלום עולם", "he", "Hebrew"),
    ("สวัสดีชาวโลก", "th", "Thai"),
    ("नमस्ते दुनिया", "Devanagari", "Devanagari"),
    ("GPT-4は強い", "ja", "Han+Kana"),
    ("吾輩は猫である", "ja", "Han+Kana"),
    ("我是猫", "zh", "Han"),
    ("", "unknown", "unknown"),
    ("123 + 456 = 579 !!", "unknown", "unknown"),
    ("\U0010ffff\U000e0001", "unknown", "unknown"),  # no table entry past U+40000
])
def test_each_script(text: str, language: str, script: str) -> None:
    assert guess_languages([text]) == [language]
    assert dominant_scripts([text]) == [script]


def test_a_few_kana_in_chinese_text_are_not_japanese() -> None:
    han = "中" * 100
    below = han + "の" * 4  # 4 of 104: under 5%
    at = han + "の" * 6  # 6 of 106: over 5%
    assert 4 / 104 < KANA_SHARE_FOR_JA < 6 / 106
    assert guess_languages([below, at]) == ["zh", "ja"]


def test_weights_are_letter_bytes_per_script_and_documents_stay_apart() -> None:
    texts = ["ab é", "", "猫ね", "Жж1"]
    weights, letters = script_weights(texts)
    latin, han, kana, cyrillic = (SCRIPTS.index(s) for s in ("Latin", "Han", "Kana", "Cyrillic"))
    assert weights[0, latin] == 1 + 1 + 2 and letters[0, latin] == 3
    assert weights[1].sum() == 0
    assert (weights[2, han], weights[2, kana]) == (3, 3)
    assert (weights[3, cyrillic], letters[3, cyrillic]) == (4, 2)
    assert weights.sum() == 4 + 6 + 4


def test_documents_beyond_one_slice_are_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpipe.tokeval import scripts

    monkeypatch.setattr(scripts, "_SLICE_CHARS", 5)
    texts = ["Привет", "abc", "猫猫猫猫猫猫猫猫", "x", "안녕"]
    assert guess_languages(texts) == ["Cyrillic", "Latin", "zh", "Latin", "ko"]
