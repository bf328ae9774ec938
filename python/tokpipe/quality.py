"""Classifier-based quality filtering: train a fastText text-quality classifier on reference
("good") text against other ("bad") text, save it as a self-contained versioned file, load it
and score documents with it.

The choice: training is fastText's (``fasttext-wheel``, C++; an optional extra, ``pip install
'tokpipe[fasttext]'``, imported only when a model is trained or inspected, never when tokpipe is
imported). Scoring is tokpipe's own Rust (``tokpipe_core::fasttext``): it reads fastText's
``model.bin`` and predicts as fastText does (the same probabilities to the last bit on every
document of the test corpora), with the text preparation in the same pass, on all cores with
the GIL released and no Python string per document. Measured side by side with fastText's
``predict`` on the same documents it is 2.5-2.8x faster per CPU second
(``benches/python/bench_quality_classifier.py``, ``benches/RESULTS.md``), and scoring no
longer needs fastText installed.

Text preparation (the same in training and scoring, see ``prepare`` and
``tokpipe_core::text::fasttext_prep``, one pass over each document in Rust): lowercase
(Unicode's one-to-one mapping, as Arrow's ``utf8_lower``); a line that repeats an earlier
line of its document (after lowercasing, ends stripped) replaced by ``__repeated_line__`` (a
bag of n-grams is blind to repetition, this token is not); every Han, Hiragana, Katakana and
Hangul character made a word of its own by spaces around it, since Chinese and Japanese have
no spaces between words and fastText's words are space-separated, so for them the word
n-grams (``word_ngrams``, 2 by default) *are* character n-grams; every other non-word
character (not a letter, mark, number, ``_`` or ASCII whitespace: punctuation, the pieces of
a URL) made a word too; lines stripped and joined by spaces (fastText reads one example a
line; it skips runs of spaces, so they are left as they are). ``char_ngrams`` (fastText's
``minn``/``maxn``, off by default) adds character n-grams inside words, for misspellings and
rare words; on small training sets it made no difference in the tests and it costs several
times the scoring time.

Training settings: fastText divides each update by the number of features of the document,
so long documents learn slowly; the defaults (10 epochs, learning rate 1.0) are higher than
fastText's (5, 0.1) for that reason. Only the first ``max_chars`` characters of a
document are used (default 10,000): plenty to judge quality, and it bounds the cost.

The model file is a zip: ``meta.json`` (``format``: ``tokpipe-quality``, ``version``, the
labels, the preparation settings, the training settings and held-out metrics) and
``model.bin`` (fastText's own binary). ``load_quality_classifier`` refuses another format or
a newer version.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import ConfigError, InvalidArgumentError

__all__ = ["QualityClassifier", "train_quality_classifier", "load_quality_classifier", "prepare", "roc_auc",
           "FORMAT", "VERSION", "POSITIVE", "NEGATIVE"]

FORMAT = "tokpipe-quality"
#: Bumped when the file layout or ``prepare`` changes; a newer file is refused.
VERSION = 1
POSITIVE = "__label__hq"
NEGATIVE = "__label__lq"
DEFAULT_MAX_CHARS = 10_000
_INSTALL = "pip install 'tokpipe[fasttext]'"

def _fasttext() -> Any:
    try:
        import fasttext
    except ImportError:
        raise InvalidArgumentError(f"quality classifier: fastText is not installed: {_INSTALL}") from None
    return fasttext


def _column(texts: pa.Array | pa.ChunkedArray | Sequence[str | None]) -> pa.Array | pa.ChunkedArray:
    return texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), pa.string())


def prepare(texts: pa.Array | pa.ChunkedArray | Sequence[str | None], max_chars: int | None = DEFAULT_MAX_CHARS) -> list[str]:
    """The one-line form of each text that the model is trained on and scores (see the module
    docstring; null texts read as empty), computed in Rust on all cores."""
    from tokpipe.pipeline.kernels import fasttext_prepare

    return fasttext_prepare(_column(texts), max_chars).to_pylist()


#: What a line that repeats an earlier line of its document (after lowercasing, ends
#: stripped) is replaced by: a bag of n-grams cannot see repetition, this token can.
REPEATED_LINE = "__repeated_line__"


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (the Mann-Whitney U statistic over average ranks, so ties
    count half), for scores of positive (``labels`` True) and negative examples."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    # Average rank of each run of equal scores.
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    average = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclass
class Metrics:
    """Held-out metrics at the 0.5 threshold (precision and recall of the positive label)."""

    documents: int
    positives: int
    precision: float
    recall: float
    auc: float

    def as_dict(self) -> dict[str, Any]:
        return {"documents": self.documents, "positives": self.positives, "precision": self.precision,
                "recall": self.recall, "auc": self.auc}


def metrics(scores: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> Metrics:
    labels = np.asarray(labels, dtype=bool)
    predicted = np.asarray(scores) >= threshold
    tp = int((predicted & labels).sum())
    precision = tp / int(predicted.sum()) if predicted.any() else float("nan")
    recall = tp / int(labels.sum()) if labels.any() else float("nan")
    return Metrics(len(labels), int(labels.sum()), precision, recall, roc_auc(scores, labels))


class QualityClassifier:
    """A loaded quality model: ``score(texts)`` gives the probability of the positive label.

    ``blob`` is fastText's ``model.bin``, scored by tokpipe's Rust reading of it; ``model``
    (fastText's own object, for ``contributions``) is loaded from the same bytes when first
    asked for, which needs fastText installed. ``source``, the model file the bytes came
    from, is where they are read again when needed, rather than held twice in memory."""

    def __init__(self, blob: bytes, meta: dict[str, Any], name: str = "model.bin", model: Any = None,
                 source: Path | None = None) -> None:
        from tokpipe import _core
        from tokpipe.errors import FormatError

        self._blob = None if source is not None else blob
        self._source = source
        self.meta = meta
        self.max_chars: int | None = meta.get("max_chars", DEFAULT_MAX_CHARS)
        try:
            self._scorer = _core.FastTextModel(blob, name)
        except FormatError as e:
            raise ConfigError(str(e)) from None
        _check_labels(self._scorer.labels)
        self._positive = self._scorer.labels.index(POSITIVE)
        self._model = model

    @property
    def blob(self) -> bytes:
        """fastText's ``model.bin`` of this model."""
        if self._blob is not None:
            return self._blob
        assert self._source is not None
        with zipfile.ZipFile(self._source) as z:
            return z.read("model.bin")

    @property
    def model(self) -> Any:
        """fastText's own model object (loaded on first use: needs fastText)."""
        if self._model is None:
            fasttext = _fasttext()
            # fasttext-wheel prints a warning on every load_model (about its return type): hushed.
            fasttext.FastText.eprint = lambda *args, **kwargs: None
            with tempfile.TemporaryDirectory(prefix="tokpipe-quality-") as tmp:
                bin_path = Path(tmp) / "model.bin"
                bin_path.write_bytes(self.blob)
                self._model = fasttext.load_model(str(bin_path))
        return self._model

    def _scores(self, texts: pa.Array | pa.ChunkedArray | Sequence[str | None], prepared: bool) -> np.ndarray:
        from tokpipe.pipeline.kernels import fasttext_scores

        return fasttext_scores(self._scorer, _column(texts), self._positive, not prepared, self.max_chars)

    def score_prepared(self, lines: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
        """Scores of lines already ``prepare``d."""
        return self._scores(lines, prepared=True)

    def score(self, texts: pa.Array | pa.ChunkedArray | Sequence[str | None]) -> np.ndarray:
        """The probability of the positive label for each text (null: empty text), in [0, 1]:
        fastText's top-1 prediction, as its ``predict(line, k=1)`` gives it (the top label's
        probability plus fastText's 1e-5, or one minus that when the top label is the
        negative one), computed in Rust on all cores with the GIL released."""
        return self._scores(texts, prepared=False)

    def contributions(self, text: str, top: int = 10) -> list[tuple[str, float]]:
        """The features (words and character n-grams) of ``text`` that push its score up or
        down most: each feature's input vector dotted with the difference of the positive and
        negative output vectors (the logit of the positive label is the mean of those over
        the features, so a feature's share of it is its dot product over their count)."""
        line = prepare([text], self.max_chars)[0]
        labels = list(self.model.get_labels())
        output = self.model.get_output_matrix()
        direction = output[labels.index(POSITIVE)] - output[labels.index(NEGATIVE)]
        words = line.split()
        features: dict[str, float] = {}
        inputs = self.model.get_input_matrix()
        for word in words:
            subwords, ids = self.model.get_subwords(word)
            # Summed: a word seen three times weighs three times in the mean.
            for sub, idx in zip(subwords, ids):
                features[sub] = features.get(sub, 0.0) + float(inputs[int(idx)] @ direction)
        # Word n-grams (wordNgrams > 1) are hashed buckets the model cannot name back: only
        # words and their character n-grams are listed.
        count = max(1, sum(len(self.model.get_subwords(w)[0]) for w in words))
        ranked = sorted(features.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:top]
        return [(name, value / count) for name, value in ranked]


_CACHE: dict[tuple[str, int, int], QualityClassifier] = {}


def load_quality_classifier(path: str | os.PathLike[str]) -> QualityClassifier:
    """Load a model file written by ``train_quality_classifier`` (cached per process by path,
    size and modification time); a URL is fetched once into tokpipe's cache
    (``tokpipe.storage.local_copy``, keyed by URL and ETag). Raises ``ConfigError`` for a file
    that is not one, or of a newer version than this tokpipe reads."""
    name = os.fspath(path)
    if storage.is_remote(name):
        shown = storage.redact(name)
        path = storage.local_copy(name)
    else:
        path = Path(path)
        shown = str(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    try:
        with zipfile.ZipFile(path) as z:
            meta = json.loads(z.read("meta.json"))
            blob = z.read("model.bin")
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise ConfigError(f"{shown}: not a tokpipe quality model ({e})") from None
    if meta.get("format") != FORMAT:
        raise ConfigError(f"{shown}: not a tokpipe quality model (format {meta.get('format')!r})")
    version = meta.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise ConfigError(f"{shown}: quality model version {version!r}; this tokpipe reads versions 1 to {VERSION}")
    classifier = QualityClassifier(blob, meta, name=f"{shown} (model.bin)", source=path)
    _CACHE[key] = classifier
    return classifier


@dataclass
class TrainedQuality:
    """What ``train_quality_classifier`` gives: the classifier, its held-out metrics (None
    when nothing was held out) and the counts of documents read."""

    classifier: QualityClassifier
    validation: Metrics | None
    train_documents: int
    positives: int
    negatives: int
    settings: dict[str, Any] = field(default_factory=dict)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the self-contained model file (zip of ``meta.json`` and ``model.bin``); to a
        URL, written locally, then uploaded whole."""
        name = os.fspath(path)
        if storage.is_remote(name):
            from tokpipe.pipeline import fs

            with fs.atomic(storage.location(name)) as tmp:
                self._write(tmp)
            return
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        self._write(partial)
        os.replace(partial, path)

    def _write(self, path: Path) -> None:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr("meta.json", json.dumps(self.classifier.meta, indent=1, sort_keys=True))
            z.writestr("model.bin", self.classifier.blob)


def iter_documents(inputs: Sequence[str | os.PathLike[str]], text_field: str = "text", split: str = "none",
                   strict: bool = False, on_task: Callable[[], None] | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) of every document of ``inputs``, read with the pipeline's readers (any
    format they know: .txt, .jsonl[.gz|.zst], .parquet, .warc.gz)."""
    from tokpipe.pipeline.readers import ReaderOptions
    from tokpipe.pipeline.readers.tasks import plan_tasks, read_task

    options = ReaderOptions(text_field=text_field, split=split, strict=strict)
    for task in plan_tasks(list(inputs), options):
        for batch in read_task(task, options, lambda error: None):
            ids = batch.column("id").to_pylist()
            for doc_id, text in zip(ids, batch.column("text").to_pylist()):
                yield str(doc_id), text or ""
        if on_task is not None:
            on_task()


def _held_out(text: str, seed: int, fraction: float) -> bool:
    """Whether a document goes to the validation split: a hash of the seed and its text,
    so the split does not depend on the order or the number of inputs."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8, key=seed.to_bytes(8, "little"))
    return int.from_bytes(digest.digest(), "little") / 2.0 ** 64 < fraction


def train_quality_classifier(
    positive: Sequence[str | os.PathLike[str]] | None = None,
    negative: Sequence[str | os.PathLike[str]] | None = None,
    *,
    positive_texts: Sequence[str] | None = None,
    negative_texts: Sequence[str] | None = None,
    val_fraction: float = 0.1,
    seed: int = 0,
    epochs: int = 10,
    dim: int = 32,
    lr: float = 1.0,
    word_ngrams: int = 2,
    char_ngrams: tuple[int, int] = (0, 0),
    bucket: int = 1_000_000,
    min_count: int = 1,
    max_chars: int | None = DEFAULT_MAX_CHARS,
    text_field: str = "text",
    split: str = "none",
    threads: int = 1,
    show_progress: bool = False,
) -> TrainedQuality:
    """Train a fastText classifier: documents of ``positive`` files (or ``positive_texts``)
    labelled good, of ``negative`` (or ``negative_texts``) bad. A ``val_fraction`` of each is
    held out by a hash of the seed and the text, and scored after training. ``char_ngrams``
    is fastText's ``(minn, maxn)`` (``(0, 0)``: none); ``threads=1`` (the default) makes
    training reproducible for a seed."""
    if not 0.0 <= val_fraction < 1.0:
        raise InvalidArgumentError(f"val_fraction must be in [0, 1), not {val_fraction}")
    for name, value in (("epochs", epochs), ("dim", dim), ("word_ngrams", word_ngrams), ("threads", threads),
                        ("bucket", bucket), ("min_count", min_count)):
        if value < 1:
            raise InvalidArgumentError(f"{name} must be at least 1, not {value}")
    minn, maxn = char_ngrams
    if minn < 0 or maxn < minn or (minn == 0) != (maxn == 0):
        raise InvalidArgumentError(f"char_ngrams must be (min, max) with 1 <= min <= max, or (0, 0); not {char_ngrams}")
    if seed < 0:
        raise InvalidArgumentError(f"seed must be at least 0, not {seed}")
    if lr <= 0:
        raise InvalidArgumentError(f"lr must be positive, not {lr}")
    if (positive is None) == (positive_texts is None) or (negative is None) == (negative_texts is None):
        raise InvalidArgumentError("give positive (files) or positive_texts, and negative or negative_texts")
    fasttext = _fasttext()

    def texts_of(files: Sequence[Any] | None, texts: Sequence[str] | None, what: str) -> list[str]:
        if texts is not None:
            return list(texts)
        assert files is not None
        if not show_progress:
            return [t for _, t in iter_documents(files, text_field, split)]
        import click

        from tokpipe.pipeline.readers import ReaderOptions
        from tokpipe.pipeline.readers.tasks import plan_tasks

        n = len(plan_tasks(list(files), ReaderOptions(text_field=text_field, split=split)))
        with click.progressbar(length=n, label=f"reading {what}", file=None) as bar:
            return [t for _, t in iter_documents(files, text_field, split, on_task=lambda: bar.update(1))]

    pos = [t for t in texts_of(positive, positive_texts, "positive") if t.strip()]
    neg = [t for t in texts_of(negative, negative_texts, "negative") if t.strip()]
    if not pos or not neg:
        from tokpipe.errors import CorpusError

        raise CorpusError(f"training needs documents of both labels; read {len(pos)} positive and {len(neg)} negative")
    lines_pos = prepare(pos, max_chars)
    lines_neg = prepare(neg, max_chars)
    train_lines: list[str] = []
    val_lines: list[str] = []
    val_labels: list[bool] = []
    for label, texts, lines in ((True, pos, lines_pos), (False, neg, lines_neg)):
        tag = POSITIVE if label else NEGATIVE
        for text, line in zip(texts, lines):
            if val_fraction and _held_out(text, seed, val_fraction):
                val_lines.append(line)
                val_labels.append(label)
            else:
                train_lines.append(f"{tag} {line}")
    if not train_lines:
        raise InvalidArgumentError("every document was held out: lower val_fraction")
    # fastText reads its training set from a file; interleave the labels (a fixed shuffle)
    # so that SGD does not see all of one label, then all of the other.
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train_lines))
    settings = {"epoch": epochs, "dim": dim, "lr": lr, "wordNgrams": word_ngrams, "minn": minn, "maxn": maxn,
                "bucket": bucket, "minCount": min_count, "seed": seed, "thread": threads}
    with tempfile.TemporaryDirectory(prefix="tokpipe-quality-") as tmp:
        train_file = Path(tmp) / "train.txt"
        with open(train_file, "w", encoding="utf-8", errors="surrogatepass") as f:
            for i in order:
                f.write(train_lines[i] + "\n")
        model = fasttext.train_supervised(input=str(train_file), loss="softmax", verbose=2 if show_progress else 0,
                                          **settings)
        # Scored (held-out split, and later) by tokpipe's reading of fastText's own file.
        bin_path = Path(tmp) / "model.bin"
        model.save_model(str(bin_path))
        blob = bin_path.read_bytes()
    meta: dict[str, Any] = {"format": FORMAT, "version": VERSION, "positive": POSITIVE, "negative": NEGATIVE,
                            "max_chars": max_chars, "prepare": "lower, repeated lines marked, CJK and non-word characters as words, newlines as spaces",
                            "training": settings, "train_documents": len(train_lines)}
    classifier = QualityClassifier(blob, meta, model=model)
    validation = None
    if val_lines:
        validation = metrics(classifier.score_prepared(val_lines), np.array(val_labels))
        meta["validation"] = validation.as_dict()
    return TrainedQuality(classifier, validation, len(train_lines), len(pos), len(neg), settings)


def _check_labels(labels: Sequence[str]) -> None:
    if set(labels) != {POSITIVE, NEGATIVE}:
        raise ConfigError(f"quality model labels {sorted(labels)}; expected {POSITIVE} and {NEGATIVE}")
