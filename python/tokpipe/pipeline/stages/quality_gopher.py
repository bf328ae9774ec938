"""``gopher_quality`` and ``gopher_repetition``: the heuristic rules of Gopher (Rae et al.
2021, "Scaling Language Models", appendix A1), as datatrove's ``GopherQualityFilter`` and
``GopherRepetitionFilter`` implement them: same parameters, same defaults, same rule order,
same reasons.

The counts are computed in Rust over the Arrow buffers (``tokpipe_core::text::gopher``), all
rows at once on all cores; here they are only compared with the thresholds. Words are split as
spaCy's blank English tokenizer splits them (``tokpipe_core::text::en_words``), which is what
datatrove uses for English; Chinese and Japanese, written without spaces, are cut into a
script-aware unit (``tokpipe_core::text::words``: each Han character or kana is a word, a run
of other letters and digits is one), with language defaults set for it: no minimum mean word
length (a word is one character) and stop words of the language (``STOP_WORDS``). As in datatrove, a threshold set to ``None`` or ``0`` switches its
rule off, and a document is dropped for the first rule it fails.

``language: auto`` judges each document by its ``language`` column's rules
(``tokpipe.pipeline.stages.per_language``): ``languages`` maps en, zh or ja to parameters set
over that language's defaults; other languages get the top-level parameters with
``default_language``'s words and defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Filter, Verdict, register
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.kernels import gopher_quality_stats, gopher_repetition_stats
from tokpipe.pipeline.stages.per_language import LanguageAware, LanguageRules, rules_language
from tokpipe.pipeline.stages.quality_c4 import TERMINAL_PUNCTUATION

__all__ = ["GopherQuality", "GopherRepetition", "STOP_WORDS", "PUNCTUATION"]

#: Stop words per language: datatrove's for English; for Chinese and Japanese, the most
#: frequent function characters (particles, the possessive 的, copulas), which real prose
#: of any length uses and boilerplate, lists of links and garbled text seldom do.
STOP_WORDS = {
    "en": ("the", "be", "to", "of", "and", "that", "have", "with"),
    "zh": ("的", "了", "是", "在", "和", "有", "不", "这", "也", "就", "都", "与", "而", "我", "你"),
    "ja": ("の", "に", "は", "を", "た", "が", "で", "て", "と", "し", "れ", "さ", "な", "い", "も"),
}
#: The least mean word length per language ("auto"): words of Chinese and Japanese are
#: single characters, so the rule is off for them.
MIN_AVG_WORD_LENGTH = {"en": 3.0, "zh": None, "ja": None}
#: The least number of distinct stop words per language ("auto"). A Chinese or Japanese
#: document of 50 characters of prose uses several function characters; a menu or a footer
#: ("关于我们", "有限公司") can hold two.
MIN_STOP_WORDS = {"en": 2, "zh": 3, "ja": 3}

#: datatrove.utils.text.PUNCTUATION_SET: a word made only of these is a symbol, not a word.
PUNCTUATION = "".join(sorted(set(
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b))
).union(TERMINAL_PUNCTUATION)))

#: Columns of the quality statistics (tokpipe_core::text::gopher::QUALITY_STATS).
QUALITY_STATS = ("words", "non_symbol_words", "non_symbol_chars", "hashes", "ellipses", "lines", "bullet_lines",
                 "ellipsis_lines", "alpha_words", "stop_words")
#: First columns of the repetition statistics; one per top n-gram size, then one per
#: duplicated n-gram size follow (tokpipe_core::text::gopher::REPETITION_STATS).
REPETITION_STATS = ("chars", "paragraphs", "dup_paragraphs", "dup_para_chars", "lines", "dup_lines", "dup_line_chars")

#: Languages with a word splitter and defaults.
LANGUAGES = tuple(STOP_WORDS)


def _text(batch: pa.RecordBatch) -> pa.Array:
    text = batch.column(TEXT)
    return text.fill_null("") if text.null_count else text


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0 (datatrove would divide by zero there; NaN fails no rule)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _verdict(rules: list[tuple[str, np.ndarray]], rows: int) -> Verdict:
    if not rules:
        return np.ones(rows, dtype=bool), ""
    failed = [fail for _, fail in rules]
    reasons = np.select(failed, [np.array(name, dtype=object) for name, _ in rules], default=None)
    return ~np.logical_or.reduce(failed), reasons


def _language_default(name: str, value: Any, default: Any) -> Any:
    """``value``, or the language's ``default`` for "auto"."""
    if value == "auto":
        return default
    if isinstance(value, str):
        raise InvalidArgumentError(f"gopher_quality: {name} is a number, null or 'auto', not {value!r}")
    return value


