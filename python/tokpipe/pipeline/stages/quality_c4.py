"""``c4_quality``, ``c4_badwords`` and ``fineweb_quality``: the heuristic rules of C4 and
FineWeb, with datatrove's parameter names, defaults, rule order and reasons.

The rules run in Rust over the Arrow text buffers on all cores (``tokpipe.pipeline.kernels``); English
words and sentences are counted by a port of spaCy's English tokenizer and sentencizer, which
is what datatrove uses for English (see ``rust/tokpipe-core/src/text/en_words.rs``).

``language: auto`` (``c4_quality``, ``fineweb_quality``) judges each document by the rules of
its ``language`` column (``tokpipe.pipeline.stages.per_language``): ``languages`` maps a
language the stage has rules for to parameters, the top-level parameters judge the rest with
``default_language``'s rules (null: the rest are kept unjudged). C4's rules are English only,
so ``c4_quality`` with ``languages: {en: {}}`` and ``default_language: null`` applies them to
the English documents of a mixed crawl and leaves the others alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Filter, Stage, StageResult, Verdict, register
from tokpipe.pipeline.documents import TEXT, replace_text
from tokpipe.pipeline.kernels import FINEWEB_STATS, arrow_of, c4_badwords, c4_quality, fineweb_stats, word_counts
from tokpipe.pipeline.stages.per_language import LanguageAware, LanguageRules, in_row_order, rules_language

__all__ = ["C4Quality", "C4BadWords", "FineWebQuality", "TERMINAL_PUNCTUATION"]

_C4_REASONS = np.array(["", "lorem_ipsum", "curly_bracket", "too_few_sentences"], dtype=object)
_C4_LINE_STATS = ("line-total", "line-filter-too_long_word", "line-filter-no_terminal_punc",
                  "line-filter-too_few_words", "line-filter-javascript", "line-filter-policy", "line-kept")

# datatrove.utils.text.TERMINAL_PUNCTUATION: FineWeb's default stop characters.
TERMINAL_PUNCTUATION = tuple(sorted(
    "᪩？⁈𑩂．꩞𑅃﹗𑂾\u1b7d፧𑅂꡶꘎⁉࠾᪨𑊩𑱂᱿𖩮᥅\U00011f43\U00011f44﹒𑈹𑈸።܂؞꛳\U00010f88𑗍𐩖𑙂\u061d꩟᠉\u1b7e𑗗᰼𑻸؟𑪜꧉𑗉𐽙𖫵𖬷܀꓿᜵𑗏𑁇𑗓"
    "𑥄៖𑥆𑗑𑗒꯫۔𐩗\U00010f86꡷\u2e54｡៕߹⸮.𑇅࠹𛲟꫰꤯𐽗᭞𑜼፨𑃁꣏𑇟𖬸𑪛𑜾࠷𝪈?𑃀𑗃！։꣎॥𑗖᭛᠃!၊𖺘⁇𑗌𑑋𖭄᭟𑅁𑙁⸼꩝𑗋。꧈꫱𑜽𐽖𑂿᙮។꛷"
    "\U00010f89៚᥄𑗕𑗎᪪᭚࠽𑇞𑗊𐽘\u2e53𑗔𖩯𑇍𑻷𐽕𑩃।𑗂𑇆𑁈။᱾𑱁꘏܁᜶‼𑈻‽᪫﹖𑑌𑈼\U00010f87𑗐៙᰻"))


#: Languages with a word splitter (tokpipe_core::text::words::Splitter): spaCy's English
#: tokenizer for en, the script-aware unit (each Han character or kana a word) for zh and ja.
WORD_LANGUAGES = ("en", "zh", "ja")


@register
class C4Quality(LanguageAware, Stage):
    """C4's rules as datatrove's ``C4QualityFilter`` applies them, line by line (lines are
    ``str.splitlines()``, stripped): a line is dropped when it has a word over
    ``max_word_length`` characters, does not end in terminal punctuation (``. ? ! " '``, not
    ``...``), has fewer than ``min_words_per_line`` words, mentions javascript or a policy
    phrase; the document is dropped (``lorem_ipsum``, ``curly_bracket``) when a kept line has
    "lorem ipsum" or ``{``, or (``too_few_sentences``) when its kept lines hold fewer than
    ``min_num_sentences`` sentences. Kept documents get the kept lines joined by newlines.
    Wikipedia citations (``[1]``, ``[edit]``, ``[citation needed]``) are removed when
    ``remove_citations``. ``-1`` disables a number. ``language`` is en (C4's rules are
    English); ``auto`` reads each document's ``language`` column: ``languages: {en: {...}}``
    sets the English parameters, the top-level ones judge the other languages by
    ``default_language`` (en), or, with ``default_language: null``, leave them unjudged."""

    name = "c4_quality"

    def __init__(self, split_paragraph: bool = True, remove_citations: bool = True,
                 filter_no_terminal_punct: bool = True, min_num_sentences: int = 5, min_words_per_line: int = 3,
                 max_word_length: int = 1000, filter_lorem_ipsum: bool = True, filter_javascript: bool = True,
                 filter_curly_bracket: bool = True, filter_policy: bool = True, language: str = "en",
                 languages: dict[str, dict[str, Any] | None] | None = None,
                 default_language: str | None = "en") -> None:
        if not split_paragraph:
            raise InvalidArgumentError("c4_quality: only split_paragraph: true (C4's line rules) is supported")
        auto, _ = rules_language(self.name, language, languages, default_language, ("en",))
        self.split_paragraph = split_paragraph
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct
        self.min_num_sentences = int(min_num_sentences)
        self.min_words_per_line = int(min_words_per_line)
        self.max_word_length = int(max_word_length)
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_javascript = filter_javascript
        self.filter_curly_bracket = filter_curly_bracket
        self.filter_policy = filter_policy
        self.language = language
        self.languages = dict(languages) if languages is not None else None
        self.default_language = default_language
        self._rules: LanguageRules[C4Quality] | None = None
        if auto:
            self._rules = LanguageRules(self.name, C4Quality, languages, self if default_language else None,
                                        lambda code, params: C4Quality(**params, language=code), ("en",))

    def rewrite(self, text: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray, dict[str, int]]:
        """(new text, reason per row ("" when kept), line counts) for a string column."""
        new_text, drops, line_stats = c4_quality(
            text, self.remove_citations, self.filter_no_terminal_punct, self.min_num_sentences,
            self.min_words_per_line, self.max_word_length, self.filter_lorem_ipsum, self.filter_javascript,
            self.filter_curly_bracket, self.filter_policy)
        return new_text, _C4_REASONS[drops], dict(zip(_C4_LINE_STATS, line_stats))

    def _rewrite_by_language(self, batch: pa.RecordBatch) -> tuple[pa.Array, np.ndarray, dict[str, int]]:
        """``rewrite`` with each rule set on its rows (``language: auto``); unjudged rows keep
        their text."""
        assert self._rules is not None
        groups = self._rules.groups(batch)
        reasons = np.full(batch.num_rows, "", dtype=object)
        texts, line_stats = [], dict.fromkeys(_C4_LINE_STATS, 0)
        for group in groups:
            text = group.batch.column(TEXT)
            if group.stage is None:
                texts.append(text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text)
                continue
            new_text, why, stats = group.stage.rewrite(text)
            texts.append(new_text)
            reasons[group.rows] = why
            for key, value in stats.items():
                line_stats[key] += value
        self._rules.count(self.stats, groups, reasons == "")
        return in_row_order(groups, texts, batch.num_rows), reasons, line_stats

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        if self._rules is not None and batch.num_rows:
            new_text, reasons, line_stats = self._rewrite_by_language(batch)
        else:
            new_text, reasons, line_stats = self.rewrite(batch.column(TEXT))
        self.stats.extra.update(line_stats)
        mask = reasons == ""
        result = self.reject(batch, mask, reasons)  # rejected documents keep their original text
        kept_text = new_text.take(arrow_of(np.flatnonzero(mask)))  # by index: pa.array() would import pandas
        return StageResult(replace_text(result.kept, kept_text), result.rejected)


@register
class C4BadWords(Filter):
    """C4's bad-words rule (datatrove's ``C4BadWordsFilter``): drops a document
    (``document_removed_with_badwords``) whose lower-cased text contains one of ``badwords``
    (a list, or ``badwords_file``: a path, one word or phrase a line), matched with
    Aho-Corasick; with ``word_boundaries`` (C4's rule for all but ja, th, zh) only where
    flanked by non-word characters. ``keep_fraction`` of such documents are kept at random
    (``seed``)."""

    name = "c4_badwords"

    def __init__(self, badwords: list[str] | None = None, badwords_file: str | None = None,
                 word_boundaries: bool = True, keep_fraction: float = 0.0, seed: int | None = None) -> None:
        words = set(w.strip().lower() for w in (badwords or []))
        if badwords_file is not None:
            path = Path(badwords_file)
            if not path.is_file():
                raise InvalidArgumentError(f"c4_badwords: no badwords file at {path}")
            words.update(line.strip().lower() for line in path.read_text(encoding="utf-8").splitlines())
        words.discard("")
        if not words:
            raise InvalidArgumentError("c4_badwords: give badwords or badwords_file")
        if not 0.0 <= keep_fraction <= 1.0:
            raise InvalidArgumentError(f"c4_badwords: keep_fraction must be in [0, 1], not {keep_fraction}")
        self.badwords = badwords
        self.badwords_file = badwords_file
        self.word_boundaries = word_boundaries
        self.keep_fraction = keep_fraction
        self.seed = seed
        self._words = sorted(words)
        self._rng = np.random.default_rng(seed)

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        found = c4_badwords(batch.column(TEXT), self._words, self.word_boundaries)
        keep = ~found
        if self.keep_fraction > 0.0 and found.any():
            keep[found] = self._rng.uniform(size=int(found.sum())) < self.keep_fraction
        return keep, "document_removed_with_badwords"


@register
class FineWebQuality(LanguageAware, Filter):
    """FineWeb's rules as datatrove's ``FineWebQualityFilter`` applies them, in order, over the
    text's non-blank lines (cut at ``\\n``): ``empty`` (no such line); ``line_punct_ratio``
    (share of lines ending in one of ``stop_chars`` under ``line_punct_thr``, unless it is 0
    and ``line_punct_exclude_zero``); ``short_line_ratio`` (share of lines of at most
    ``short_line_length`` characters over ``short_line_thr``); ``char_dup_ratio`` (characters
    of repeated lines over all characters but newlines, above ``char_duplicates_ratio``);
    ``list_ratio`` (newlines per word above ``new_line_ratio``). Words are spaCy's for
    ``language: en`` (as datatrove's), the script-aware unit for ``zh`` and ``ja``; ``auto`` picks
    them per document, as ``gopher_quality`` does (``languages``, ``default_language``)."""

    name = "fineweb_quality"

    def __init__(self, line_punct_thr: float = 0.12, line_punct_exclude_zero: bool = False,
                 stop_chars: list[str] | None = None, short_line_thr: float = 0.67, short_line_length: int = 30,
                 char_duplicates_ratio: float = 0.01, new_line_ratio: float = 0.3, language: str = "en",
                 languages: dict[str, dict[str, Any] | None] | None = None,
                 default_language: str | None = "en") -> None:
        auto, own = rules_language(self.name, language, languages, default_language, WORD_LANGUAGES)
        self.line_punct_thr = line_punct_thr
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.stop_chars = list(stop_chars) if stop_chars is not None else None
        self.short_line_thr = short_line_thr
        self.short_line_length = int(short_line_length)
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio
        self.language = language
        self.languages = dict(languages) if languages is not None else None
        self.default_language = default_language
        self._words = own
        self._rules: LanguageRules[FineWebQuality] | None = None
        if auto:
            self._rules = LanguageRules(self.name, FineWebQuality, languages, self if default_language else None,
                                        lambda code, params: FineWebQuality(**params, language=code), WORD_LANGUAGES)

    def statistics(self, text: pa.Array | pa.ChunkedArray, count_words: bool = True) -> dict[str, np.ndarray]:
        """The per-document counts the rules read; ``words`` is 0 without ``count_words``."""
        stop = self.stop_chars if self.stop_chars is not None else list(TERMINAL_PUNCTUATION)
        counts = fineweb_stats(text, stop, self.short_line_length, self._words if count_words else None)
        return {f: counts[i].astype(np.float64) for i, f in enumerate(FINEWEB_STATS)}

    def word_counts(self, text: pa.Array | pa.ChunkedArray, selected: np.ndarray) -> np.ndarray:
        """The words of the rows of the boolean mask ``selected`` (0 for the others)."""
        return word_counts(text, self._words, selected).astype(np.float64)

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        if self._rules is not None:
            return self._rules.verdict(batch, self.stats, lambda stage, rows: stage.judge(rows))
        return self.judge(batch)

    def judge(self, batch: pa.RecordBatch) -> Verdict:
        """The verdict of this stage's own rules (with ``language: auto``, the default's)."""
        text = batch.column(TEXT)
        s = self.statistics(text, count_words=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            lines = np.maximum(s["lines"], 1)
            punct = s["punct_lines"] / lines
            rules = [
                ("empty", s["lines"] == 0),
                ("line_punct_ratio", (punct < self.line_punct_thr) & ~((punct == 0) & self.line_punct_exclude_zero)),
                ("short_line_ratio", s["short_lines"] / lines > self.short_line_thr),
                ("char_dup_ratio", s["dup_line_chars"] / np.maximum(s["chars"], 1) > self.char_duplicates_ratio),
            ]
            # Words only decide the last rule: count them only for the documents that pass the
            # others, as datatrove's early exit does.
            survivors = ~np.logical_or.reduce([failed for _, failed in rules])
            words = self.word_counts(text, survivors)
            rules.append(("list_ratio", survivors & (s["newlines"] / np.maximum(words, 1) > self.new_line_ratio)))
        reasons = np.full(batch.num_rows, "", dtype=object)
        for reason, failed in reversed(rules):  # the first failing rule wins
            reasons[failed] = reason
        return reasons == "", reasons
