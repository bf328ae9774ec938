"""The typed :class:`Tokenizer` users import.

It wraps ``tokpipe._core.Tokenizer`` (Rust) and adds nothing but argument handling and
documentation, so every call goes straight to Rust. Long inputs and batches are encoded with
the GIL released.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Literal, Union

from tokpipe import _core

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Tokenizer", "AllowedSpecial"]

#: ``"all"`` or a collection of special-token strings that ``encode`` may turn into their ids.
AllowedSpecial = Union[Literal["all"], Collection[str]]

StrPath = Union[str, "os.PathLike[str]"]


class Tokenizer:
    """A tokenizer: normalizer, pre-tokenizer, model (byte-level BPE or WordPiece), special
    tokens, and for BERT the ``[CLS] … [SEP]`` post-processor and the WordPiece decoder.

    Build one with :meth:`from_file` (HF ``tokenizer.json``), :meth:`from_tiktoken`,
    :meth:`from_gpt2`, :meth:`from_wordpiece_vocab` (BERT ``vocab.txt``),
    :func:`tokpipe.train_bpe` or :func:`tokpipe.train_wordpiece`.
    """

    __slots__ = ("_core",)

    def __init__(self, core: _core.Tokenizer) -> None:
        self._core = core

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: StrPath) -> Tokenizer:
        """Load an HF ``tokenizer.json``: byte-level BPE or WordPiece (the model type is read
        from the file)."""
        return cls(_core.Tokenizer.from_file(os.fspath(path)))

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
        return cls(_core.Tokenizer.from_tiktoken(os.fspath(path), pattern, specials))

    @classmethod
    def from_gpt2(
        cls,
        encoder_json: StrPath,
        vocab_bpe: StrPath,
        special_tokens: Sequence[str] = ("<|endoftext|>",),
    ) -> Tokenizer:
        """Load GPT-2's ``encoder.json`` and ``vocab.bpe``. Entries named in ``special_tokens``
        become special tokens (matched only when allowed), as in tiktoken's ``r50k_base``."""
        return cls(_core.Tokenizer.from_gpt2(os.fspath(encoder_json), os.fspath(vocab_bpe), list(special_tokens)))

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
        return cls(_core.Tokenizer.from_wordpiece_vocab(
            os.fspath(path), lowercase, strip_accents, clean_text, handle_chinese_chars, unk_token,
            continuing_subword_prefix, max_input_chars_per_word))

    # -- encoding ------------------------------------------------------------------------
    def encode(self, text: str, allowed_special: AllowedSpecial = (), add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``.

        Special tokens in the text are encoded as ordinary text unless ``allowed_special``
        names them (or is ``"all"``), like tiktoken's ``encode_ordinary`` by default.
        Added tokens that are not special (from an HF file) are always matched, as HF does.
        No special tokens are added unless ``add_special_tokens`` is set; then a BERT
        tokenizer gives ``[CLS] … [SEP]`` (HF's BertProcessing), a byte-level one adds none.
        """
        return self._core.encode(text, allowed_special or None, add_special_tokens)

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

        from tokpipe.pipeline.kernels import string_buffers

        if dtype not in ("uint16", "uint32"):
            raise ValueError(f"dtype must be 'uint16' or 'uint32', not {dtype!r}")
        offsets, data, wide = string_buffers(column)
        ids, bounds = self._core.encode_arrow(offsets, data, wide, num_threads, allowed_special or None,
                                              append_id, dtype == "uint16")
        value_type = pa.uint16() if dtype == "uint16" else pa.uint32()
        values = pa.Array.from_buffers(value_type, len(ids) // (2 if dtype == "uint16" else 4),
                                       [None, pa.py_buffer(ids)])
        return pa.LargeListArray.from_buffers(pa.large_list(value_type), len(offsets) - 1,
                                              [None, pa.py_buffer(bounds)], children=[values])

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; byte sequences that are not valid UTF-8 become U+FFFD. WordPiece
        tokenizers decode as HF does (tokens joined by spaces, ``##`` pieces glued, special
        tokens skipped)."""
        return self._core.decode(ids if isinstance(ids, list) else list(ids))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes ``ids`` stand for."""
        return self._core.decode_bytes(ids if isinstance(ids, list) else list(ids))

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
        """HF's model type: ``"BPE"`` or ``"WordPiece"``."""
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
        as ``"##ing"``, or a special token)."""
        return self._core.id_to_token(id)

    def token_to_id(self, token: str) -> int | None:
        """Inverse of :meth:`id_to_token`."""
        return self._core.token_to_id(token)

    def token_bytes(self, id: int) -> bytes | None:
        """The raw bytes of one token."""
        return self._core.token_bytes(id)

    def bytes_to_id(self, token: bytes) -> int | None:
        """The id of the token with exactly these bytes."""
        return self._core.bytes_to_id(token)

    # -- saving --------------------------------------------------------------------------
    def save(self, path: StrPath) -> None:
        """Write an HF ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file`` loads and that
        gives the same ids."""
        self._core.save(os.fspath(path))

    def to_str(self) -> str:
        """The ``tokenizer.json`` text."""
        return self._core.to_json()

    def save_tiktoken(self, path: StrPath) -> None:
        """Write the ordinary tokens as a ``.tiktoken`` rank file (special tokens are not part
        of that format; pass them to ``tiktoken.Encoding`` yourself)."""
        self._core.save_tiktoken(os.fspath(path))

    def save_vocab(self, path: StrPath) -> None:
        """Write a WordPiece vocabulary as BERT's ``vocab.txt`` (one token a line, in id order)."""
        self._core.save_vocab(os.fspath(path))

    def __repr__(self) -> str:
        return (f"Tokenizer(model={self.model_type}, vocab_size={self.vocab_size}, "
                f"special_tokens={len(self.special_tokens)})")