@register
class GopherQuality(LanguageAware, Filter):
    """Drops documents failing Gopher's quality rules, in this order: too few or too many
    words (``gopher_short_doc``, ``gopher_long_doc``; words with a letter, digit or other
    non-punctuation character), mean word length out of range
    (``gopher_below_avg_threshold``, ``gopher_above_avg_threshold``), too many ``#`` or
    ellipses per word (``gopher_too_many_hashes``, ``gopher_too_many_ellipsis``), too many
    lines starting with a bullet (``gopher_too_many_bullets``) or ending with an ellipsis
    (``gopher_too_many_end_ellipsis``), too few words with a letter
    (``gopher_below_alpha_threshold``) and too few distinct stop words
    (``gopher_enough_stop_words``, datatrove's name for it). ``language`` (en, zh, ja) picks
    the words and the defaults of ``min_avg_word_length``, ``min_stop_words`` and
    ``stop_words`` ("auto" and None: the language's, see ``MIN_AVG_WORD_LENGTH``,
    ``MIN_STOP_WORDS``, ``STOP_WORDS``); for en they are datatrove's. ``language: auto``: per
    document, from its ``language`` column; ``languages`` maps en, zh, ja to parameters over
    that language's defaults, the top-level parameters judge the other languages with
    ``default_language``'s words (null: they are kept unjudged)."""

    name = "gopher_quality"

    def __init__(self, min_doc_words: int | None = 50, max_doc_words: int | None = 100000,
                 min_avg_word_length: float | Literal["auto"] | None = "auto", max_avg_word_length: float | None = 10,
                 max_symbol_word_ratio: float | None = 0.1, max_bullet_lines_ratio: float | None = 0.9,
                 max_ellipsis_lines_ratio: float | None = 0.3, max_non_alpha_words_ratio: float | None = 0.8,
                 min_stop_words: int | Literal["auto"] | None = "auto", stop_words: Sequence[str] | None = None,
                 language: str = "en", languages: dict[str, dict[str, Any] | None] | None = None,
                 default_language: str | None = "en") -> None:
        auto, own = rules_language(self.name, language, languages, default_language, LANGUAGES)
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = _language_default("min_avg_word_length", min_avg_word_length,
                                                     MIN_AVG_WORD_LENGTH[own])
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        #: The least share of words with a letter (datatrove's name, kept for its configs).
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio
        self.min_stop_words = _language_default("min_stop_words", min_stop_words, MIN_STOP_WORDS[own])
        self.stop_words = list(dict.fromkeys(STOP_WORDS[own] if stop_words is None else stop_words))
        self.language = language
        self.languages = dict(languages) if languages is not None else None
        self.default_language = default_language
        self._words = own
        self._rules: LanguageRules[GopherQuality] | None = None
        if auto:
            self._rules = LanguageRules(self.name, GopherQuality, languages, self if default_language else None,
                                        lambda code, params: GopherQuality(**params, language=code), LANGUAGES)

    def features(self, batch: pa.RecordBatch) -> np.ndarray:
        """``(rows, len(QUALITY_STATS))``: the per-document counts the rules read (with
        ``language: auto``, those of the default language's words)."""
        counts = gopher_quality_stats(_text(batch), self._words, PUNCTUATION, self.stop_words, len(QUALITY_STATS))
        return counts.astype(np.float64)

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        if self._rules is not None:
            return self._rules.verdict(batch, self.stats, lambda stage, rows: stage.judge(rows))
        return self.judge(batch)

    def judge(self, batch: pa.RecordBatch) -> Verdict:
        """The verdict of this stage's own rules (with ``language: auto``, the default's)."""
        s = self.features(batch)
        words, non_symbol, non_symbol_chars, hashes, ellipses, lines, bullets, end_ellipsis, alpha, stops = s.T
        rules: list[tuple[str, np.ndarray]] = []
        if self.min_doc_words:
            rules.append(("gopher_short_doc", non_symbol < self.min_doc_words))
        if self.max_doc_words:
            rules.append(("gopher_long_doc", non_symbol > self.max_doc_words))
        mean_length = _ratio(non_symbol_chars, non_symbol)
        if self.min_avg_word_length:
            rules.append(("gopher_below_avg_threshold", mean_length < self.min_avg_word_length))
        if self.max_avg_word_length:
            rules.append(("gopher_above_avg_threshold", mean_length > self.max_avg_word_length))
        if self.max_symbol_word_ratio:
            rules.append(("gopher_too_many_hashes", _ratio(hashes, words) > self.max_symbol_word_ratio))
            rules.append(("gopher_too_many_ellipsis", _ratio(ellipses, words) > self.max_symbol_word_ratio))
        if self.max_bullet_lines_ratio:
            rules.append(("gopher_too_many_bullets", _ratio(bullets, lines) > self.max_bullet_lines_ratio))
        if self.max_ellipsis_lines_ratio:
            rules.append(("gopher_too_many_end_ellipsis", _ratio(end_ellipsis, lines) > self.max_ellipsis_lines_ratio))
        if self.max_non_alpha_words_ratio:
            rules.append(("gopher_below_alpha_threshold", _ratio(alpha, words) < self.max_non_alpha_words_ratio))
        if self.min_stop_words:
            rules.append(("gopher_enough_stop_words", stops < self.min_stop_words))
        return _verdict(rules, batch.num_rows)


