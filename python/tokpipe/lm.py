"""n-gram language models, KenLM-compatible: ``train_lm`` estimates one (interpolated modified
Kneser-Ney, as KenLM's ``lmplz``) and writes it as an ARPA file; ``LanguageModel`` loads any
ARPA file and scores text exactly as the ``kenlm`` module does, in Rust.

What a sentence is: one line of text, scored as ``<s> line </s>``, as in KenLM. Its words are
either the line's whitespace-separated words (``tokenizer=None``; KenLM's spaces: space, tab,
CR, VT, FF), which is what CCNet and KenLM users feed after their own tokenization, or the
tokens of a tokenizer (any file ``Tokenizer.from_file`` reads) written as its vocabulary
writes them (byte-level: ``Ġthe``), so ``kenlm.Model.score(" ".join(tokens))`` gives the
same score. A document is scored as CCNet
scores it: cut at every ``\\n``, each line a sentence; its perplexity is
``10 ** (-sum(log10 p) / n)`` with ``n`` the tokens plus one ``</s>`` per line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Union

import numpy as np
import pyarrow as pa

from tokpipe import _core, storage
from tokpipe.tokenizer import Tokenizer
from tokpipe.train import CorpusReport, StrPath, check_corpus_arguments, feed_corpus

__all__ = ["LanguageModel", "TrainedLM", "train_lm", "perplexity_of"]

TokenizerLike = Union[Tokenizer, str, "os.PathLike[str]", None]


def _core_tokenizer(tokenizer: TokenizerLike) -> _core.Tokenizer | None:
    if tokenizer is None:
        return None
    if isinstance(tokenizer, Tokenizer):
        return tokenizer._core
    return Tokenizer.from_file(tokenizer)._core


def perplexity_of(log10_prob: float | np.ndarray, length: int | np.ndarray) -> float | np.ndarray:
    """``10 ** (-log10_prob / length)``: CCNet's ``pp``."""
    return 10.0 ** (-np.asarray(log10_prob, dtype=np.float64) / np.asarray(length, dtype=np.float64))


