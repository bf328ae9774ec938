"""``tokenize``: each document's token ids (``input_ids``) and their count (``length``).

The ids are computed by ``Tokenizer.encode_arrow``: the whole text column goes to Rust as its
Arrow buffers and comes back as one ``large_list`` column, encoded on all cores with no
Python object per document. ``input_ids`` is ``uint16`` when every id fits (vocab_size <=
65536), else ``uint32``.

Documents without a single token (empty text, or text the tokenizer maps to nothing) are
dropped with the reason ``empty``: they hold nothing to train on, and a zero-length sequence
is a hazard in the formats downstream (Megatron's sample index, packed rows). The count is
in the stage's stats (``dropped_empty``).

The tokenizer is loaded once per worker process (cached by path, size and mtime), not per
batch or per task.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tokpipe import storage
from tokpipe.errors import ConfigError
from tokpipe.pipeline.base import Stage, StageResult, register, split_rejected
from tokpipe.pipeline.documents import TEXT, set_column
from tokpipe.pipeline.kernels import arrow_of, list_buffers
from tokpipe.tokenizer import Tokenizer

__all__ = ["Tokenize", "load_tokenizer", "find_eos", "ids_dtype", "file_sha256", "INPUT_IDS", "LENGTH",
           "EOS_CANDIDATES"]

INPUT_IDS = "input_ids"
LENGTH = "length"
#: End-of-document tokens looked for, in this order, when no ``eos_token`` is given:
#: GPT-2/tiktoken, Llama/T5/SentencePiece, BERT, and the generic name.
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "[SEP]", "<eos>", "<|end_of_text|>")

_CACHE: dict[tuple[str, int, int | str], Tokenizer] = {}


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """:meth:`Tokenizer.from_file` of ``path`` (any tokenizer file tokpipe reads), cached per
    process by path, size and mtime."""
    name = os.fspath(path)
    if storage.is_remote(name):
        size, version = storage.version(name)
        key = (name, size, version)
    else:
        resolved = Path(path).resolve()
        stat = resolved.stat()
        name, key = str(resolved), (str(resolved), stat.st_size, stat.st_mtime_ns)
    tokenizer = _CACHE.get(key)
    if tokenizer is None:
        tokenizer = _CACHE[key] = Tokenizer.from_file(name)
    return tokenizer


def find_eos(tokenizer: Tokenizer, eos_token: str | None = None) -> int:
    """The id of ``eos_token``, or of the first of ``EOS_CANDIDATES`` the tokenizer has."""
    added = tokenizer.added_tokens
    if eos_token is not None:
        found = added.get(eos_token)
        if found is None:
            found = tokenizer.token_to_id(eos_token)
        if found is None:
            raise ConfigError(f"the tokenizer has no token {eos_token!r} to use as end of document")
        return found
    for candidate in EOS_CANDIDATES:
        if candidate in added:
            return added[candidate]
    raise ConfigError("the tokenizer has no end-of-document token (looked for "
                      f"{', '.join(EOS_CANDIDATES)}); name one with eos_token / --eos-token, "
                      "or turn append_eos off")


def ids_dtype(vocab_size: int) -> str:
    """``uint16`` when every id (0 .. vocab_size - 1) fits in it, else ``uint32``."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with storage.open_input(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@register
class Tokenize(Stage):
    """Adds ``input_ids`` (list<uint16> or list<uint32>, by vocab size) and ``length``
    (int32) to each document, with the end-of-document id after each document's ids when
    ``append_eos``. Drops documents without tokens (reason ``empty``). ``keep_text=False``
    removes the text column (the token ids replace it). ``threads``: Rust threads per worker
    process (all cores when None)."""

    name = "tokenize"

    def __init__(self, tokenizer: str = "", append_eos: bool = True, eos_token: str | None = None,
                 keep_text: bool = True, threads: int | None = None) -> None:
        if not tokenizer:
            raise ConfigError("tokenize: give the tokenizer file (tokenizer: path/to/tokenizer.json)")
        self.tokenizer = tokenizer
        self.append_eos = append_eos
        self.eos_token = eos_token
        self.keep_text = keep_text
        self.threads = threads
        # Checked now, so a bad file or a missing EOS is a config error before any work.
        loaded = load_tokenizer(tokenizer)
        self._eos = find_eos(loaded, eos_token) if append_eos else None
        # A tokenizer given by URL is kept by the stage: looking it up in the cache again
        # would cost a request (its ETag) per batch. Not pickled (it cannot be): a copy
        # loads it again.
        self._remote: Tokenizer | None = loaded if storage.is_remote(tokenizer) else None

    @property
    def _tokenizer(self) -> Tokenizer:
        if self._remote is not None:
            return self._remote
        return load_tokenizer(self.tokenizer)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_remote": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if storage.is_remote(self.tokenizer):
            self._remote = load_tokenizer(self.tokenizer)

    @property
    def eos_id(self) -> int | None:
        return self._eos

    @property
    def dtype(self) -> str:
        return ids_dtype(self._tokenizer.vocab_size)

    def params(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, "append_eos": self.append_eos, "eos_token": self.eos_token,
                "keep_text": self.keep_text, "threads": self.threads}

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        ids = self._tokenizer.encode_arrow(batch.column(TEXT), num_threads=self.threads, append_id=self._eos,
                                           dtype=self.dtype)
        offsets, _ = list_buffers(ids)
        lengths = np.diff(offsets).astype(np.int32)
        out = set_column(set_column(batch, INPUT_IDS, ids), LENGTH, arrow_of(lengths))
        if not self.keep_text:
            out = out.drop_columns([TEXT])
        self.stats.extra["tokens"] += int(offsets[-1] - offsets[0])
        keep = lengths > 0
        if keep.all():
            return StageResult(out)
        return split_rejected(out, keep, "empty", self.name)
