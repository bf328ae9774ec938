"""``sentence_dedup``: remove every span of ``n_sentences`` consecutive sentences already seen
earlier in the corpus, as datatrove's ``SentenceDedup`` does (C4's three-sentence-span rule).

**Sentences** are cut as datatrove cuts them, by spaCy's rule-based sentencizer: with
``language: en`` (the default) over a port of ``spacy.blank("en")``'s tokens (``Mr.``,
``e.g.`` and ``3.5`` do not end a sentence, a closing quote after ``.`` stays with it); with
``zh`` or ``ja`` over one token per character (ASCII words whole), so ``。！？`` end a
sentence although no space follows them.

**Spans.** Each sentence is normalised by datatrove's ``simplify_text`` (lowercase, digit runs
made ``0``, punctuation made spaces, whitespace collapsed, accents removed); every run of
``n_sentences`` of them is hashed. In corpus order, (task, row, sentence), the first occurrence
of a span is kept; a later one, in the same document or another, removes all its sentences
(overlapping spans merge). A document with fewer sentences than ``n_sentences`` has no span and
is left alone. The text that remains is datatrove's: the kept sentences, each with the text
before it, the start stripped of whitespace.

**Short documents.** A document that lost a span is dropped, with reason
``duplicate_sentences``, when what is left is empty, has fewer than ``min_doc_words`` words
(spaCy's tokens, punctuation included; 0 turns the check off) or fewer than
``min_num_sentences`` sentences (0 turns it off): datatrove's defaults, 50 and 3.

**Stats** count ``sentences``, ``spans_removed``, ``sentences_removed`` and ``bytes_removed``
(UTF-8 bytes of the removed sentences with the text before each).

A global stage: ``keys`` splits and hashes in Rust in the parallel phase (12 bytes a sentence);
``decide`` walks the keys once, in Rust, with a set of the span hashes seen (8 bytes a distinct
span), then reads back the text of the documents that lost a span to apply the short-document
rule, so that its counts are final.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.errors import ConfigError, StateError
from tokpipe.pipeline.base import DecideContext, Decision, GlobalStage, register
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.kernels import sentence_decide, sentence_filter, sentence_keys
# Keys and flag columns are laid out as paragraph_dedup's, a sentence in place of a line.
from tokpipe.pipeline.stages.paragraphs import any_flag, flatten_unit_keys

__all__ = ["SentenceDedup", "DUPLICATE_SENTENCES"]

#: The reason of a dropped document.
DUPLICATE_SENTENCES = "duplicate_sentences"

_DROP = "_sentence_drop"
_DROPPED = "_sentence_dropped"
_SENTENCE_KEY = 12
#: Documents whose text ``decide`` reads back at a time.
_READ_BACK = 4096
_SPLITTERS = {"en": "en", "zh": "cjk", "ja": "cjk"}


def _flags(drop: np.ndarray, counts: np.ndarray) -> pa.Array:
    """A binary column of one flag byte per sentence, ``counts[i]`` bytes for row i."""
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int32)
    return pa.BinaryArray.from_buffers(pa.binary(), len(counts),
                                       [None, pa.py_buffer(offsets), pa.py_buffer(drop.tobytes())])


@register
class SentenceDedup(GlobalStage):
    """Removes spans of ``n_sentences`` sentences seen earlier in the corpus (datatrove's
    ``SentenceDedup``); drops documents left too short (reason ``duplicate_sentences``)."""

    name = "sentence_dedup"

    def __init__(self, n_sentences: int = 3, min_doc_words: int = 50, min_num_sentences: int = 3,
                 language: Literal["en", "zh", "ja"] = "en") -> None:
        for option, value, least in (("n_sentences", n_sentences, 1), ("min_doc_words", min_doc_words, 0),
                                     ("min_num_sentences", min_num_sentences, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                kind = "a positive integer" if least else "a non-negative integer"
                raise ConfigError(f"sentence_dedup: {option} must be {kind}, not {value!r}")
        if language not in _SPLITTERS:
            raise ConfigError(f"sentence_dedup: language must be en, zh or ja, not {language!r}")
        self.n_sentences = n_sentences
        self.min_doc_words = min_doc_words
        self.min_num_sentences = min_num_sentences
        self.language = language
        self._splitter = _SPLITTERS[language]

    def key_type(self) -> pa.DataType:
        return pa.large_binary()

    def keys(self, batch: pa.RecordBatch) -> pa.Array:
        return sentence_keys(batch.column(TEXT), self.n_sentences, self._splitter)

    def decide(self, keys: Sequence[pa.Array], context: DecideContext | None = None) -> list[Decision]:
        flat, counts, per_doc = flatten_unit_keys(keys, _SENTENCE_KEY)
        verdict = sentence_decide(flat, per_doc, self.n_sentences)
        dropped = self._short_documents(verdict.drop, per_doc, verdict.touched, context)
        extra = self.stats.extra
        extra["sentences"] += verdict.sentences
        extra["spans_removed"] += verdict.spans_removed
        extra["sentences_removed"] += verdict.sentences_removed
        extra["bytes_removed"] += verdict.removed_bytes
        self.stats.dropped[DUPLICATE_SENTENCES] += int(dropped.sum())
        decisions, doc, sentence = [], 0, 0
        for task_counts in counts:
            n = len(task_counts)
            total = int(task_counts.sum())
            columns = {_DROP: _flags(verdict.drop[sentence:sentence + total], task_counts),
                       _DROPPED: pa.array(dropped[doc:doc + n], type=pa.bool_())}
            decisions.append(Decision(np.arange(doc, doc + n), columns))
            doc += n
            sentence += total
        return decisions

    def _short_documents(self, drop: np.ndarray, per_doc: np.ndarray, touched: np.ndarray,
                         context: DecideContext | None) -> np.ndarray:
        """Per document, whether it lost a span and what is left is too short: the text of
        the documents that lost one is read back, ``_READ_BACK`` at a time."""
        dropped = np.zeros(len(per_doc), dtype=bool)
        positions = np.flatnonzero(touched)
        if not len(positions):
            return dropped
        if context is None or context.column is None:
            raise StateError("sentence_dedup: decide needs the documents' text (a DecideContext with column, "
                             "e.g. DecideContext.of_batches)")
        starts = np.concatenate([[0], np.cumsum(per_doc, dtype=np.int64)])
        for lo in range(0, len(positions), _READ_BACK):
            chunk = positions[lo:lo + _READ_BACK]
            text = context.column(TEXT, chunk)
            flags = np.concatenate([drop[starts[p]:starts[p + 1]] for p in chunk])
            _, keep = sentence_filter(text, _flags(flags, per_doc[chunk]), self._splitter, self.min_doc_words,
                                      self.min_num_sentences)
            dropped[chunk] = ~keep
        return dropped

    def revise(self, batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> tuple[pa.RecordBatch, np.ndarray | None]:
        flags, dropped = columns[_DROP], columns[_DROPPED]
        text = batch.column(TEXT)
        if any_flag(flags):
            revised, _ = sentence_filter(text, flags, self._splitter, 0, 0)
            # A dropped document goes to rejected/ with its original text.
            revised = pc.if_else(dropped, text, revised)
            batch = batch.set_column(batch.schema.get_field_index(TEXT), TEXT, revised)
        reasons = np.where(dropped.to_numpy(zero_copy_only=False), DUPLICATE_SENTENCES, "")
        return batch, reasons

