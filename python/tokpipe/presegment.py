"""Word-level pre-segmentation for Chinese: ``pre_segment="jieba"`` of :func:`tokpipe.train_bpe`
and :func:`tokpipe.train_unigram` (``--pre-segment jieba`` on the CLI).

Chinese is written without spaces. Left alone, a subword trainer learns tokens from runs of
Han characters as it finds them, so a frequent token may cross a word boundary: 今天天气 gives
天天 as often as 天气. With pre-segmentation, jieba cuts every run of Han characters into words
first, and training may then learn a token inside a word or a whole word, never across two.

What it changes, and what it does not:

- **Only where training may learn tokens.** Merges (BPE) and pieces (Unigram) never cross a
  jieba boundary between two Han characters. The text is not changed: no space or marker is
  put in, so the trainer counts the same characters, bytes and sentences as without it.
- **Only Han runs are segmented.** jieba also cuts English, digits and punctuation. Text
  outside a run of Han characters is left to the trainer's own rules, exactly as without the
  option.
- **Nothing at encode time.** The trained tokenizer is an ordinary BPE or Unigram model: its
  ``tokenizer.json`` or ``.model`` loads in HF ``tokenizers``, ``transformers`` and
  ``sentencepiece`` as before, and encodes raw text without jieba.

How each trainer takes the cuts:

- **BPE** counts pre-tokens (the regex of ``pattern``) and merges inside them. Feeding each
  segment as a text of its own is not enough. It works for gpt2 and cl100k, whose letter runs
  are one pre-token wherever they start. It fails for o200k, whose letter rule depends on case:
  in ``通过Tokenization将…一个个的Token``, the whole text's match ``Tokenization将…的`` ends
  before ``Token``, but a segment ``的Token`` starting at a cut is one pre-token. BPE would
  then learn ``的Tensor``-like tokens that encoding never meets. So the Rust trainer takes each
  document whole with its cut offsets (``BpeTrainer.feed_segmented``). It pre-tokenizes the
  document as always, then splits a pre-token at each cut inside it. The pre-tokens are those
  of the raw text, split at the cuts, for any pattern.
- **Unigram** (sentencepiece) treats every line as a sentence with a ``▁`` dummy prefix, so a
  segment fed as a sentence would gain a ``▁`` at every word. Instead the Rust trainer takes
  each document with its cut offsets (``UnigramTrainer.feed_segmented``). It normalizes the
  line as always, then cuts the words it counts at those places, as a space would, without
  adding a ``▁``. Seeds and EM run over those words, so no piece spans a cut.
- **WordPiece** is refused. BERT's pre-tokenizer makes every CJK character a word of its own
  (``handle_chinese_chars``), so training never joins two Han characters anyway. Word-level
  WordPiece would need another pre-tokenizer, and jieba again at encode time. Neither fits a
  BERT ``tokenizer.json``.

jieba runs in Python, one document at a time, on each batch as it is fed, so no corpus is held
in memory. It is the slow part: 0.35 to 0.73 MB/s of Chinese text (73 to 131 k Han characters a
second) on one core of a loaded 2-core machine, and BPE training took 2 to 11 times longer
with it (``benches/RESULTS.md``, "Chinese: character-level vs word-level"). With
``pre_segment``, files are read by :mod:`tokpipe.pipeline.readers` (``.txt`` one document a
line, JSONL, Parquet; local or URLs), and ``.md``, ``.rst``, ``.text`` as plain text;
compressed ``.txt.gz``/``.txt.zst`` are refused. A line that is not valid UTF-8 is set aside
and counted, where the Rust readers would repair it, and blank lines are not counted as
documents.
jieba's default dictionary is used, with any words added by ``jieba.load_userdict`` or
``jieba.add_word`` before training.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable

from tokpipe import storage
from tokpipe.errors import CorpusError, InvalidArgumentError

if TYPE_CHECKING:
    from tokpipe.storage import Location
    from tokpipe.train import CorpusReport

__all__ = ["PRE_SEGMENTERS", "Segmenter", "segmenter", "read_documents"]

#: The values ``pre_segment`` takes (``None`` is off).
PRE_SEGMENTERS = ("jieba",)

_INSTALL = "pip install 'tokpipe[chinese]'"

# Runs of two or more Han characters: CJK Unified Ideographs, Extension A, the compatibility
# ideographs and Extensions B to G. Only inside such a run is jieba's cut kept.
_HAN_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]{2,}")

# Documents segmented and handed to the Rust trainer at a time (as train.py's batches).
_BATCH = 8192

# Plain-text files the trainers read that the pipeline readers do not know by name.
_PLAIN_TEXT = (".md", ".rst", ".text")


class Segmenter:
    """Cuts text into parts whose joins are jieba's word boundaries inside Han runs."""

    def __init__(self, cut: Callable[[str], Iterable[str]]) -> None:
        self._cut = cut

    def parts(self, text: str) -> list[str]:
        """``text`` as consecutive slices, split only between two Han characters where jieba
        ends a word; ``"".join(parts) == text``."""
        parts: list[str] = []
        start = 0
        for run in _HAN_RUN.finditer(text):
            at, end = run.start(), run.end()
            for word in self._cut(run.group()):
                at += len(word)
                if at < end:
                    parts.append(text[start:at])
                    start = at
        parts.append(text[start:])
        return parts

    def feed(self, trainer: Any, documents: Iterable[str], report: CorpusReport) -> None:
        """Segments ``documents`` a batch at a time and feeds them to ``trainer`` (a core BPE or
        Unigram trainer), each as its parts."""
        batch: list[str] = []
        for document in documents:
            batch.append(document)
            if len(batch) >= _BATCH:
                self._feed_batch(trainer, batch, report)
                batch = []
        if batch:
            self._feed_batch(trainer, batch, report)

    def _feed_batch(self, trainer: Any, batch: list[str], report: CorpusReport) -> None:
        trainer.feed_segmented([self.parts(text) for text in batch])
        report.documents += len(batch)


