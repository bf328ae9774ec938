"""``quality_classifier``: score each document with a trained quality classifier (a model
file of ``tokpipe train-quality-classifier``, see ``tokpipe.quality``), add the score as
``quality_score`` and keep the documents at or above a ``threshold``, or the ``top_fraction``
of the whole run with the highest scores.

Keeping the top fraction of the run needs every score before anything is dropped, so the
stage is a global stage: the parallel phase scores the documents (``keys``: the scores, one
Rust call per record batch that prepares and scores every document on all cores with the
GIL released, the model loaded once per worker process) and
``decide`` sees every score at once. Ties are broken by position in the run (task order, then
row), so the same documents are kept whatever the number of workers. With ``threshold``
the decision is per document, but goes through the same two phases (one stage, one
behaviour; the cost is one more pass over the staged documents).

Scoring needs no fastText (tokpipe reads fastText's model file and predicts as it does);
training a model does: ``pip install 'tokpipe[fasttext]'``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import DecideContext, Decision, GlobalStage, register
from tokpipe.pipeline.documents import TEXT

__all__ = ["QualityClassifierFilter", "QUALITY_SCORE", "LOW_QUALITY"]

QUALITY_SCORE = "quality_score"
LOW_QUALITY = "low_quality"
# Handed from decide to revise, not added to the documents.
_DROP = "_quality_drop"


@register
class QualityClassifierFilter(GlobalStage):
    """Adds ``quality_score`` (the model's probability that the document is of the reference
    kind, in [0, 1]) and drops documents with reason ``low_quality``: those under
    ``threshold`` (kept at or above it), or, with ``top_fraction`` instead, all but the
    ``round(top_fraction * documents)`` best-scored documents of the run (ties kept in input
    order). ``model`` is the model file, a path or a URL (fetched once into tokpipe's cache)."""

    name = "quality_classifier"

    def __init__(self, model: str | None = None, threshold: float | None = None,
                 top_fraction: float | None = None) -> None:
        model_file = storage.local_file(model) if model is not None else None
        if model is None or model_file is None:
            shown = storage.redact(model) if storage.is_remote(model) else model
            raise InvalidArgumentError(f"quality_classifier: model must be a quality model file, not {shown!r}")
        if (threshold is None) == (top_fraction is None):
            raise InvalidArgumentError("quality_classifier: give exactly one of threshold and top_fraction")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise InvalidArgumentError(f"quality_classifier: threshold must be in [0, 1], not {threshold}")
        if top_fraction is not None and not 0.0 <= top_fraction <= 1.0:
            raise InvalidArgumentError(f"quality_classifier: top_fraction must be in [0, 1], not {top_fraction}")
        from tokpipe.quality import load_quality_classifier

        # Loaded here so that a bad file fails when the config is read (named as given);
        # load_quality_classifier caches it for the rest of the process, by the local file
        # (a remote model's copy in tokpipe's cache) that scoring then names.
        load_quality_classifier(model)
        self.model = str(model)
        self._model_file = str(model_file)
        self.threshold = threshold
        self.top_fraction = top_fraction

    def score(self, batch: pa.RecordBatch) -> np.ndarray:
        from tokpipe.quality import load_quality_classifier

        return load_quality_classifier(self._model_file).score(batch.column(TEXT))

    def key_type(self) -> pa.DataType:
        return pa.float64()

    def keys(self, batch: pa.RecordBatch) -> pa.Array:
        return pa.array(self.score(batch), type=pa.float64())

    def decide(self, keys: Sequence[pa.Array], context: DecideContext | None = None) -> list[Decision]:
        arrays = [k.to_numpy(zero_copy_only=False).astype(np.float64) for k in keys]
        sizes = [len(a) for a in arrays]
        scores = np.concatenate(arrays) if arrays else np.zeros(0)
        n = len(scores)
        if self.threshold is not None:
            keep = scores >= self.threshold
        else:
            assert self.top_fraction is not None
            wanted = min(n, int(math.floor(self.top_fraction * n + 0.5)))
            # Highest score first, then lowest position: a stable sort of -score.
            order = np.argsort(-scores, kind="stable")
            keep = np.zeros(n, dtype=bool)
            keep[order[:wanted]] = True
        self.stats.dropped[LOW_QUALITY] += int((~keep).sum())
        decisions, offset = [], 0
        for size in sizes:
            part = slice(offset, offset + size)
            decisions.append(Decision(np.arange(offset, offset + size, dtype=np.int64),
                                      {QUALITY_SCORE: pa.array(scores[part], type=pa.float64()),
                                       _DROP: pa.array(~keep[part], type=pa.bool_())}))
            offset += size
        return decisions

    def revise(self, batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> tuple[pa.RecordBatch, np.ndarray | None]:
        batch = batch.append_column(QUALITY_SCORE, columns[QUALITY_SCORE])
        drop = columns[_DROP].to_numpy(zero_copy_only=False)
        return batch, np.where(drop, LOW_QUALITY, "")
