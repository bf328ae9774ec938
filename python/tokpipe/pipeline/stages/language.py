"""``language``: identify each document's language, keep the ones wanted.

Two detectors, both offline:

- ``lingua`` (default): `Lingua <https://github.com/pemistahl/lingua-py>`_
  (``lingua-language-detector``), Rust inside, its models bundled in the wheel; no download.
  A batch goes through its parallel API (``compute_language_confidence_values_in_parallel``),
  on all cores, not a Python loop. Its score is Lingua's confidence of the top language, which
  is *relative to the candidate languages* (they sum to 1), so the candidate set matters: the
  default (``DEFAULT_CANDIDATES``) is 29 widely used languages; ``candidate_languages: null``
  takes all 75 Lingua knows (slower, and the confidence spreads over more languages, so
  scores come out lower). Text with no
  letters gets no language (``und``, score 0). Lingua's confidences jitter in their last bits
  from call to call, so they are rounded to 6 decimals.
- ``fasttext``: a fastText language-ID model given by ``model_path`` (such as ``lid.176.bin``,
  the model datatrove's ``LanguageFilter`` uses; download it yourself, or give its URL,
  ``s3://...``, fetched once into tokpipe's cache), through
  ``fasttext-wheel``. Newlines are replaced by spaces (fastText reads one line), scores are
  clipped to [0, 1] (fastText's can pass 1 by a rounding error). fasttext-wheel's one-text
  ``predict`` fails under numpy 2 (``np.array(copy=False)``); its list ``predict``, the one
  used here, works.

Install the detector with ``pip install 'tokpipe[language]'`` (Lingua) or
``'tokpipe[fasttext]'``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe import storage
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.documents import TEXT, set_column

__all__ = ["LanguageFilter", "DEFAULT_CANDIDATES", "UNDETERMINED"]

#: Lingua's default candidates (ISO 639-1): widely used languages of the web.
DEFAULT_CANDIDATES = ("ar", "bn", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fr", "he", "hi", "hu", "id", "it",
                      "ja", "ko", "nl", "pl", "pt", "ro", "ru", "sv", "th", "tr", "uk", "vi", "zh")

#: The ``language`` of a document the detector gives no language (ISO 639-2 "undetermined").
UNDETERMINED = "und"

#: Lingua's scores are rounded to this many decimals (see ``LanguageFilter.detect``).
LINGUA_SCORE_DECIMALS = 6

_INSTALL = {"lingua": "pip install 'tokpipe[language]'", "fasttext": "pip install 'tokpipe[fasttext]'"}


def _import(backend: str) -> Any:
    try:
        if backend == "lingua":
            import lingua

            return lingua
        import fasttext

        return fasttext
    except ImportError:
        raise InvalidArgumentError(f"language: backend {backend} is not installed: {_INSTALL[backend]}") from None


def _lingua_language(lingua: Any, code: str) -> Any:
    try:
        return lingua.Language.from_iso_code_639_1(lingua.IsoCode639_1.from_str(code))
    except (ValueError, AttributeError):
        raise InvalidArgumentError(f"language: Lingua has no language {code!r} (ISO 639-1 codes, e.g. en)") from None


@register
class LanguageFilter(Stage):
    """Adds ``language`` (ISO 639-1 code, ``und`` when none is found) and ``language_score``
    (the detector's confidence in it, in [0, 1]) and drops documents whose language is not in
    ``languages`` (reason ``language``; ``null`` keeps every language) or whose score is under
    ``min_score`` (reason ``language_score``; 0.65, datatrove's ``LanguageFilter`` default;
    datatrove keeps scores strictly above, this stage at or above). Only the first
    ``max_chars`` characters of a document are scored (``null``: all), which keeps long
    documents cheap (Lingua's cost grows with the text; 1,000 characters are plenty to tell
    languages apart); ``low_accuracy`` is Lingua's trigram-only mode (1.2x to 3x the documents
    per CPU second in benches/RESULTS.md, less sure on short texts); ``candidate_languages``
    limits Lingua's choice (``languages`` are always candidates; fastText has no such choice);
    ``backend`` is ``lingua`` or ``fasttext`` (with ``model_path``)."""

    name = "language"

    def __init__(self, languages: str | list[str] | None = None, min_score: float | None = 0.65, backend: str = "lingua",
                 candidate_languages: list[str] | None = DEFAULT_CANDIDATES, max_chars: int | None = 1000,
                 low_accuracy: bool = False, model_path: str | None = None) -> None:
        if isinstance(languages, str):
            languages = [languages]
        if backend not in ("lingua", "fasttext"):
            raise InvalidArgumentError(f"language: backend must be lingua or fasttext, not {backend!r}")
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise InvalidArgumentError(f"language: min_score must be in [0, 1] or null, not {min_score}")
        if max_chars is not None and max_chars < 1:
            raise InvalidArgumentError(f"language: max_chars must be at least 1 or null, not {max_chars}")
        module = _import(backend)
        if backend == "lingua":
            if model_path is not None:
                raise InvalidArgumentError("language: model_path is for backend fasttext; Lingua's models are bundled")
            # Checked here so that a misspelt code fails when the config is read.
            for code in [*(languages or []), *(candidate_languages or [])]:
                _lingua_language(module, code)
        else:
            if low_accuracy:
                raise InvalidArgumentError("language: low_accuracy is Lingua's mode, not fastText's")
            model_file = storage.local_file(model_path) if model_path is not None else None
            if model_path is None or model_file is None:
                shown = storage.redact(model_path) if storage.is_remote(model_path) else model_path
                raise InvalidArgumentError(f"language: backend fasttext needs model_path, a fastText language-ID "
                                           f"model file (such as lid.176.bin), not {shown!r}")
            # A remote model is read from its copy in tokpipe's cache, fetched here.
            self._model_file = str(model_file)
        self.languages = list(languages) if languages is not None else None
        self.min_score = min_score
        self.backend = backend
        self.candidate_languages = list(candidate_languages) if candidate_languages is not None else None
        self.max_chars = max_chars
        self.low_accuracy = low_accuracy
        self.model_path = model_path
        self._module = module
        self._detector: Any = None  # built on first use, in the worker that uses it

    def _lingua_detector(self) -> Any:
        lingua = self._module
        if self.candidate_languages is None:
            builder = lingua.LanguageDetectorBuilder.from_all_languages()
        else:
            codes = list(dict.fromkeys([*(self.languages or []), *self.candidate_languages]))
            builder = lingua.LanguageDetectorBuilder.from_languages(*(_lingua_language(lingua, c) for c in codes))
        if self.low_accuracy:
            builder = builder.with_low_accuracy_mode()
        return builder.build()

    def _texts(self, text: pa.Array | pa.ChunkedArray) -> list[str]:
        text = text.fill_null("")
        if self.max_chars is not None:
            text = pc.utf8_slice_codeunits(text, 0, self.max_chars)
        if self.backend == "fasttext":
            text = pc.replace_substring(text, "\n", " ")
        return text.to_pylist()

    def detect(self, text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """(language code, score) per row of a string column: an object and a float64 array."""
        texts = self._texts(text)
        if self.backend == "lingua":
            if self._detector is None:
                self._detector = self._lingua_detector()
            results = self._detector.compute_language_confidence_values_in_parallel(texts)
            tops = [r[0] if r and r[0].value > 0.0 else None for r in results]
            languages = np.array([UNDETERMINED if t is None else t.language.iso_code_639_1.name.lower() for t in tops],
                                 dtype=object)
            scores = np.array([0.0 if t is None else t.value for t in tops], dtype=np.float64)
            # Lingua's confidences differ in their last bits from call to call (sums taken in
            # an unspecified order); rounded, a document gets one score, and one verdict at a
            # threshold, however the documents are batched.
            scores = np.round(scores, LINGUA_SCORE_DECIMALS)
        else:
            if self._detector is None:
                self._detector = self._module.load_model(self._model_file)
            labels, probs = self._detector.predict(texts, k=1) if texts else ([], [])
            languages = np.array([lab[0].removeprefix("__label__") if lab else UNDETERMINED for lab in labels],
                                 dtype=object)
            scores = np.array([float(p[0]) if len(p) else 0.0 for p in probs], dtype=np.float64)
        return languages, np.clip(scores, 0.0, 1.0)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        languages, scores = self.detect(batch.column(TEXT))
        for name, values in (("language", pa.array(languages, type=pa.string())),
                             ("language_score", pa.array(scores, type=pa.float64()))):
            batch = set_column(batch, name, values)
        reasons = np.full(batch.num_rows, "", dtype=object)
        if self.min_score is not None:
            reasons[scores < self.min_score] = "language_score"
        if self.languages is not None:
            reasons[~np.isin(languages, self.languages)] = "language"  # the language rule comes first
        return self.reject(batch, reasons == "", reasons)

    def __getstate__(self) -> dict[str, Any]:
        # Modules and detectors do not pickle; a copy rebuilds its detector on first use.
        state = dict(self.__dict__)
        state["_module"], state["_detector"] = None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._module = _import(self.backend)
        if self.backend == "fasttext":
            # The copy may be on another machine, whose cache has its own path for the model.
            self._model_file = str(storage.local_copy(self.model_path))