def _pairs(name: str, value: Sequence[Sequence[float]] | None) -> list[tuple[int, float]]:
    pairs = []
    for pair in value or ():
        if len(pair) != 2 or int(pair[0]) != pair[0] or pair[0] < 1:
            raise InvalidArgumentError(f"gopher_repetition: {name} takes [n, fraction] pairs with n >= 1, got {pair!r}")
        pairs.append((int(pair[0]), float(pair[1])))
    return pairs


@register
class GopherRepetition(LanguageAware, Filter):
    """Drops documents failing Gopher's repetition rules, in this order: empty text
    (``empty``); the share of paragraphs (split at blank lines) that repeat an earlier one, by
    count (``dup_para_frac``) and by characters (``dup_para_char_frac``); the same for lines
    (``dup_line_frac``, ``dup_line_char_frac``); the characters of the most frequent n-gram of
    words for each ``top_n_grams`` size (``top_{n}_gram``); the characters in repeated
    n-grams for each ``dup_n_grams`` size (``duplicated_{n}_n_grams``). Fractions of
    characters are of the whole text's. ``language`` (en, zh, ja) picks the words; ``auto``
    picks them per document, as ``gopher_quality`` does (``languages``, ``default_language``)."""

    name = "gopher_repetition"

    def __init__(self, dup_line_frac: float | None = 0.3, dup_para_frac: float | None = 0.3,
                 dup_line_char_frac: float | None = 0.2, dup_para_char_frac: float | None = 0.2,
                 top_n_grams: Sequence[Sequence[float]] | None = ((2, 0.2), (3, 0.18), (4, 0.16)),
                 dup_n_grams: Sequence[Sequence[float]] | None = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12),
                                                                  (9, 0.11), (10, 0.10)),
                 language: str = "en", languages: dict[str, dict[str, Any] | None] | None = None,
                 default_language: str | None = "en") -> None:
        auto, own = rules_language(self.name, language, languages, default_language, LANGUAGES)
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = _pairs("top_n_grams", top_n_grams)
        self.dup_n_grams = _pairs("dup_n_grams", dup_n_grams)
        self.language = language
        self.languages = dict(languages) if languages is not None else None
        self.default_language = default_language
        self._words = own
        self._rules: LanguageRules[GopherRepetition] | None = None
        if auto:
            self._rules = LanguageRules(self.name, GopherRepetition, languages, self if default_language else None,
                                        lambda code, params: GopherRepetition(**params, language=code), LANGUAGES)

    def features(self, batch: pa.RecordBatch) -> np.ndarray:
        """The per-document counts the rules read: the ``REPETITION_STATS`` columns, then the
        top n-gram characters per ``top_n_grams`` size, then the duplicated n-gram characters
        per ``dup_n_grams`` size."""
        top_n, dup_n = [n for n, _ in self.top_n_grams], [n for n, _ in self.dup_n_grams]
        width = len(REPETITION_STATS) + len(top_n) + len(dup_n)
        return gopher_repetition_stats(_text(batch), self._words, top_n, dup_n, width).astype(np.float64)

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        if self._rules is not None:
            return self._rules.verdict(batch, self.stats, lambda stage, rows: stage.judge(rows))
        return self.judge(batch)

    def judge(self, batch: pa.RecordBatch) -> Verdict:
        """The verdict of this stage's own rules (with ``language: auto``, the default's)."""
        s = self.features(batch)
        chars, paragraphs, dup_paragraphs, dup_para_chars, lines, dup_lines, dup_line_chars = s[:, :7].T
        rules: list[tuple[str, np.ndarray]] = [("empty", chars == 0)]
        if self.dup_para_frac:
            rules.append(("dup_para_frac", _ratio(dup_paragraphs, paragraphs) > self.dup_para_frac))
        if self.dup_para_char_frac:
            rules.append(("dup_para_char_frac", _ratio(dup_para_chars, chars) > self.dup_para_char_frac))
        if self.dup_line_frac:
            rules.append(("dup_line_frac", _ratio(dup_lines, lines) > self.dup_line_frac))
        if self.dup_line_char_frac:
            rules.append(("dup_line_char_frac", _ratio(dup_line_chars, chars) > self.dup_line_char_frac))
        column = 7
        for n, frac in self.top_n_grams:
            rules.append((f"top_{n}_gram", _ratio(s[:, column], chars) > frac))
            column += 1
        for n, frac in self.dup_n_grams:
            rules.append((f"duplicated_{n}_n_grams", _ratio(s[:, column], chars) > frac))
            column += 1
        return _verdict(rules, batch.num_rows)
