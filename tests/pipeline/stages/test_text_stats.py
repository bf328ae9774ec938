"""text_stats and blocklist: every feature and count against plain Python implementations of
the documented definitions, on the real documents of ../shared/corpora; thresholds at their
boundaries."""

from __future__ import annotations

import functools
import math
import re
import statistics
import unicodedata

import numpy as np
import pyarrow as pa
import pytest

from tokpipe.errors import ConfigError, InvalidArgumentError
from tokpipe.pipeline.config import parse_config
from tokpipe.pipeline.stages.text_stats import FEATURES, Blocklist, TextStats

# --- Reference implementations, written from the module's documentation -----------------------

CJK_BLOCKS = [(0x3005, 0x3007), (0x303B, 0x303B), (0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF),
              (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x3FFFF)]
CJK_STOPS = "。！？｡"
PUNCT_CLASSES = {
    "period": ".。｡．",
    "comma": ",，、､",
    "exclamation": "!！",
    "question": "?？",
    "colon": ":;：；",
    "quote": "\"'“”‘’«»‹›„‚「」『』＂＇",
    "bracket": "()[]{}（）［］｛｝【】〔〕《》〈〉",
}


def is_alnum(c: str) -> bool:
    return unicodedata.category(c)[0] in "LN"


def is_cjk(c: str) -> bool:
    return is_alnum(c) and any(lo <= ord(c) <= hi for lo, hi in CJK_BLOCKS)


def words_of(text: str) -> list[str]:
    words = []
    for token in text.split():
        piece = ""
        for c in token + " ":  # the space flushes the last piece
            if is_cjk(c) or c in CJK_STOPS or c == " ":
                if any(is_alnum(x) for x in piece):
                    words.append(piece)
                piece = ""
                if is_cjk(c):
                    words.append(c)
            else:
                piece += c
    return words


@functools.lru_cache(maxsize=None)
def word_count(text: str) -> int:
    return len(words_of(text))


def sentence_lengths(text: str) -> list[int]:
    segments, start = [], 0
    for i, c in enumerate(text):
        if c in CJK_STOPS or (c in ".!?" and (i + 1 == len(text) or text[i + 1].isspace())):
            segments.append(text[start:i + 1])
            start = i + 1
    segments.append(text[start:])
    return [n for n in (len(words_of(s)) for s in segments) if n]


def reference_features(text: str) -> dict[str, float]:
    def ratio(a: int, b: int) -> float:
        return a / max(b, 1)

    n_words = word_count(text)
    lengths = sentence_lengths(text)
    chars = [c for c in text if not c.isspace()]
    cats = [unicodedata.category(c) for c in chars]
    punct = [c for c, g in zip(chars, cats) if g.startswith("P")]
    out = {
        "words": float(n_words),
        "sentences": float(len(lengths)),
        "sentence_length_mean": sum(lengths) / len(lengths) if lengths else 0.0,
        "sentence_length_var": float(statistics.pvariance(lengths)) if lengths else 0.0,
        "hash_word_ratio": ratio(text.count("#"), n_words),
        "ellipsis_word_ratio": ratio(text.count("...") + text.count("…"), n_words),
        "digit_ratio": ratio(sum(g == "Nd" for g in cats), len(chars)),
        "uppercase_ratio": ratio(sum(g == "Lu" for g in cats), sum(g in ("Lu", "Ll", "Lt") for g in cats)),
        "non_alnum_ratio": ratio(sum(g[0] not in "LN" for g in cats), len(chars)),
    }
    counts = dict.fromkeys([*PUNCT_CLASSES, "dash", "other"], 0)
    for c in punct:
        named = [name for name, members in PUNCT_CLASSES.items() if c in members]
        counts[named[0] if named else "dash" if unicodedata.category(c) == "Pd" else "other"] += 1
    for name, n in counts.items():
        out[f"punct_{name}"] = ratio(n, len(punct))
    return out


