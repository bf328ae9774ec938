"""The typed :class:`Tokenizer` users import.

It wraps ``tokpipe._core.Tokenizer`` (Rust) and adds nothing but argument handling and
documentation, so every call goes straight to Rust. Long inputs and batches are encoded with
the GIL released.

Every loader and ``save*`` method also takes an object-storage URL (``s3://``, ``gs://``,
``az://``, ``hf://``, ``file://``; see :mod:`tokpipe.storage`): a file is read from a local copy
(``storage.local_copy``: downloaded once, kept in tokpipe's cache under its URL and ETag), since
the Rust loaders read paths; a file is written locally, then uploaded whole. Errors name the
URL, never the local copy or a credential.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Union

from tokpipe import _core, storage
from tokpipe.errors import FormatError, InvalidArgumentError
from tokpipe.tokenizer_files import detect, gpt2_pair, read_head, tiktoken_pattern

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

__all__ = ["Tokenizer", "AllowedSpecial"]

#: ``"all"`` or a collection of special-token strings that ``encode`` may turn into their ids.
AllowedSpecial = Union[Literal["all"], Collection[str]]

StrPath = Union[str, "os.PathLike[str]"]


class Tokenizer:
    """A tokenizer: normalizer, pre-tokenizer, model (byte-level BPE, WordPiece or Unigram),
    special tokens, the post-processor (``[CLS] … [SEP]``, ``<s> … </s>``) and the decoder.

    Build one with :meth:`from_file` (any file below, told by its content),
    :meth:`from_sentencepiece`, :meth:`from_tiktoken`, :meth:`from_gpt2`,
    :meth:`from_wordpiece_vocab` (BERT ``vocab.txt``), :func:`tokpipe.train_bpe` or
    :func:`tokpipe.train_wordpiece`.

    A sentencepiece ``.model`` gives sentencepiece's ids (normalizer with its precompiled
    charsmap, whitespace rules, user-defined symbols, Viterbi, unknown characters fused or
    spelled as ``<0xNN>`` bytes); a Unigram ``tokenizer.json`` gives HF's. Unigram tokenizers
    also have :meth:`encode_nbest` and :meth:`encode_sample` (subword regularization).
    """

    __slots__ = ("_core",)

    def __init__(self, core: _core.Tokenizer) -> None:
        self._core = core

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: StrPath, pattern: str | None = None) -> Tokenizer:
        """Load any tokenizer file tokpipe reads, told apart by its content (see
        :mod:`tokpipe.tokenizer_files`), plain or gzip:

        - an HF ``tokenizer.json`` (byte-level BPE, WordPiece or Unigram);
        - a sentencepiece ``.model``;
        - a ``.tiktoken`` rank file: its pre-tokenizer ``pattern`` (a preset or a regex, as
          :meth:`from_tiktoken` takes) is told by the file's name when not given: cl100k,
          o200k, or GPT-2's for p50k, r50k and gpt2; OpenAI's special tokens come with
          OpenAI's files;
        - GPT-2's ``encoder.json`` or ``vocab.bpe``, with the other file of the pair beside it
          (same prefix: ``gpt2_encoder.json``, ``gpt2_vocab.bpe``), as :meth:`from_gpt2`;
        - BERT's ``vocab.txt`` (not gzip), as :meth:`from_wordpiece_vocab` with its defaults
          (uncased); call that for other settings.

        ``pattern`` applies to ``.tiktoken`` files only. ``path`` may be a URL (``s3://...``;
        GPT-2's partner file is then looked for beside it in the bucket).
        """
        where = _where(path)
        with _local_files() as fetch:
            name = fetch(where)
            shown = _shown(where)
            head, gzipped, whole = read_head(name)
            kind = detect(head, whole)
            if pattern is not None and kind != "tiktoken":
                raise InvalidArgumentError(f"{shown}: pattern= applies to .tiktoken rank files, and this is "
                                           f"{'not a tokenizer file tokpipe knows' if kind is None else 'a ' + kind}")
            if kind == "tiktoken":
                return cls.from_tiktoken(name, pattern=pattern or tiktoken_pattern(shown))
            if kind in ("gpt2-encoder", "gpt2-merges"):
                encoder, merges = gpt2_pair(where, kind)
                return cls.from_gpt2(fetch(encoder), fetch(merges))
            if kind == "vocab.txt":
                if gzipped:
                    raise FormatError(f"{shown}: a gzip vocab.txt is not read; unzip it")
                return cls.from_wordpiece_vocab(name)
            # tokenizer.json, .model, or unknown: the core tells JSON from protobuf, and says
            # what is wrong with anything else.
            return cls(_core.Tokenizer.from_file(name))

    @classmethod
    def from_sentencepiece(cls, path: StrPath) -> Tokenizer:
        """Load a sentencepiece ``.model`` (Unigram). Ids, n-best lists and decoded text are
        sentencepiece's. Control pieces (``<s>``, ``</s>``) are special tokens: text unless
        ``allowed_special`` names them, and ``add_special_tokens=True`` wraps the ids in
        ``<s> … </s>``. BPE ``.model`` files are refused (not supported yet)."""
        with _local_files() as fetch:
            return cls(_core.Tokenizer.from_sentencepiece(fetch(_where(path))))

    @classmethod
    def from_sentencepiece_bytes(cls, data: bytes) -> Tokenizer:
        """Load a serialized sentencepiece model (``serialized_model_proto()``)."""
        return cls(_core.Tokenizer.from_sentencepiece_bytes(data))

    @classmethod
    def from_str(cls, json: str) -> Tokenizer:
        """Load from the text of an HF ``tokenizer.json``."""
        return cls(_core.Tokenizer.from_json(json))

    @classmethod
    def from_tiktoken(
        cls,
        path: StrPath,
        pattern: str = "cl100k",
        special_tokens: dict[str, int] | None = None,
    ) -> Tokenizer:
        """Load a ``.tiktoken`` rank file (plain or gzip).

        ``pattern`` is a preset (``"gpt2"``, ``"cl100k"``, ``"o200k"``, or a tiktoken encoding
        name such as ``"cl100k_base"``) or any regex. ``special_tokens`` maps token to id;
        ``None`` gives OpenAI's own special tokens when the file is one of OpenAI's encodings
        (told by pattern and size) and none otherwise.
        """
        specials = None if special_tokens is None else sorted(special_tokens.items(), key=lambda kv: kv[1])
        with _local_files() as fetch:
            return cls(_core.Tokenizer.from_tiktoken(fetch(_where(path)), pattern, specials))

    @classmethod
    def from_gpt2(
        cls,
        encoder_json: StrPath,
        vocab_bpe: StrPath,
        special_tokens: Sequence[str] = ("<|endoftext|>",),
    ) -> Tokenizer:
        """Load GPT-2's ``encoder.json`` and ``vocab.bpe``. Entries named in ``special_tokens``
        become special tokens (matched only when allowed), as in tiktoken's ``r50k_base``."""
        with _local_files() as fetch:
            return cls(_core.Tokenizer.from_gpt2(fetch(_where(encoder_json)), fetch(_where(vocab_bpe)),
                                                 list(special_tokens)))

    @classmethod
    def from_wordpiece_vocab(
        cls,
        path: StrPath,
        lowercase: bool = True,
        *,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
    ) -> Tokenizer:
        """Load BERT's ``vocab.txt`` (one token a line) as HF's ``BertWordPieceTokenizer`` does:
        the BERT normalizer (``lowercase``; accents are stripped when lowercasing unless
        ``strip_accents`` says otherwise), the BERT pre-tokenizer, WordPiece with ``unk_token``,
        the continuing-subword prefix and ``max_input_chars_per_word``, and the special tokens
        ``[UNK] [SEP] [CLS] [PAD] [MASK]`` that the vocabulary holds."""
        with _local_files() as fetch:
            return cls(_core.Tokenizer.from_wordpiece_vocab(
                fetch(_where(path)), lowercase, strip_accents, clean_text, handle_chinese_chars, unk_token,
                continuing_subword_prefix, max_input_chars_per_word))

    # -- encoding ------------------------------------------------------------------------
    def encode(self, text: str, allowed_special: AllowedSpecial = (), add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``.

        Special tokens in the text are encoded as ordinary text unless ``allowed_special``
        names them (or is ``"all"``), like tiktoken's ``encode_ordinary`` by default.
        Added tokens that are not special (from an HF file) are always matched, as HF does.
        No special tokens are added unless ``add_special_tokens`` is set; then a BERT
        tokenizer gives ``[CLS] … [SEP]`` (HF's BertProcessing), a sentencepiece one
        ``<s> … </s>`` (sentencepiece's ``add_bos``/``add_eos``), a byte-level one none.
        """
        return self._core.encode(text, allowed_special or None, add_special_tokens)

    def encode_to_numpy(
        self, text: str, allowed_special: AllowedSpecial = (), add_special_tokens: bool = False
    ) -> npt.NDArray[np.uint32]:
        """The ids of :meth:`encode`, as a numpy ``uint32`` array (tiktoken's
        ``encode_to_numpy``): no Python int per id, so cheaper to build and to keep."""
        return self._core.encode_to_numpy(text, allowed_special or None, add_special_tokens)

    def encode_batch(
        self,
        texts: Iterable[str],
        num_threads: int | None = None,
        allowed_special: AllowedSpecial = (),
        add_special_tokens: bool = False,
    ) -> list[list[int]]:
        """Token ids of each text, computed in parallel on ``num_threads`` threads (all cores
        when ``None``) with the GIL released. Same output whatever the thread count."""
        if not isinstance(texts, list):
            texts = list(texts)
        return self._core.encode_batch(texts, num_threads, allowed_special or None, add_special_tokens)

    def encode_arrow(
        self,
        column: pa.Array | pa.ChunkedArray,
        num_threads: int | None = None,
        allowed_special: AllowedSpecial = (),
        append_id: int | None = None,
        dtype: str = "uint32",
    ) -> pa.LargeListArray:
        """Token ids of every row of an Arrow string column as one ``large_list<dtype>``
        array (``dtype`` ``"uint16"`` or ``"uint32"``), encoded in parallel with the GIL
        released and built from flat buffers: no Python object per document. Same ids as
        :meth:`encode_batch`; ``append_id`` (an EOS id) follows the ids of each row that has
        any, so a row without tokens stays empty. Null rows encode as empty text."""
        import pyarrow as pa

        from tokpipe.pipeline.kernels import arrow_strings

        if dtype not in ("uint16", "uint32"):
            raise InvalidArgumentError(f"dtype must be 'uint16' or 'uint32', not {dtype!r}")
        strings, rows, _ = arrow_strings(column)
        ids, bounds = self._core.encode_arrow(strings, num_threads, allowed_special or None,
                                              append_id, dtype == "uint16")
        value_type = pa.uint16() if dtype == "uint16" else pa.uint32()
        values = pa.Array.from_buffers(value_type, len(ids) // (2 if dtype == "uint16" else 4),
                                       [None, pa.py_buffer(ids)])
        return pa.LargeListArray.from_buffers(pa.large_list(value_type), rows,
                                              [None, pa.py_buffer(bounds)], children=[values])

    def encode_nbest(self, text: str, n: int, *, scores: bool = False) -> list[list[int]] | list[tuple[list[int], float]]:
        """The ``n`` most likely segmentations of ``text``, best first, as sentencepiece's
        ``nbest_encode_as_ids`` (``n`` is clamped to 1..1024; ``n=1`` is :meth:`encode`).
        With ``scores=True``, ``(ids, log probability)`` pairs. Unigram tokenizers only."""
        result = self._core.encode_nbest(text, n)
        return result if scores else [ids for ids, _ in result]

    def encode_sample(self, text: str, alpha: float = 0.1, nbest_size: int = -1, seed: int | None = None) -> list[int]:
        """One segmentation of ``text`` drawn at random, for subword regularization
        (sentencepiece's ``encode(..., enable_sampling=True, alpha=, nbest_size=)``).

        ``nbest_size=-1`` draws from every segmentation with probability proportional to
        ``exp(alpha * score)`` (forward filtering, backward sampling); ``nbest_size > 1`` draws
        among the ``nbest_size`` best the same way; 0 or 1 gives :meth:`encode`. Smaller
        ``alpha`` flattens the distribution. The same ``seed`` gives the same draw (not
        sentencepiece's draw: the random numbers are ours); ``None`` picks a fresh seed.
        Unigram tokenizers only.
        """
        return self._core.encode_sample(text, alpha, nbest_size, _seed(seed))

    def encode_batch_sample(
        self,
        texts: Iterable[str],
        alpha: float = 0.1,
        nbest_size: int = -1,
        seed: int | None = None,
        num_threads: int | None = None,
    ) -> list[list[int]]:
        """:meth:`encode_sample` of each text, in parallel with the GIL released. Text ``i``
        draws from a generator seeded by ``seed`` and ``i``, so the output is the same at any
        thread count."""
        if not isinstance(texts, list):
            texts = list(texts)
        return self._core.encode_batch_sample(texts, alpha, nbest_size, _seed(seed), num_threads)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; byte sequences that are not valid UTF-8 become U+FFFD. WordPiece
        tokenizers decode as HF does (tokens joined by spaces, ``##`` pieces glued, special
        tokens skipped); sentencepiece ones as sentencepiece's ``decode`` (``▁`` as spaces, the
        dummy prefix dropped, ``<0xNN>`` pieces as bytes, ``<unk>`` as `` ⁇ ``).
        An id that is no token raises :class:`~tokpipe.InvalidArgumentError`."""
        ids = ids if isinstance(ids, list) else list(ids)
        try:
            return self._core.decode(ids)
        except OverflowError:
            raise self._unknown_id(ids) from None

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes ``ids`` stand for."""
        ids = ids if isinstance(ids, list) else list(ids)
        try:
            return self._core.decode_bytes(ids)
        except OverflowError:
            raise self._unknown_id(ids) from None

    def _unknown_id(self, ids: list[int]) -> InvalidArgumentError:
        """The error for ids the binding cannot even read as token ids (negative, or 2**32 and
        more), which reach it as ``OverflowError``: the same error as for any unknown id."""
        bad = next((i for i in ids if not _is_token_id(i)), "out of range")
        return InvalidArgumentError(f"token id {bad} is not in the vocabulary (size {self.vocab_size})")

    # -- vocabulary ----------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """One more than the largest token id (ordinary or special), like tiktoken's ``n_vocab``."""
        return self._core.vocab_size

    @property
    def pattern(self) -> str:
        """The pre-tokenizer's regex (``"bert"`` for the BERT pre-tokenizer)."""
        return self._core.pattern

    @property
    def model_type(self) -> str:
        """HF's model type: ``"BPE"``, ``"WordPiece"`` or ``"Unigram"``."""
        return self._core.model_type

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special tokens and their ids."""
        return {content: id_ for content, id_, special in self._core.added_tokens if special}

    @property
    def added_tokens(self) -> dict[str, int]:
        """All whole-string tokens (special or not) and their ids."""
        return {content: id_ for content, id_, _ in self._core.added_tokens}

    def id_to_token(self, id: int) -> str | None:
        """The token as HF writes it (byte-level text such as ``"Ġthe"``, a WordPiece token such
        as ``"##ing"``, or a special token); ``None`` for an id that is no token."""
        return self._core.id_to_token(id) if _is_token_id(id) else None

    def token_to_id(self, token: str) -> int | None:
        """Inverse of :meth:`id_to_token`."""
        return self._core.token_to_id(token)

    def token_bytes(self, id: int) -> bytes | None:
        """The raw bytes of one token; ``None`` for an id that is no token."""
        return self._core.token_bytes(id) if _is_token_id(id) else None

    def bytes_to_id(self, token: bytes) -> int | None:
        """The id of the token with exactly these bytes."""
        return self._core.bytes_to_id(token)

    # -- saving --------------------------------------------------------------------------
    def save(self, path: StrPath) -> None:
        """Write an HF ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file`` loads and that
        gives the same ids."""
        with _written(path) as name:
            self._core.save(name)

    def to_str(self) -> str:
        """The ``tokenizer.json`` text."""
        return self._core.to_json()

    def save_pretrained(
        self,
        directory: StrPath,
        *,
        bos_token: str | None = None,
        eos_token: str | None = None,
        unk_token: str | None = None,
        pad_token: str | None = None,
        cls_token: str | None = None,
        sep_token: str | None = None,
        mask_token: str | None = None,
        model_max_length: int | None = None,
        padding_side: Literal["right", "left"] = "right",
    ) -> None:
        """Write the folder ``transformers.AutoTokenizer.from_pretrained(directory)`` loads:
        ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json`` (see
        :mod:`tokpipe.hf_dir`). HF then gives the ids of :meth:`encode` with
        ``add_special_tokens`` set as HF's own call sets it, and pads with ``pad_token``.

        A role left ``None`` takes its model family's default when the vocabulary has it:
        byte-level BPE ``<|endoftext|>`` as bos, eos, unk and pad (GPT-2 names no pad token;
        this one makes ``padding=True`` work); WordPiece ``[CLS] [SEP] [PAD] [UNK] [MASK]``;
        sentencepiece ``<s> </s> <unk>``, pad ``<pad>`` if present, else ``<unk>``.
        ``model_max_length`` defaults to 512 for WordPiece, 2048 otherwise: give your model's.
        A named token that is not in the vocabulary raises
        :class:`~tokpipe.InvalidArgumentError` before anything is written. ``directory`` may be
        a URL (each file is uploaded whole).

        HF matches special-token strings inside text (``"<|endoftext|>"`` becomes its id);
        :meth:`encode` reads them as text unless ``allowed_special`` names them.
        """
        from tokpipe import hf_dir

        roles = {"bos_token": bos_token, "eos_token": eos_token, "unk_token": unk_token, "pad_token": pad_token,
                 "cls_token": cls_token, "sep_token": sep_token, "mask_token": mask_token}
        files = hf_dir.hf_files(self._core.to_json(), self._core.token_to_id, roles, model_max_length,
                                padding_side)
        where = _where(directory)
        if not isinstance(where, storage.RemotePath):
            Path(where).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            target = where / name if isinstance(where, storage.RemotePath) else os.path.join(where, name)
            with _written(target) as local, open(local, "w", encoding="utf-8", newline="") as f:
                f.write(text)

    def save_tiktoken(self, path: StrPath) -> None:
        """Write the ordinary tokens as a ``.tiktoken`` rank file (special tokens are not part
        of that format; pass them to ``tiktoken.Encoding`` yourself)."""
        with _written(path) as name:
            self._core.save_tiktoken(name)

    def save_sentencepiece(self, path: StrPath) -> None:
        """Write a Unigram tokenizer as a sentencepiece ``.model`` that
        ``sentencepiece.SentencePieceProcessor`` loads and encodes alike. A tokenizer loaded
        from a ``.model`` is written back byte for byte."""
        with _written(path) as name:
            self._core.save_sentencepiece(name)

    def sentencepiece_bytes(self) -> bytes:
        """The ``.model`` bytes :meth:`save_sentencepiece` writes."""
        return self._core.to_sentencepiece_bytes()

    def save_vocab(self, path: StrPath) -> None:
        """Write a WordPiece vocabulary as BERT's ``vocab.txt`` (one token a line, in id order)."""
        with _written(path) as name:
            self._core.save_vocab(name)

    def __repr__(self) -> str:
        return (f"Tokenizer(model={self.model_type}, vocab_size={self.vocab_size}, "
                f"special_tokens={len(self.special_tokens)})")


def _where(path: Union[StrPath, storage.RemotePath]) -> Union[str, storage.RemotePath]:
    """A local path as given (so messages name it as the caller wrote it), or the
    :class:`~tokpipe.storage.RemotePath` of an object-storage URL (``file://`` is local)."""
    if isinstance(path, storage.RemotePath):
        return path
    name = os.fspath(path)
    if not storage.is_url(name):
        return name
    where = storage.location(name)
    return where if isinstance(where, storage.RemotePath) else os.fspath(where)


def _shown(where: Union[str, Path, storage.RemotePath]) -> str:
    """How a message names a file: the path, or the URL without anything like a credential."""
    return storage.redact(str(where)) if isinstance(where, storage.RemotePath) else os.fspath(where)


@contextmanager
def _local_files() -> Iterator[Callable[[Union[str, Path, storage.RemotePath]], str]]:
    """A function that gives the local path to read for a path or URL (a remote file is
    fetched into the cache by ``storage.local_copy``); an error raised in the block that names
    one of those local copies names its URL instead (``storage.naming_urls``)."""
    copies: dict[str, str] = {}

    def fetch(where: Union[str, Path, storage.RemotePath]) -> str:
        if not isinstance(where, storage.RemotePath):
            return os.fspath(where)
        local = os.fspath(storage.local_copy(where))
        copies[local] = str(where)
        return local

    with storage.naming_urls(copies):
        yield fetch


@contextmanager
def _written(path: Union[StrPath, storage.RemotePath]) -> Iterator[str]:
    """The local path to write ``path``'s content to: ``path`` itself (its folder made when
    missing, as `tokpipe clean -o` makes its own: a trainer must not fail on ``-o
    new/tokenizer.json`` after the training), or for a URL a local temporary file that is
    uploaded when the block ends without an error."""
    where = _where(path)
    if not isinstance(where, storage.RemotePath):
        Path(where).parent.mkdir(parents=True, exist_ok=True)
        yield where
        return
    from tokpipe.pipeline import fs

    with fs.atomic(where) as tmp:
        yield os.fspath(tmp)


def _seed(seed: int | None) -> int:
    """A 64-bit seed: the one given (taken modulo 2**64), or a fresh random one."""
    return secrets.randbits(64) if seed is None else seed % (1 << 64)


def _is_token_id(value: int) -> bool:
    """Whether ``value`` can be a token id at all: ids are u32 in the core, and a value outside
    that range would raise OverflowError in the binding instead of a TokpipeError."""
    return 0 <= value < 1 << 32
