"""``sweep_vocab_sizes``: the vocabulary-size trade-off, measured.

One model (``bpe``, ``wordpiece`` or ``unigram``) is trained at each vocabulary size on the
training corpus with the public trainers (:func:`tokpipe.train_bpe`,
:func:`tokpipe.train_wordpiece`, :func:`tokpipe.train_unigram`, their defaults), and every
trained tokenizer is evaluated on the held-out corpus by :func:`evaluate_tokenizers` (per
language by default). Compression (characters per token) rises with the vocabulary and flattens
where a larger vocabulary stops paying; the fallback rate falls.

A size the trainer cannot reach is reported, not fatal: a trainer that stops short (a small
corpus has fewer distinct pieces to merge) gives a smaller vocabulary, recorded as
:attr:`SweepPoint.vocab_size`; one that refuses the size records its error.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tokpipe.errors import InvalidArgumentError
from tokpipe.tokeval.evaluate import CorpusSpec, Evaluation, evaluate_tokenizers
from tokpipe.tokenizer import Tokenizer

__all__ = ["sweep_vocab_sizes", "Sweep", "SweepPoint", "MODELS", "parse_vocab_sizes", "size_name"]

#: The models a sweep trains.
MODELS = ("bpe", "wordpiece", "unigram")

_SUFFIXES = {"": 1, "k": 1000, "K": 1000, "m": 1_000_000, "M": 1_000_000}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([kKmM]?)")


def parse_vocab_sizes(text: str) -> list[int]:
    """``"8k,16k,32k,64k"`` as ``[8000, 16000, 32000, 64000]`` (``k``: thousands, ``M``:
    millions; plain numbers as they are); sorted, duplicates removed. Raises
    :class:`~tokpipe.InvalidArgumentError` naming the bad entry."""
    sizes = set()
    for part in text.split(","):
        item = part.strip()
        match = _SIZE.fullmatch(item)
        if match is None:
            raise InvalidArgumentError(f"vocabulary size {item!r} is not a number like 8000 or 8k")
        value = float(match.group(1)) * _SUFFIXES[match.group(2)]
        if value != int(value) or value < 1:
            raise InvalidArgumentError(f"vocabulary size {item!r} is not a positive whole number")
        sizes.add(int(value))
    return sorted(sizes)


def size_name(size: int) -> str:
    """``8000`` as ``8k``, ``32768`` as ``32768``: the name of a sweep's tokenizer."""
    return f"{size // 1000}k" if size % 1000 == 0 and size >= 1000 else str(size)


@dataclass(frozen=True)
class SweepPoint:
    """One vocabulary size of a sweep."""

    #: The size asked for.
    asked: int
    #: The size trained (smaller than asked when the corpus ran out of pieces); None if the
    #: training failed.
    vocab_size: int | None
    #: The trainer's error when it refused the size.
    error: str | None
    train_seconds: float
    #: The tokenizer's name in :attr:`Sweep.evaluation` (``8k``); None if it failed.
    name: str | None

    @property
    def note(self) -> str:
        """Why the size trained is not the size asked, in words ("" when it is)."""
        if self.error:
            return f"not trained: {self.error}"
        if self.vocab_size is None or self.vocab_size == self.asked:
            return ""
        if self.vocab_size < self.asked:
            return f"trained {self.vocab_size:,}, smaller than asked: the corpus ran out of pieces"
        return f"trained {self.vocab_size:,}, larger than asked: the alphabet and special tokens alone need more"


@dataclass(frozen=True)
class Sweep:
    """The result of :func:`sweep_vocab_sizes`."""

    model: str
    points: list[SweepPoint]
    #: The trained tokenizers on the held-out corpus, named by their asked size; None when no
    #: size could be trained.
    evaluation: Evaluation | None
    #: The trained tokenizers by name (``8k``), to save the one that pays best.
    tokenizers: dict[str, Tokenizer] = field(default_factory=dict, repr=False, compare=False)


def sweep_vocab_sizes(model: Literal["bpe", "wordpiece", "unigram"], vocab_sizes: Sequence[int], train: CorpusSpec,
                      held_out: CorpusSpec, *, by: Literal["language", "source", "script"] | None = "language",
                      text_field: str = "text", language_field: str = "language", split: str = "none",
                      max_documents: int | None = None, max_bytes: int | None = None, strict: bool = False,
                      num_threads: int | None = None,
                      on_trained: Callable[[SweepPoint], None] | None = None) -> Sweep:
    """Train ``model`` at each of ``vocab_sizes`` on ``train`` and evaluate every tokenizer
    on ``held_out`` (see the module's notes). ``by``, ``text_field``, ``language_field``,
    ``split`` (of the held-out ``.txt`` files; the trainers read theirs line by line),
    ``max_documents``, ``max_bytes``, ``strict`` (the trainers' too) and ``num_threads`` are
    :func:`evaluate_tokenizers`';
    ``on_trained`` is called after each size (progress)."""
    from tokpipe import train as trainers
    from tokpipe.pipeline.readers import ReaderOptions, plan_tasks
    from tokpipe.pipeline.tokenize.run import expand_inputs

    if model not in MODELS:
        raise InvalidArgumentError(f"model must be one of {', '.join(MODELS)}, not {model!r}")
    if not vocab_sizes:
        raise InvalidArgumentError("no vocabulary size to train")
    trainer = {"bpe": trainers.train_bpe, "wordpiece": trainers.train_wordpiece,
               "unigram": trainers.train_unigram}[model]
    inputs = [train] if isinstance(train, (str, os.PathLike)) else list(train)
    files = expand_inputs([os.fspath(i) for i in inputs])
    # A held-out corpus that does not exist fails now, not after the training.
    plan_tasks(expand_inputs([os.fspath(i) for i in ([held_out] if isinstance(held_out, (str, os.PathLike))
                                                      else list(held_out))]),
               ReaderOptions(text_field=text_field, split=split, strict=strict))
    points: list[SweepPoint] = []
    trained: dict[str, Tokenizer] = {}
    for size in sorted(set(vocab_sizes)):
        started = time.perf_counter()
        try:
            tokenizer = trainer(files, vocab_size=size, show_progress=False, text_field=text_field, strict=strict)
        except InvalidArgumentError as error:  # a size the corpus cannot give (Unigram says so)
            point = SweepPoint(size, None, " ".join(str(error).split()), time.perf_counter() - started, None)
        else:
            name = size_name(size)
            trained[name] = tokenizer
            point = SweepPoint(size, tokenizer.vocab_size, None, time.perf_counter() - started, name)
        points.append(point)
        if on_trained is not None:
            on_trained(point)
    evaluation = evaluate_tokenizers(trained, held_out, by=by, text_field=text_field, language_field=language_field,
                                     split=split, max_documents=max_documents, max_bytes=max_bytes, strict=strict,
                                     num_threads=num_threads) if trained else None
    return Sweep(model=model, points=points, evaluation=evaluation, tokenizers=trained)