def reference_hits(text: str, entries: list[str], ignore_case: bool, word_boundaries: bool) -> int:
    """Overlapping occurrences of every distinct entry; C4's (?:\\W|^)...(?:\\W|$) as lookarounds."""
    if ignore_case:
        text, entries = text.lower(), [e.lower() for e in entries]
    total = 0
    for entry in set(e for e in entries if e):
        pattern = re.escape(entry)
        if word_boundaries:
            pattern = rf"(?<!\w){pattern}(?!\w)"
        total += len(re.findall(f"(?={pattern})", text))
    return total


# --- Helpers -------------------------------------------------------------------------------------

def batch(*texts: str) -> pa.RecordBatch:
    return pa.record_batch([pa.array(list(texts), type=pa.string())], names=["text"])


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture(scope="module")
def texts(documents) -> list[str]:
    """The real documents, plus each text file cut into 40-line pieces (many short documents
    of every script) and a few edge cases."""
    out = [text for _, text in documents]
    for name, text in documents:
        if name.endswith(".txt"):
            lines = text.splitlines(keepends=True)
            out += ["".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    return out + ["", "   \n", "...", "Wait... what?! Yes.", "#1 #2 ## ……", "ＡＢＣ１２３。ｱｲｳ", "ǅemal Ⅻ ½ x²"]


# --- text_stats ----------------------------------------------------------------------------------

def test_features_match_the_definitions_on_real_documents(texts):
    result = TextStats().process(batch(*texts))
    assert result.rejected is None and result.kept.num_rows == len(texts)
    columns = {f: result.kept.column(f"stat_{f}").to_pylist() for f in FEATURES}
    assert all(result.kept.schema.field(f"stat_{f}").type == pa.float64() for f in FEATURES)
    mismatches = []
    for i, text in enumerate(texts):
        expected = reference_features(text)
        assert set(expected) == set(FEATURES)
        for f in FEATURES:
            if not close(columns[f][i], expected[f]):
                mismatches.append((i, f, columns[f][i], expected[f], text[:60]))
    assert not mismatches, mismatches[:10]


def test_features_of_a_hand_counted_text():
    kept = TextStats().process(batch("Hi there. Is it 3.14? Yes... #1 我是猫。OK")).kept
    f = {name: kept.column(f"stat_{name}")[0].as_py() for name in FEATURES}
    # Sentences: "Hi there." (2 words), "Is it 3.14?" (3), "Yes..." (1), "#1 我是猫。" (4), "OK" (1).
    assert f["words"] == 11 and f["sentences"] == 5 and f["sentence_length_mean"] == 11 / 5
    assert f["hash_word_ratio"] == 1 / 11 and f["ellipsis_word_ratio"] == 1 / 11
    assert f["digit_ratio"] == 4 / 31 and f["uppercase_ratio"] == 5 / 16
    assert f["punct_period"] == 6 / 8 and f["punct_question"] == 1 / 8 and f["punct_other"] == 1 / 8


def test_thresholds_just_inside_and_outside(texts):
    sample = [t for t in texts if t.strip()][:: max(1, len(texts) // 12)][:12]
    for text in sample:
        values = reference_features(text)
        for f in FEATURES:
            v = values[f]
            for bound, outside in (("max", np.nextafter(v, -np.inf)), ("min", np.nextafter(v, np.inf))):
                inside = TextStats(**{f"{bound}_{f}": v}).process(batch(text))
                assert inside.rejected is None, (f, bound, v)
                dropped = TextStats(**{f"{bound}_{f}": float(outside)}).process(batch(text))
                assert dropped.kept.num_rows == 0
                assert dropped.rejected.column("reason").to_pylist() == [f]
                # The rejected row carries the value that failed.
                assert close(dropped.rejected.column(f"stat_{f}")[0].as_py(), v)


def test_first_failing_feature_names_the_reason():
    stage = TextStats(max_digit_ratio=0.1, min_words=3)
    result = stage.process(batch("1 2 3 4", "12", "a b c d", "ab"))
    assert result.kept.column("text").to_pylist() == ["a b c d"]
    assert result.rejected.column("reason").to_pylist() == ["digit_ratio", "words", "words"]
    assert stage.stats.dropped == {"digit_ratio": 1, "words": 2}


def test_text_stats_config_and_errors():
    config = parse_config({"stages": [{"type": "text_stats", "max_hash_word_ratio": 0.1}]})
    params = config.to_dict()["stages"][0]
    assert params["max_hash_word_ratio"] == 0.1 and params["min_words"] is None
    # type, every feature's two bounds, and the per-language options (language, languages)
    assert len(params) == 1 + 2 * len(FEATURES) + 2
    assert params["language"] is None and params["languages"] is None
    with pytest.raises(ConfigError, match="no parameter 'max_word_ratio'"):
        parse_config({"stages": [{"type": "text_stats", "max_word_ratio": 0.1}]})
    with pytest.raises(InvalidArgumentError):
        TextStats(max_foo=1)
    with pytest.raises(InvalidArgumentError):
        TextStats(min_words=5, max_words=4)
    with pytest.raises(InvalidArgumentError):
        TextStats(max_words="many")


def test_null_and_sliced_text():
    column = pa.array(["skip", None, "Two words.", "x"], type=pa.large_string()).slice(1, 2)
    result = TextStats().process(pa.record_batch([column], names=["text"]))
    assert result.kept.column("stat_words").to_pylist() == [0.0, 2.0]


# --- blocklist -----------------------------------------------------------------------------------

WORD_LIST = ["the", "of the", "THE", "Project Gutenberg", "said", "tea", "a", "猫", "である", "模型", "data", "x-ray",
             "don't", "thou", "吾輩"]


@pytest.mark.parametrize("ignore_case,word_boundaries", [(True, True), (False, True), (True, False), (False, False)])
def test_blocklist_counts_match_regex_reference(texts, ignore_case, word_boundaries):
    # The entries also go into the documents: inside words, at the ends, next to punctuation.
    inserted = [f"{t[:50]}xTheyThe said,tea{t[50:]} 猫である_a" for t in texts[::5]]
    corpus = texts + inserted
    stage = Blocklist(words=WORD_LIST, ignore_case=ignore_case, word_boundaries=word_boundaries,
                      max_per_1000_words=None)
    result = stage.process(batch(*corpus))
    assert result.rejected is None
    hits = result.kept.column("blocklist_hits").to_pylist()
    rate = result.kept.column("blocklist_per_1000_words").to_pylist()
    entries = sorted(set(WORD_LIST))
    for i, text in enumerate(corpus):
        expected = reference_hits(text, entries, ignore_case, word_boundaries)
        assert hits[i] == expected, (i, text[:80])
        assert close(rate[i], expected * 1000 / max(word_count(text), 1)), i
    assert sum(hits) > 1000


def test_blocklist_threshold_just_inside_and_outside(documents):
    text = dict(documents)["botchan.txt"][:20000]
    rate = reference_hits(text, ["master"], True, True) * 1000 / word_count(text)
    assert rate > 0
    assert Blocklist(words=["master"], max_per_1000_words=rate).process(batch(text)).rejected is None
    below = float(np.nextafter(rate, -np.inf))
    result = Blocklist(words=["master"], max_per_1000_words=below).process(batch(text))
    assert result.kept.num_rows == 0 and result.rejected.column("reason").to_pylist() == ["blocklist"]
    assert close(result.rejected.column("blocklist_per_1000_words")[0].as_py(), rate)


def test_blocklist_default_drops_any_match_and_reads_files(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("darn\n\n  heck no \n", encoding="utf-8")
    stage = Blocklist(words_file=str(path))
    result = stage.process(batch("Well, DARN it.", "Darned thing.", "Heck no!", "clean"))
    assert result.kept.column("text").to_pylist() == ["Darned thing.", "clean"]
    assert result.kept.column("blocklist_hits").to_pylist() == [0, 0]
    assert result.rejected.column("blocklist_hits").to_pylist() == [1, 1]
    assert stage.stats.dropped == {"blocklist": 2}
    with pytest.raises(InvalidArgumentError):
        Blocklist()
    with pytest.raises(InvalidArgumentError):
        Blocklist(words="darn")
    with pytest.raises(InvalidArgumentError):
        Blocklist(words_file=str(tmp_path / "missing.txt"))
    with pytest.raises(InvalidArgumentError):
        Blocklist(words=["x"], max_per_1000_words=-1)
