"""``text_stats`` and ``blocklist``: statistical features of each document as columns, with
optional thresholds, and counts of a user's word or phrase list.

The features are computed in Rust over the Arrow text buffers, one pass over each document's
characters, on all cores (``rust/tokpipe-core/src/text/stats.rs``, ``blocklist.rs``).

**Words** (both stages) are *script-aware words* (``rust/tokpipe-core/src/text/words.rs``):
the text is cut into tokens at whitespace (``str.isspace``); inside a token each CJK character
(a letter or number, Unicode category L* or N*, in the blocks U+3005..U+3007, U+303B,
U+3040..U+30FF, U+31F0..U+31FF, U+3400..U+4DBF, U+4E00..U+9FFF, U+F900..U+FAFF,
U+FF66..U+FF9F or U+20000..U+3FFFF: Han, Hiragana, Katakana) is one word by itself and cuts
the token, and so do, without being words, the CJK full stops ``。！？｡``; every other piece of a
token is one word when it holds at least one letter or number (L*, N*). So ``don't stop.`` is
2 words, ``我是猫。`` 3, ``GPT-4は強い`` 4, and a lone ``-``, ``#`` or ``...`` is none. Chinese
and Japanese have no spaces, so a whitespace count would make a paragraph one word; English
spaCy words (``c4_quality``) exist for English only.

**Sentences**: a sentence ends after each ``.``, ``!`` or ``?`` followed by whitespace or the end
of the text, and after each ``。！？｡``; a sentence is counted when it holds at least one word
(``...`` or ``?!`` end one sentence, not several). Every word lies in one sentence.

**Characters**: the text's non-whitespace characters.

Features (column ``stat_<name>``, float64, on kept and rejected rows alike):

==========================  ====================================================================
``words``                   script-aware words
``sentences``               sentences holding a word
``sentence_length_mean``    words per sentence (0 without a sentence)
``sentence_length_var``     population variance of the words per sentence
``hash_word_ratio``         ``#`` per word (Gopher's symbol-to-word ratio for the hash; Gopher
                            drops above 0.1)
``ellipsis_word_ratio``     ``...`` (non-overlapping, as ``str.count``) plus ``…`` per word
                            (Gopher's ratio for the ellipsis; Gopher drops above 0.1)
``digit_ratio``             decimal digits (category Nd, ``str.isdecimal``) per character
``uppercase_ratio``         upper-case letters (Lu) per cased letter (Lu, Ll, Lt)
``non_alnum_ratio``         characters that are neither letter nor number (not L*, N*) per
                            character
``punct_<class>``           the punctuation distribution: the share of each class among the
                            punctuation characters (category P*); classes: ``period``
                            (``. 。 ｡ ．``), ``comma`` (``, ， 、 ､``), ``exclamation`` (``! ！``),
                            ``question`` (``? ？``), ``colon`` (``: ; ： ；``), ``quote``
                            (``" ' “ ” ‘ ’ « » ‹ › „ ‚ 「 」 『 』 ＂ ＇``), ``bracket``
                            (``( ) [ ] { } （ ） ［ ］ ｛ ｝ 【 】 〔 〕 《 》 〈 〉``), ``dash``
                            (category Pd) and ``other`` (the rest of P*); they sum to 1 when
                            the text has punctuation, else all are 0
==========================  ====================================================================

A ratio whose denominator is 0 is taken over 1 (0 when its numerator is 0 too).

The features do not depend on the language; the thresholds may: with ``language: auto`` each
document is held to the thresholds of its ``language`` column's entry in ``languages`` (a
table of ``min_``/``max_`` thresholds; a listed language starts from none), and documents of
other languages to the top-level thresholds (``tokpipe.pipeline.stages.per_language``).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.documents import TEXT, set_column
from tokpipe.pipeline.kernels import TEXT_STATS_FEATURES, blocklist_counts, text_stats
from tokpipe.pipeline.stages.per_language import LanguageAware, LanguageRules, check_auto

__all__ = ["TextStats", "Blocklist", "FEATURES", "text_features"]

#: The features, in the order the kernel lays them out; column ``stat_<name>``.
FEATURES: tuple[str, ...] = TEXT_STATS_FEATURES

#: Column-name prefix of the features.
PREFIX = "stat_"


def text_features(text: pa.Array | pa.ChunkedArray) -> dict[str, np.ndarray]:
    """Every feature of a string column (null rows read as empty text), as float64 arrays."""
    values = text_stats(text)
    return {f: values[i] for i, f in enumerate(FEATURES)}


def _first_failure(rules: list[tuple[str, np.ndarray]], n: int) -> np.ndarray:
    """Per row, the name of the first rule that failed, "" when none did."""
    reasons = np.full(n, "", dtype=object)
    for reason, failed in reversed(rules):  # the first failing rule wins
        reasons[failed] = reason
    return reasons


@register
class TextStats(LanguageAware, Stage):
    """Adds a ``stat_<feature>`` column per feature (see the module's documentation for their
    definitions) and drops a document outside ``min_<feature>`` / ``max_<feature>`` (both
    inclusive bounds; ``None``, the default, sets none), with the feature's name as the reason;
    the first failing feature, in the table's order, names it, and the rejected row carries the
    value in its ``stat_<feature>`` column. By default nothing is dropped; Gopher's published
    thresholds are ``max_hash_word_ratio: 0.1`` and ``max_ellipsis_word_ratio: 0.1``.
    ``language: auto`` picks the thresholds per document from its ``language`` column:
    ``languages`` maps a language code to its thresholds, the top-level ones hold for the
    other languages."""

    name = "text_stats"

    def __init__(self, **thresholds: Any) -> None:
        language = thresholds.pop("language", None)
        languages = thresholds.pop("languages", None)
        if language is not None and language != "auto":
            raise InvalidArgumentError(f"text_stats: language is auto or null (the features do not depend on "
                                       f"the language; the thresholds may, per language), not {language!r}")
        auto = check_auto(self.name, language, languages)
        for key, value in thresholds.items():
            if key not in _THRESHOLDS:
                raise InvalidArgumentError(f"text_stats: no threshold {key!r} (thresholds are min_<feature> and "
                                           f"max_<feature> for {', '.join(FEATURES)})")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise InvalidArgumentError(f"text_stats: {key} must be a number or null, not {value!r}")
        for key in _THRESHOLDS:
            value = thresholds.get(key)
            setattr(self, key, None if value is None else float(value))
        for feature in FEATURES:
            low, high = getattr(self, f"min_{feature}"), getattr(self, f"max_{feature}")
            if low is not None and high is not None and low > high:
                raise InvalidArgumentError(f"text_stats: min_{feature} ({low}) is above max_{feature} ({high})")
        self.language = language
        self.languages = dict(languages) if languages is not None else None
        self._rules: LanguageRules[TextStats] | None = None
        if auto:
            self._rules = LanguageRules(self.name, TextStats, languages, self,
                                        lambda code, params: TextStats(**params))

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        features = text_features(batch.column(TEXT))
        for feature, values in features.items():
            batch = set_column(batch, PREFIX + feature, pa.array(values, type=pa.float64()))
        if self._rules is not None:
            reasons = np.full(batch.num_rows, "", dtype=object)
            groups = self._rules.groups(batch)
            for group in groups:
                found = group.stage.failures({f: v[group.rows] for f, v in features.items()}) if group.stage else None
                if found is not None:
                    reasons[group.rows] = found
            self._rules.count(self.stats, groups, reasons == "")
            return self.reject(batch, reasons == "", reasons)
        reasons = self.failures(features)
        if reasons is None:
            return StageResult(batch)
        return self.reject(batch, reasons == "", reasons)

    def failures(self, features: dict[str, np.ndarray]) -> np.ndarray | None:
        """Per document, the first feature out of this stage's bounds ("" when none is); None
        when the stage sets no bound."""
        rules = []
        for feature, values in features.items():
            low, high = getattr(self, f"min_{feature}"), getattr(self, f"max_{feature}")
            if low is None and high is None:
                continue
            failed = np.zeros(len(values), dtype=bool)
            if low is not None:
                failed |= values < low
            if high is not None:
                failed |= values > high
            rules.append((feature, failed))
        if not rules:
            return None
        return _first_failure(rules, len(next(iter(features.values()))))


_THRESHOLDS = tuple(f"{bound}_{feature}" for feature in FEATURES for bound in ("min", "max"))

# The config reads a stage's parameters from its constructor's signature: give it one named
# parameter per threshold (keyword-only in practice: **thresholds takes them).
TextStats.__init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="float | None")
       for name in _THRESHOLDS]
    + [inspect.Parameter("language", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="str | None"),
       inspect.Parameter("languages", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                         annotation="dict[str, dict[str, Any] | None] | None")])


@register
class Blocklist(Stage):
    """Counts the matches of a word or phrase list in each document (``words``, and/or
    ``words_file``: a UTF-8 file, one entry a line, blank lines ignored), matched with
    Aho-Corasick in Rust: every occurrence of every entry, overlapping ones included; with
    ``ignore_case`` (default) text and entries are lower-cased (``str.lower``) first; with
    ``word_boundaries`` (default; C4's bad-words rule, which turns it off for ja, th and zh)
    only where the characters around the match are not word characters (letters, numbers,
    ``_``) or are the text's ends. Set ``word_boundaries: false`` for Chinese or Japanese lists.

    Adds ``blocklist_hits`` (int64) and ``blocklist_per_1000_words`` (float64: hits × 1000 over
    the script-aware words, see the module's documentation, taken over 1 when there are none)
    and drops documents above ``max_per_1000_words`` (reason ``blocklist``; the rejected row
    carries both columns). The default 0 drops any document with a match, as C4 does; ``null``
    only annotates."""

    name = "blocklist"

    def __init__(self, words: list[str] | None = None, words_file: str | None = None, ignore_case: bool = True,
                 word_boundaries: bool = True, max_per_1000_words: float | None = 0.0) -> None:
        if isinstance(words, str):
            raise InvalidArgumentError("blocklist: words is a list of words or phrases, not a string")
        entries = [w.strip() for w in (words or [])]
        if words_file is not None:
            path = Path(words_file)
            if not path.is_file():
                raise InvalidArgumentError(f"blocklist: no words file at {path}")
            entries += [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        entries = sorted(set(e for e in entries if e))
        if not entries:
            raise InvalidArgumentError("blocklist: give words or words_file (with at least one entry)")
        if max_per_1000_words is not None and not max_per_1000_words >= 0:
            raise InvalidArgumentError(f"blocklist: max_per_1000_words must be >= 0 or null, not {max_per_1000_words}")
        self.words = words
        self.words_file = words_file
        self.ignore_case = ignore_case
        self.word_boundaries = word_boundaries
        self.max_per_1000_words = max_per_1000_words
        self._entries = entries

    def counts(self, text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """(matches, script-aware words) per row of a string column, as int64 arrays."""
        return blocklist_counts(text, self._entries, self.ignore_case, self.word_boundaries)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        hits, words = self.counts(batch.column(TEXT))
        rate = hits * 1000.0 / np.maximum(words, 1)
        batch = set_column(batch, "blocklist_hits", pa.array(hits, type=pa.int64()))
        batch = set_column(batch, "blocklist_per_1000_words", pa.array(rate, type=pa.float64()))
        if self.max_per_1000_words is None:
            return StageResult(batch)
        return self.reject(batch, ~(rate > self.max_per_1000_words), "blocklist")
