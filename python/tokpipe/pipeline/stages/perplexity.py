"""``perplexity``: CCNet's language-model perplexity, its head/middle/tail buckets, and an
optional perplexity ceiling.

Each document is scored as CCNet scores it (``cc_net/perplexity.py``): cut at every ``\\n``
(empty lines included), each line optionally normalised as CCNet normalises
(``normalize: true``: strip, lowercase, strip accents, digits to 0, Unicode punctuation to
ASCII, control characters dropped), tokenized (whitespace words, or a tokenizer's tokens:
any file ``Tokenizer.from_file`` reads) and scored as ``<s> line </s>`` by the n-gram model,
exactly as the ``kenlm`` module scores; the document's perplexity is ``10 ** (-sum log10 p / n)``, ``n`` the tokens plus one
``</s>`` per line. Use the tokenizer and normalisation the model was trained with.

The scoring runs in Rust over the Arrow text buffers on all cores. The model is loaded once
per process (stages are built per task) and shared. ``model``, ``tokenizer`` and ``sample``
may be URLs (``s3://...``): they are fetched once into tokpipe's cache (``storage.local_copy``,
keyed by URL and ETag) when the stage is built, and read from there.

Buckets (column ``bucket``): ``head`` up to the first cutoff, ``middle`` up to the second,
``tail`` above, as CCNet assigns them (its cutoffs are the 30th and 60th percentiles of a
language's perplexities). The cutoffs are ``cutoffs: [a, b]``, or are computed once from
``sample`` -- a file of documents (.jsonl/.json[.gz|.zst] with a ``text`` field, .parquet, or
.txt with one document per line) -- as the ``percentiles`` of the perplexities of its first
``sample_size`` documents. They are never computed from the documents flowing through the
stage: each worker sees other documents, so per-worker cutoffs would depend on the number of
workers; a fixed sample gives every worker, every run, the same cutoffs. With neither, there
is no ``bucket`` column.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import InvalidArgumentError
from tokpipe.lm import LanguageModel, perplexity_of
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.readers.lines import open_decompressed

__all__ = ["Perplexity", "PERPLEXITY", "BUCKET", "load_cutoffs_sample"]

#: Columns the stage adds.
PERPLEXITY = "perplexity"
BUCKET = "bucket"

_BUCKETS = np.array(["head", "middle", "tail"], dtype=object)

# Models and sample cutoffs, per process: stages are built for every task, and loading a
# large ARPA file takes seconds. Keyed by the files' identity (path, size, mtime).
_CACHE: dict[tuple[Any, ...], Any] = {}
_CACHE_LOCK = threading.Lock()


def _file_key(path: str | None) -> tuple[Any, ...] | None:
    if path is None:
        return None
    if storage.is_remote(path):
        return (path, *storage.version(path))
    st = os.stat(path)
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns)


def _shown(path: str) -> str:
    return storage.redact(path) if storage.is_remote(path) else path


def _is_file(path: str) -> bool:
    """Whether the file or object exists (a tokenizer is checked, not fetched: GPT-2's pair
    is two files, which ``Tokenizer.from_file`` fetches together)."""
    if not storage.is_remote(path):
        return Path(path).is_file()
    try:
        storage.version(path)
    except FileNotFoundError:
        return False
    return True


def _cached(key: tuple[Any, ...], make: Any) -> Any:
    with _CACHE_LOCK:
        if key not in _CACHE:
            # One model at a time: a pipeline rarely holds two, and models are large.
            for old in [k for k in _CACHE if k[0] == key[0]]:
                del _CACHE[old]
            _CACHE[key] = make()
        return _CACHE[key]


def load_cutoffs_sample(path: str, limit: int) -> list[str]:
    """The first ``limit`` documents of ``path`` (jsonl/json[.gz|.zst]: the ``text`` field;
    parquet: the ``text`` column; anything else: one document per line)."""
    name = path.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        texts: list[str] = []
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=[TEXT]):
            texts.extend(t for t in batch.column(0).to_pylist() if t is not None)
            if len(texts) >= limit:
                break
        return texts[:limit]

    def lines() -> Iterator[str]:
        with io.TextIOWrapper(open_decompressed(path), encoding="utf-8", errors="replace", newline="\n") as f:
            yield from f

    stem = name.removesuffix(".gz").removesuffix(".zst")
    is_json = stem.endswith((".jsonl", ".json", ".ndjson"))
    texts = []
    for line in lines():
        if len(texts) >= limit:
            break
        if is_json:
            if not line.strip():
                continue
            record = json.loads(line)
            text = record.get(TEXT) if isinstance(record, dict) else None
            if isinstance(text, str):
                texts.append(text)
        else:
            texts.append(line.removesuffix("\n"))
    return texts


@register
class Perplexity(Stage):
    """Adds ``perplexity`` (float64, CCNet's document perplexity under the n-gram ``model``,
    an ARPA file) and, when cutoffs are known, ``bucket`` (``head``/``middle``/``tail``);
    drops documents above ``max_perplexity`` (reason ``perplexity``; the rejected documents
    keep their ``perplexity`` column). ``tokenizer``: a tokenizer file (any ``Tokenizer.from_file``
    reads) whose tokens are the model's words (none: whitespace words). ``normalize``: CCNet's
    line normalisation first.
    ``cutoffs: [head, tail]``, or ``sample`` (a file of documents), ``sample_size`` and
    ``percentiles`` to compute them once (see the module notes)."""

    name = "perplexity"

    def __init__(self, model: str, tokenizer: str | None = None, max_perplexity: float | None = None,
                 normalize: bool = False, cutoffs: list[float] | None = None, sample: str | None = None,
                 sample_size: int = 10000, percentiles: Sequence[float] = (30.0, 60.0)) -> None:
        model_file = storage.local_file(model)
        if model_file is None:
            raise InvalidArgumentError(f"perplexity: no model file at {_shown(model)}")
        if tokenizer is not None and not _is_file(tokenizer):
            raise InvalidArgumentError(f"perplexity: no tokenizer file at {_shown(tokenizer)}")
        if max_perplexity is not None and not max_perplexity > 0:
            raise InvalidArgumentError(f"perplexity: max_perplexity must be positive, not {max_perplexity}")
        if cutoffs is not None and sample is not None:
            raise InvalidArgumentError("perplexity: give cutoffs or sample, not both")
        if cutoffs is not None and (len(cutoffs) != 2 or not 0 < cutoffs[0] <= cutoffs[1]):
            raise InvalidArgumentError(f"perplexity: cutoffs must be [head, tail] with 0 < head <= tail, not {cutoffs}")
        if len(percentiles) != 2 or not 0 <= percentiles[0] <= percentiles[1] <= 100:
            raise InvalidArgumentError(f"perplexity: percentiles must be two values in [0, 100], not {percentiles}")
        sample_file = storage.local_file(sample) if sample is not None else None
        if sample is not None and sample_file is None:
            raise InvalidArgumentError(f"perplexity: no sample file at {_shown(sample)}")
        if sample_size < 1:
            raise InvalidArgumentError(f"perplexity: sample_size must be at least 1, not {sample_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_perplexity = max_perplexity
        self.normalize = normalize
        self.cutoffs = list(cutoffs) if cutoffs is not None else None
        self.sample = sample
        self.sample_size = int(sample_size)
        self.percentiles = [float(p) for p in percentiles]
        # Keyed by the local copy of a remote model: its cache path holds the object's ETag.
        model_key = ("model", _file_key(str(model_file)), _file_key(tokenizer))
        self._lm: LanguageModel = _cached(model_key, lambda: LanguageModel.load(model, tokenizer))
        self._cutoffs: tuple[float, float] | None = tuple(self.cutoffs) if self.cutoffs else None  # type: ignore[assignment]
        if sample_file is not None:
            key = ("cutoffs", model_key, _file_key(str(sample_file)), self.sample_size, normalize,
                   tuple(self.percentiles))
            self._cutoffs = _cached(key, lambda: self._sample_cutoffs(str(sample_file)))

    def _sample_cutoffs(self, sample_file: str) -> tuple[float, float]:
        assert self.sample is not None
        texts = load_cutoffs_sample(sample_file, self.sample_size)
        if not texts:
            raise InvalidArgumentError(f"perplexity: the sample {_shown(self.sample)} holds no documents")
        scores, lengths = self._lm.document_scores(texts, self.normalize)
        head, tail = np.percentile(perplexity_of(scores, lengths), self.percentiles)
        return float(head), float(tail)

    @property
    def bucket_cutoffs(self) -> tuple[float, float] | None:
        """(head, tail) perplexity cutoffs in use, given or computed from the sample."""
        return self._cutoffs

    def perplexities(self, text: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """CCNet's perplexity of every document of a string column."""
        scores, lengths = self._lm.document_scores(text, self.normalize)
        return perplexity_of(scores, lengths)  # type: ignore[return-value]

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        ppl = self.perplexities(batch.column(TEXT))
        batch = batch.append_column(PERPLEXITY, pa.array(ppl, type=pa.float64()))
        if self._cutoffs is not None:
            head, tail = self._cutoffs
            # CCNet: head when <= the first cutoff, middle when <= the second, else tail.
            which = np.where(ppl <= head, 0, np.where(ppl <= tail, 1, 2))
            batch = batch.append_column(BUCKET, pa.array(_BUCKETS[which], type=pa.string()))
        if self.max_perplexity is None:
            return StageResult(batch)
        return self.reject(batch, ppl <= self.max_perplexity, "perplexity")