def segmenter(pre_segment: str | None, trainer: str) -> Segmenter | None:
    """The segmenter ``pre_segment`` names, ``None`` for none; checked before any work, so a
    bad value or a missing jieba fails at once (``InvalidArgumentError``)."""
    if pre_segment is None:
        return None
    if pre_segment not in PRE_SEGMENTERS:
        raise InvalidArgumentError(
            f"{trainer}: pre_segment must be one of {', '.join(PRE_SEGMENTERS)} (or None), not {pre_segment!r}")
    try:
        import jieba
    except ImportError:
        raise InvalidArgumentError(f"{trainer}: pre_segment='jieba' needs jieba: {_INSTALL}") from None
    # jieba logs its dictionary loading at INFO on stderr; load it quietly, once.
    logger = jieba.default_logger
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        jieba.initialize()
    finally:
        logger.setLevel(level)
    return Segmenter(jieba.cut)


def read_documents(files: Sequence[Location], *, text_field: str, strict: bool,
                   report: CorpusReport) -> Iterator[str]:
    """The documents of ``files`` (as the trainers collect them), streamed by the pipeline
    readers; read errors are counted in ``report`` (or raise ``CorpusError`` when ``strict``)."""
    import pyarrow.compute as pc

    from tokpipe.pipeline.readers import ReadError, ReaderOptions, Task, format_of, read_task
    from tokpipe.pipeline.readers.text import read_text

    options = ReaderOptions(text_field=text_field, split="lines", strict=strict, extra_fields=False)

    def on_error(error: ReadError) -> None:
        if error.reason == "empty_file":
            report.empty_files += 1
            return
        report.set_aside[error.reason] = report.set_aside.get(error.reason, 0) + 1
        if len(report.examples) < 20:
            report.examples.append((error.path, _line_of(error.location), f"{error.reason}: {error.detail}"))

    for index, path in enumerate(files):
        name = str(path)
        kind = format_of(name)
        task = Task(index=index, path=name)
        if kind in ("text", "jsonl", "parquet"):
            batches = read_task(task, options, on_error)
        elif name.lower().endswith(_PLAIN_TEXT):
            batches = read_text(task, options, on_error)
        else:
            shown = storage.redact(name) if storage.is_url(name) else name
            raise CorpusError(f"{shown}: pre_segment reads .txt, .md, .rst, .text, JSONL and Parquet files, "
                              "not this one (decompress it, or use JSONL)")
        report.files += 1
        for batch in batches:
            column = batch.column(1)
            report.bytes += pc.sum(pc.binary_length(column)).as_py() or 0
            yield from column.to_pylist()


def _line_of(location: str) -> int:
    """The number in ``"line N"``/``"record N"``/``"row N"``, 0 for a whole file."""
    number = location.rpartition(" ")[2]
    return int(number) if number.isdigit() else 0