class LanguageModel:
    """A backoff n-gram model loaded from an ARPA file (any KenLM can load), held in probing
    hash tables like KenLM's default model, and scored by KenLM's rule: the longest matching
    n-gram, plus the backoffs of the longer contexts it did not match; unknown words are
    ``<unk>``."""

    __slots__ = ("_core",)

    def __init__(self, core: _core.NgramModel) -> None:
        self._core = core

    @classmethod
    def load(cls, path: StrPath, tokenizer: TokenizerLike = None) -> LanguageModel:
        """Loads an ARPA file (a path, or a URL: fetched once into tokpipe's cache, see
        ``tokpipe.storage.local_copy``); with ``tokenizer`` (a ``Tokenizer`` or a path or URL
        ``Tokenizer.from_file`` reads) lines are scored as its tokens, else as whitespace-separated words."""
        name = os.fspath(path)
        if not storage.is_remote(name):
            return cls(_core.NgramModel.load_arpa(name, _core_tokenizer(tokenizer)))
        local = os.fspath(storage.local_copy(name))
        core_tokenizer = _core_tokenizer(tokenizer)
        with storage.naming_urls({local: name}):
            return cls(_core.NgramModel.load_arpa(local, core_tokenizer))

    def with_tokenizer(self, tokenizer: TokenizerLike) -> LanguageModel:
        """The same model (shared, not copied) scoring lines with another tokenizer."""
        return LanguageModel(self._core.with_tokenizer(_core_tokenizer(tokenizer)))

    @property
    def order(self) -> int:
        return self._core.order

    @property
    def vocab_size(self) -> int:
        """Words, ``<unk>`` included."""
        return self._core.vocab_size

    @property
    def counts(self) -> list[int]:
        """The ARPA header's n-gram counts, from unigrams up."""
        return self._core.counts

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        """``kenlm.Model.score``: log10 P of whitespace-separated words (never tokenized),
        after ``<s>`` when ``bos``, followed by ``</s>`` when ``eos``."""
        return self._core.score(sentence, bos, eos)

    def score_line(self, line: str, normalize: bool = False) -> tuple[float, int]:
        """(log10 P(``<s>`` line ``</s>``), tokens), the line tokenized as this model's words
        (after CCNet's normalisation when ``normalize``)."""
        return self._core.score_line(line, normalize)

    def document_scores(self, texts: pa.Array | pa.ChunkedArray | Sequence[str],
                        normalize: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Per document: summed log10 P over its lines (float64) and its length, tokens plus
        one ``</s>`` per line (uint64); in Rust on all cores."""
        from tokpipe.pipeline.kernels import arrow_strings

        if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
            texts = pa.array(list(texts), type=pa.string())
        strings, _, _ = arrow_strings(texts)
        scores, lengths = self._core.document_scores(strings, normalize)
        return np.frombuffer(scores, dtype=np.float64), np.frombuffer(lengths, dtype=np.uint64)

    def perplexity(self, text: str, normalize: bool = False) -> float:
        """A document's perplexity as CCNet computes it (lines cut at ``\\n``)."""
        scores, lengths = self.document_scores([text], normalize)
        return float(perplexity_of(scores[0], lengths[0]))


class TrainedLM:
    """A model ``train_lm`` estimated: save it as ARPA, or use it at once."""

    __slots__ = ("_core",)

    def __init__(self, core: _core.TrainedLm) -> None:
        self._core = core

    def save(self, path: StrPath) -> None:
        """Writes the ARPA file (KenLM's ``lmplz`` layout); to a URL, written locally, then
        uploaded whole."""
        name = os.fspath(path)
        if not storage.is_remote(name):
            self._core.write_arpa(name)
            return
        from tokpipe.pipeline import fs

        with fs.atomic(storage.location(name)) as tmp:
            self._core.write_arpa(os.fspath(tmp))

    def arpa(self) -> bytes:
        return self._core.arpa()

    def load(self, tokenizer: TokenizerLike = None) -> LanguageModel:
        """The model as a ``LanguageModel`` (through its ARPA text, in memory)."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model.arpa"
            self.save(path)
            return LanguageModel.load(path, tokenizer)

    @property
    def order(self) -> int:
        return self._core.order

    @property
    def tokens(self) -> int:
        """Words seen in training, sentence markers not counted."""
        return self._core.tokens

    @property
    def sentences(self) -> int:
        return self._core.sentences

    @property
    def counted(self) -> list[int]:
        """Distinct n-grams per order before pruning (unigrams include ``<unk>``, ``<s>``)."""
        return self._core.counted

    @property
    def kept(self) -> list[int]:
        """n-grams per order in the model (after pruning)."""
        return self._core.kept

    @property
    def discounts(self) -> list[tuple[float, float, float]]:
        """Modified Kneser-Ney discounts (D1, D2, D3+) per order."""
        return self._core.discounts

    @property
    def count_of_counts(self) -> list[tuple[int, int, int, int]]:
        """Per order, how many n-grams have adjusted count 1, 2, 3, 4."""
        return self._core.count_of_counts


def train_lm(
    files: StrPath | Sequence[StrPath] | None = None,
    *,
    texts: Iterable[str] | None = None,
    order: int = 5,
    tokenizer: TokenizerLike = None,
    prune: Sequence[int] = (),
    normalize: bool = False,
    discount_fallback: tuple[float, float, float] | None = None,
    show_progress: bool = True,
    strict: bool = False,
    text_field: str = "text",
    report: list[CorpusReport] | None = None,
) -> TrainedLM:
    """Train an interpolated modified Kneser-Ney n-gram model of ``order`` on ``files``
    (files or folders: .txt, .jsonl[.gz|.zst], .parquet, read as ``train_bpe`` reads them) or
    on ``texts`` (an iterable of documents).

    Every line of a document is a sentence (a final line break does not start another). Words
    are whitespace-separated, or the tokens of ``tokenizer`` (a ``Tokenizer`` or a path
    ``Tokenizer.from_file`` reads). ``prune`` is ``lmplz --prune``: count thresholds per order from unigrams (the
    first must be 0, they must not decrease, the last repeats); an n-gram seen at most that
    many times is dropped. ``normalize`` applies CCNet's line normalisation first (score with
    the same setting). ``discount_fallback`` (``lmplz --discount_fallback``, e.g.
    ``(0.5, 1.0, 1.5)``) is used for an order whose discounts cannot be estimated; without it
    that is a ``CorpusError``.
    """
    check_corpus_arguments("train_lm", files, texts)
    trainer = _core.LmTrainer(order, [int(p) for p in prune], normalize,
                              tuple(discount_fallback) if discount_fallback is not None else None,
                              show_progress, _core_tokenizer(tokenizer))
    feed_corpus(trainer, files, texts, strict=strict, text_field=text_field, report=report)
    return TrainedLM(trainer.train())
