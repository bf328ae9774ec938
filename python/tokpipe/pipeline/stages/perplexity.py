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

Per language (``language: auto``, as CCNet has a model per language): each document is scored
by the model of its ``language`` column's entry in ``languages`` (a table of this stage's
parameters: ``model`` and its ``tokenizer``, ``normalize``, ``cutoffs`` or ``sample``,
``max_perplexity``), and the documents of other languages by the top-level ``model``. Without
a top-level ``model`` they are kept, with a null ``perplexity`` and ``bucket``, and counted as
``not_judged`` in the stats. The ``bucket`` column is there when any language's model has
cutoffs (null for the documents of a model without).
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
from tokpipe.pipeline.stages.per_language import LanguageAware, LanguageRules, check_auto

__all__ = ["Perplexity", "PERPLEXITY", "BUCKET", "load_cutoffs_sample"]

#: Columns the stage adds.
PERPLEXITY = "perplexity"
BUCKET = "bucket"

_BUCKETS = np.array(["head", "middle", "tail"], dtype=object)

# Models and sample cutoffs, per process: stages are built for every task, and loading a
# large ARPA file takes seconds. Keyed by the files' identity (path, size, mtime); each entry
# also has a slot (the files' paths), where a newer version of the files replaces the older.
_CACHE: dict[tuple[Any, ...], Any] = {}
_SLOTS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
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


def _cached(key: tuple[Any, ...], slot: tuple[Any, ...], make: Any) -> Any:
    with _CACHE_LOCK:
        if key not in _CACHE:
            # One version of a model at a time (models are large); several models, one per
            # language, live side by side.
            for old in [k for k, s in _SLOTS.items() if s == slot]:
                del _CACHE[old], _SLOTS[old]
            _CACHE[key] = make()
            _SLOTS[key] = slot
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
class Perplexity(LanguageAware, Stage):
    """Adds ``perplexity`` (float64, CCNet's document perplexity under the n-gram ``model``,
    an ARPA file) and, when cutoffs are known, ``bucket`` (``head``/``middle``/``tail``);
    drops documents above ``max_perplexity`` (reason ``perplexity``; the rejected documents
    keep their ``perplexity`` column). ``tokenizer``: a tokenizer file (any ``Tokenizer.from_file``
    reads) whose tokens are the model's words (none: whitespace words). ``normalize``: CCNet's
    line normalisation first.
    ``cutoffs: [head, tail]``, or ``sample`` (a file of documents), ``sample_size`` and
    ``percentiles`` to compute them once (see the module notes). ``language: auto``: a model
    per language, from each document's ``language`` column (``languages``: a table of these
    parameters per language; ``model`` then scores the other languages, or, when not given,
    they are kept unscored and counted as ``not_judged``)."""

    name = "perplexity"

    def __init__(self, model: str | None = None, tokenizer: str | None = None, max_perplexity: float | None = None,
                 normalize: bool = False, cutoffs: list[float] | None = None, sample: str | None = None,
                 sample_size: int = 10000, percentiles: Sequence[float] = (30.0, 60.0), language: str | None = None,
                 languages: dict[str, dict[str, Any] | None] | None = None) -> None:
        if language is not None and language != "auto":
            raise InvalidArgumentError(f"perplexity: language is auto (a model per language) or null (one model), "
                                       f"not {language!r}")
        auto = check_auto(self.name, language, languages)
        if model is None and not auto:
            raise InvalidArgumentError("perplexity: give model, an ARPA file")
        if model is None and (tokenizer is not None or sample is not None or cutoffs is not None
                              or max_perplexity is not None or normalize):
            # Without a top-level model nothing reads them: refused, not silently ignored.
            raise InvalidArgumentError("perplexity: tokenizer, cutoffs, sample, max_perplexity and normalize are "
                                       "the top-level model's: give model (or set them in a language's table)")
        model_file = storage.local_file(model) if model is not None else None
        if model is not None and model_file is None:
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
        self.language = language
        self.languages = dict(languages) if languages is not None else None
        self._lm: LanguageModel | None = None
        self._cutoffs: tuple[float, float] | None = (tuple(self.cutoffs)  # type: ignore[assignment]
                                                     if self.cutoffs else None)
        if model is not None:
            # Keyed by the local copy of a remote model: its cache path holds the object's ETag.
            model_key = ("model", _file_key(str(model_file)), _file_key(tokenizer))
            model_slot = ("model", str(model_file), tokenizer)
            self._lm = _cached(model_key, model_slot, lambda: LanguageModel.load(model, tokenizer))
            if sample_file is not None:
                key = ("cutoffs", model_key, _file_key(str(sample_file)), self.sample_size, normalize,
                       tuple(self.percentiles))
                self._cutoffs = _cached(key, ("cutoffs", model_slot, str(sample_file)),
                                        lambda: self._sample_cutoffs(str(sample_file)))
        self._rules: LanguageRules[Perplexity] | None = None
        if auto:
            self._rules = LanguageRules(self.name, Perplexity, languages, self if model is not None else None,
                                        lambda code, params: Perplexity(**params))

    def _sample_cutoffs(self, sample_file: str) -> tuple[float, float]:
        assert self.sample is not None
        assert self._lm is not None
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
        """CCNet's perplexity of every document of a string column (under the top-level model)."""
        if self._lm is None:
            raise InvalidArgumentError("perplexity: no top-level model (language: auto scores by languages' models)")
        scores, lengths = self._lm.document_scores(text, self.normalize)
        return perplexity_of(scores, lengths)  # type: ignore[return-value]

    def _apply_by_language(self, batch: pa.RecordBatch) -> StageResult:
        """``apply`` with each language's model on its documents (``language: auto``)."""
        assert self._rules is not None
        groups = self._rules.groups(batch)
        ppl = np.full(batch.num_rows, np.nan)
        scored = np.zeros(batch.num_rows, dtype=bool)
        which = np.full(batch.num_rows, -1)
        keep = np.ones(batch.num_rows, dtype=bool)
        for group in groups:
            stage = group.stage
            if stage is None:
                continue
            values = stage.perplexities(group.batch.column(TEXT))
            ppl[group.rows], scored[group.rows] = values, True
            if stage._cutoffs is not None:
                head, tail = stage._cutoffs
                which[group.rows] = np.where(values <= head, 0, np.where(values <= tail, 1, 2))
            if stage.max_perplexity is not None:
                keep[group.rows] = values <= stage.max_perplexity
        self._rules.count(self.stats, groups, keep)
        batch = batch.append_column(PERPLEXITY, pa.array(ppl, type=pa.float64(), mask=~scored))
        # The column is there when any model has cutoffs, whatever languages this batch holds.
        if any(stage._cutoffs is not None for stage in self._rules.stages()):
            buckets = _BUCKETS[np.maximum(which, 0)]
            batch = batch.append_column(BUCKET, pa.array(buckets, type=pa.string(), mask=which < 0))
        if keep.all():
            return StageResult(batch)
        return self.reject(batch, keep, "perplexity")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        if self._rules is not None:
            return self._apply_by_language(batch)
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
