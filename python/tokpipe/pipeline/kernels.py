"""The one gate to the Rust kernels in ``tokpipe._core``: every stage reaches them through the
typed functions here, never through ``_core`` itself.

A kernel takes a string column through the Arrow C data interface (the capsules of
``__arrow_c_array__()``; any chunking, slicing, ``string`` or ``large_string``) without copying
it, and turns the kernel's bytes back into numpy arrays of the right type and shape, or into
Arrow arrays. The layouts the kernels write (little-endian, column after column or row after
row) are spelled here alone.

(Over 500 lines: it is the one gate, so every kernel's typed wrapper lives here, with the
buffer conversions they share: ``numpy_of``, ``arrow_of``, ``flags_of``, ``string_array``.)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from tokpipe import _core
from tokpipe.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["arrow_strings", "list_buffers", "numpy_of", "flags_of", "arrow_of", "repeat_string", "string_array",
           "exact_dedup_keys",
           "minhash_signatures", "minhash_dedup_keys", "lsh_check_texts", "paragraph_keys",
           "paragraph_drop_lines", "paragraph_decide", "ParagraphDecision", "TEXT_STATS_FEATURES", "text_stats",
           "sentence_keys", "sentence_decide", "SentenceDecision", "sentence_filter",
           "blocklist_counts", "c4_quality", "C4Rewrite", "c4_badwords", "fineweb_stats", "FINEWEB_STATS",
           "word_counts", "gopher_quality_stats", "gopher_repetition_stats", "PII_TYPES", "pii_find", "pii_scrub",
           "PiiScrub", "fasttext_prepare", "fasttext_scores", "load_fasttext_model", "MINHASH_REPRESENTATIVES", "minhash_optimal_params",
           "LshIndex", "lsh_index", "DecontIndex", "decont_index", "decont_add", "decont_scan", "url_verdicts"]


def arrow_strings(column: pa.Array | pa.ChunkedArray) -> tuple[tuple[object, object], int, bool]:
    """(capsules, rows, wide) of a string column: the ``__arrow_c_array__()`` capsule pair a
    kernel reads the column through (the Arrow C data interface: zero-copy, a slice's offset
    included), its number of rows, and whether it is a ``large_string`` (64-bit offsets).
    A chunked column is combined first (one copy when it has several chunks)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_large_string(column.type):
        wide = True
    elif pa.types.is_string(column.type):
        wide = False
    else:
        raise ArgumentTypeError(f"expected a string column, got {column.type}")
    return column.__arrow_c_array__(), len(column), wide


# Numbers between numpy and Arrow through their buffers. pyarrow's own conversions
# (`pa.array(ndarray)`, `Array.to_numpy()`, even `np.asarray(array)`) go through its pandas
# shim, whose first use imports pandas: about 0.3 s of CPU in every process, more than a
# tokenize run spends on some of its phases. These are zero-copy both ways.


def numpy_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a primitive Arrow array without nulls (ints, floats) as a numpy view."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if array.null_count:
        raise InvalidArgumentError("numpy_of needs an array without nulls")
    dtype = np.dtype(str(array.type))
    data = array.buffers()[1]
    if data is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype)[array.offset: array.offset + len(array)]


def flags_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as a numpy ``bool`` array, a null as False (Arrow packs booleans
    in bits: this is one cast, and no pandas)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if array.null_count:
        array = array.fill_null(False)
    return numpy_of(array.cast(pa.uint8())).astype(bool)


def arrow_of(values: np.ndarray, arrow_type: pa.DataType | None = None) -> pa.Array:
    """A numpy array of plain numbers as an Arrow array (of ``arrow_type``, which must have
    the same width, e.g. int32 for uint32 ids; the numpy type's own when None), sharing its
    memory when it is contiguous."""
    values = np.ascontiguousarray(values)
    arrow_type = arrow_type or pa.from_numpy_dtype(values.dtype)
    if arrow_type.bit_width != 8 * values.dtype.itemsize or values.dtype == np.bool_:
        raise ArgumentTypeError(f"cannot view {values.dtype} as {arrow_type}")
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def repeat_string(value: str, n: int) -> pa.Array:
    """A ``string`` array of ``n`` copies of ``value``."""
    raw = value.encode("utf-8")
    offsets = np.arange(0, (n + 1) * len(raw), len(raw) or 1, dtype=np.int32)[: n + 1] if raw \
        else np.zeros(n + 1, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def string_array(values: Sequence[str | None]) -> pa.Array:
    """A ``string`` array of ``values`` (None: a null), built from its buffers: ``pa.array``
    of a list imports pandas too (see above), 0.8 s of CPU in every process that calls it.
    For short values (reasons, labels): under 2 GiB in all, as ``string``'s offsets allow."""
    raw = [b"" if v is None else v.encode("utf-8") for v in values]
    if sum(map(len, raw)) >= 1 << 31:
        raise InvalidArgumentError("string_array holds under 2 GiB of text; use a large_string column")
    offsets = np.zeros(len(raw) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)), out=offsets[1:])
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(raw))
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None
    return pa.StringArray.from_buffers(len(raw), pa.py_buffer(offsets), pa.py_buffer(b"".join(raw)), validity,
                                       int(nulls.sum()))


def list_buffers(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of a ``large_list`` column of a primitive type: the int64 offsets of
    just this array's rows (a view, honouring a slice's offset) and the values they index
    (a view of the child array, honouring its offset)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_large_list(column.type):
        raise ArgumentTypeError(f"expected a large_list column, got {column.type}")
    child = column.values
    dtype = np.dtype(str(child.type))  # uint16, uint32, ...: numpy's names for Arrow's
    offsets_buffer = column.buffers()[1]
    if offsets_buffer is None:  # a zero-length array may have no buffers
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=dtype)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[column.offset: column.offset + len(column) + 1]
    data = child.buffers()[1]
    values = np.frombuffer(data, dtype=dtype)[child.offset: child.offset + len(child)] if data is not None \
        else np.zeros(0, dtype=dtype)
    return offsets, values


def exact_dedup_keys(column: pa.Array | pa.ChunkedArray, lowercase: bool, collapse_whitespace: bool) -> pa.Array:
    """BLAKE2b-128 of each row's normalised text (``str.lower``, whitespace runs made one
    space, ends stripped), computed in Rust on all cores; null rows hash as empty text."""
    strings, rows, _ = arrow_strings(column)
    digests = _core.exact_dedup_keys(strings, lowercase, collapse_whitespace)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), rows, [None, pa.py_buffer(digests)])


def lsh_check_texts(index: LshIndex, texts: pa.Array | pa.ChunkedArray, shingle: str = "word", ngram: int = 5,
                    char_ngram: int = 5, lowercase: bool = True) -> None:
    """Hands ``index`` the texts of the next documents its ``check_documents`` gave, shingled
    as ``minhash_signatures`` shingles, for its exact check."""
    strings, _, _ = arrow_strings(texts)
    index.add_check_texts(strings, shingle, ngram, char_ngram, lowercase)


def minhash_signatures(column: pa.Array | pa.ChunkedArray, num_perm: int = 128, seed: int = 1,
                       scheme: str = "affine32", shingle: str = "word", ngram: int = 5, char_ngram: int = 5,
                       lowercase: bool = True, hashfunc: str = "sha1") -> np.ndarray:
    """MinHash signatures of each row, shape ``(rows, num_perm)``, uint32: equal to
    ``datasketch.MinHash(num_perm, seed, scheme=scheme)`` updated with the row's shingles
    (see ``tokpipe_core::minhash``); computed in Rust on all cores. ``hashfunc="xxh3"``
    matches datasketch given ``hashfunc=lambda b: xxhash.xxh3_64_intdigest(b) & 0xFFFFFFFF``."""
    strings, rows, _ = arrow_strings(column)
    raw = _core.minhash_signatures(strings, num_perm, seed, scheme, shingle, ngram, char_ngram, lowercase,
                                   hashfunc)
    return np.frombuffer(raw, dtype="<u4").reshape(rows, num_perm)


#: Members of a band bucket each member is paired with (``tokpipe_core::minhash::banding::
#: MAX_REPRESENTATIVES``).
MINHASH_REPRESENTATIVES: int = _core.MINHASH_REPRESENTATIVES

#: The banding index of ``minhash_dedup``'s decision (Rust, spills to disk past its memory).
LshIndex = _core.LshIndex


def minhash_optimal_params(threshold: float, num_perm: int, false_positive_weight: float,
                           false_negative_weight: float) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive and false negative probabilities
    at ``threshold`` (datasketch's ``MinHashLSH`` choice)."""
    bands, rows = _core.minhash_optimal_params(threshold, num_perm, false_positive_weight, false_negative_weight)
    return bands, rows


def lsh_index(scratch: str | os.PathLike[str], num_perm: int, bands: int, rows: int, verify: str, threshold: float,
              keep: str, memory_bytes: int) -> LshIndex:
    """An empty banding index over signatures of ``num_perm`` values cut into ``bands`` bands
    of ``rows``, spilling into ``scratch`` past ``memory_bytes``."""
    return _core.LshIndex(scratch, num_perm, bands, rows, verify, threshold, keep, memory_bytes)


def minhash_dedup_keys(column: pa.Array | pa.ChunkedArray, num_perm: int, seed: int, scheme: str, shingle: str,
                       ngram: int, char_ngram: int, lowercase: bool, hashfunc: str = "sha1") -> pa.Array:
    """Per row: its UTF-8 length (u64) then its signature (u32s), little-endian, as one
    fixed-size binary value of ``8 + 4 * num_perm`` bytes."""
    strings, rows, _ = arrow_strings(column)
    raw = _core.minhash_dedup_keys(strings, num_perm, seed, scheme, shingle, ngram, char_ngram, lowercase,
                                   hashfunc)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(8 + 4 * num_perm), rows,
                                                [None, pa.py_buffer(raw)])


def paragraph_keys(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Per row, one 12-byte key per ``\\n``-separated line: its CCNet hash (u64, 0 for a
    blank line) and its length in bytes (u32), as a ``large_binary`` value."""
    strings, rows, _ = arrow_strings(column)
    keys, key_offsets = _core.paragraph_keys(strings)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), rows,
                                            [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)])


def _flag_buffers(flags: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, Any]:
    """A binary column of per-unit flag bytes as (its row offsets, int32; its data buffer, or
    ``b""`` when it has none), without copying the flags."""
    if isinstance(flags, pa.ChunkedArray):
        flags = flags.combine_chunks()
    if not pa.types.is_binary(flags.type):
        flags = flags.cast(pa.binary())
    _, offsets, data = flags.buffers()
    offsets_np = np.frombuffer(offsets, dtype=np.int32)[flags.offset: flags.offset + len(flags) + 1] \
        if offsets is not None else np.zeros(1, dtype=np.int32)
    return offsets_np, data if data is not None else b""


def paragraph_drop_lines(column: pa.Array | pa.ChunkedArray, flags: pa.Array) -> pa.Array:
    """Each row without the lines whose flag (one byte per line, in ``flags``, a binary
    column) is 1; the column keeps its type."""
    strings, rows, _ = arrow_strings(column)
    flag_offsets_np, flag_data = _flag_buffers(flags)
    text, text_offsets = _core.paragraph_drop_lines(strings, flag_offsets_np, flag_data)
    out = pa.LargeStringArray.from_buffers(rows, pa.py_buffer(text_offsets), pa.py_buffer(text))
    if isinstance(column, pa.ChunkedArray):
        return out.cast(column.type)
    return out.cast(column.type) if column.type != out.type else out


def _strings(rows: int, offsets: bytes, data: bytes, wide: bool) -> pa.Array:
    """A ``large_string`` (``wide``) or ``string`` array of a kernel's offsets and data."""
    array_type = pa.LargeStringArray if wide else pa.StringArray
    return array_type.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data))


def _u64(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype="<u8")


class ParagraphDecision(NamedTuple):
    #: Per line of every document, in order: 1 to drop it (it repeats an earlier one).
    drop: np.ndarray
    #: Per document: whether every line of it was dropped.
    emptied: np.ndarray
    paragraphs: int
    removed: int
    removed_bytes: int


def paragraph_decide(keys: np.ndarray, lines: np.ndarray) -> ParagraphDecision:
    """Which lines repeat an earlier line of the corpus: ``keys``, the 12-byte line keys of
    ``paragraph_keys`` of every document back to back (uint8), and ``lines``, each document's
    number of lines (uint32)."""
    drop, emptied, paragraphs, removed, removed_bytes = _core.paragraph_decide(keys, lines)
    return ParagraphDecision(np.frombuffer(drop, dtype=np.uint8), np.frombuffer(emptied, dtype=np.uint8).astype(bool),
                             paragraphs, removed, removed_bytes)


def sentence_keys(column: pa.Array | pa.ChunkedArray, n: int, splitter: str) -> pa.Array:
    """Per row, one 12-byte key per sentence (``splitter``: ``en`` or ``cjk``): the hash of
    the ``n``-sentence span starting there (u64, 0 for none) and the sentence's length in bytes
    (u32), as a ``large_binary`` value."""
    strings, rows, _ = arrow_strings(column)
    keys, key_offsets = _core.sentence_keys(strings, n, splitter)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), rows,
                                            [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)])


class SentenceDecision(NamedTuple):
    #: Per sentence of every document, in order: 1 to remove it (a span seen earlier holds it).
    drop: np.ndarray
    #: Per document: whether some sentence of it is removed.
    touched: np.ndarray
    sentences: int
    spans_removed: int
    sentences_removed: int
    removed_bytes: int


def sentence_decide(keys: np.ndarray, counts: np.ndarray, n: int) -> SentenceDecision:
    """Which sentences belong to an ``n``-sentence span seen earlier in the corpus: ``keys``,
    the 12-byte keys of ``sentence_keys`` of every document back to back (uint8), and
    ``counts``, each document's number of sentences (uint32)."""
    drop, touched, sentences, spans, removed, removed_bytes = _core.sentence_decide(keys, counts, n)
    return SentenceDecision(np.frombuffer(drop, dtype=np.uint8), np.frombuffer(touched, dtype=np.uint8).astype(bool),
                            sentences, spans, removed, removed_bytes)


def sentence_filter(column: pa.Array | pa.ChunkedArray, flags: pa.Array, splitter: str, min_doc_words: int,
                    min_num_sentences: int) -> tuple[pa.Array, np.ndarray]:
    """Each row without the sentences whose flag (one byte per sentence, in ``flags``, a
    binary column) is 1, with the column's type, and per row whether it is kept (datatrove's
    ``min_doc_words`` / ``min_num_sentences`` rule for a changed document)."""
    strings, rows, _ = arrow_strings(column)
    flag_offsets_np, flag_data = _flag_buffers(flags)
    text, text_offsets, keep = _core.sentence_filter(strings, flag_offsets_np, flag_data, splitter,
                                                     min_doc_words, min_num_sentences)
    out = pa.LargeStringArray.from_buffers(rows, pa.py_buffer(text_offsets), pa.py_buffer(text))
    return out.cast(column.type) if column.type != out.type else out, np.frombuffer(keep, dtype=np.uint8).astype(bool)


#: The features of ``text_stats``, in the order the kernel lays them out.
TEXT_STATS_FEATURES: tuple[str, ...] = tuple(_core.text_stats_features())


def text_stats(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Every ``TEXT_STATS_FEATURES`` feature of each row (null rows read as empty text):
    float64, shape ``(features, rows)``."""
    strings, rows, _ = arrow_strings(column)
    raw = np.frombuffer(_core.text_stats(strings), dtype="<f8")
    return raw.reshape(len(TEXT_STATS_FEATURES), rows)


def blocklist_counts(column: pa.Array | pa.ChunkedArray, entries: Sequence[str], ignore_case: bool,
                     word_boundaries: bool) -> tuple[np.ndarray, np.ndarray]:
    """(matches of ``entries``, script-aware words) per row, as int64 arrays."""
    strings, _, _ = arrow_strings(column)
    hits, words = _core.blocklist_counts(strings, list(entries), ignore_case, word_boundaries)
    return _u64(hits).astype(np.int64), _u64(words).astype(np.int64)


class C4Rewrite(NamedTuple):
    #: Each row's kept lines joined by newlines; the column's own string type.
    text: pa.Array
    #: Per row: 0 kept, else 1 + the index of the document rule that dropped it (lorem ipsum,
    #: curly bracket, too few sentences).
    drops: np.ndarray
    #: Lines seen, dropped per line rule, kept: in the kernel's order.
    line_stats: tuple[int, ...]


def c4_quality(column: pa.Array | pa.ChunkedArray, remove_citations: bool, filter_no_terminal_punct: bool,
               min_num_sentences: int, min_words_per_line: int, max_word_length: int, filter_lorem_ipsum: bool,
               filter_javascript: bool, filter_curly_bracket: bool, filter_policy: bool) -> C4Rewrite:
    """C4's line and document rules over each row (see ``stages.quality_c4.C4Quality``)."""
    strings, rows, wide = arrow_strings(column)
    new_offsets, new_data, drops, line_stats = _core.c4_quality(
        strings, remove_citations, filter_no_terminal_punct, min_num_sentences, min_words_per_line,
        max_word_length, filter_lorem_ipsum, filter_javascript, filter_curly_bracket, filter_policy)
    return C4Rewrite(_strings(rows, new_offsets, new_data, wide), np.frombuffer(drops, dtype=np.uint8),
                     tuple(line_stats))


def c4_badwords(column: pa.Array | pa.ChunkedArray, words: Sequence[str], word_boundaries: bool) -> np.ndarray:
    """Per row, whether its lower-cased text holds one of ``words`` (bool)."""
    strings, _, _ = arrow_strings(column)
    return np.frombuffer(_core.c4_badwords(strings, list(words), word_boundaries),
                         dtype=np.uint8).astype(bool)


#: The rows of ``fineweb_stats``, in the kernel's order.
FINEWEB_STATS = ("lines", "punct_lines", "short_lines", "dup_line_chars", "chars", "newlines", "words")


def fineweb_stats(column: pa.Array | pa.ChunkedArray, stop_chars: Sequence[str], short_line_length: int,
                  language: str | None) -> np.ndarray:
    """The counts FineWeb's rules read, uint64 of shape ``(len(FINEWEB_STATS), rows)``;
    ``words`` is 0 when ``language`` is None (words not counted)."""
    strings, rows, _ = arrow_strings(column)
    raw = _u64(_core.fineweb_stats(strings, list(stop_chars), short_line_length, language))
    return raw.reshape(len(FINEWEB_STATS), rows)


def word_counts(column: pa.Array | pa.ChunkedArray, language: str, selected: np.ndarray) -> np.ndarray:
    """The words of the rows the boolean mask ``selected`` picks (0 for the others), uint64."""
    strings, _, _ = arrow_strings(column)
    return _u64(_core.word_counts(strings, language, np.asarray(selected, np.uint8).tobytes()))


def gopher_quality_stats(column: pa.Array | pa.ChunkedArray, language: str, punctuation: str,
                         stop_words: Sequence[str], width: int) -> np.ndarray:
    """Gopher's quality counts of each row, uint64 of shape ``(rows, width)`` (``width``: the
    counts per row, ``stages.quality_gopher.QUALITY_STATS``)."""
    strings, rows, _ = arrow_strings(column)
    raw = _core.gopher_quality_stats(strings, language, punctuation, list(stop_words))
    return _u64(raw).reshape(rows, width)


def gopher_repetition_stats(column: pa.Array | pa.ChunkedArray, language: str, top_n: Sequence[int],
                            dup_n: Sequence[int], width: int) -> np.ndarray:
    """Gopher's repetition counts of each row, uint64 of shape ``(rows, width)``: the fixed
    counts, then one per ``top_n`` size, then one per ``dup_n`` size."""
    strings, rows, _ = arrow_strings(column)
    raw = _core.gopher_repetition_stats(strings, language, list(top_n), list(dup_n))
    return _u64(raw).reshape(rows, width)


#: The PII types, in the kernels' order.
PII_TYPES: tuple[str, ...] = tuple(_core.pii_types())


def pii_find(text: str, types: Sequence[str], only_public_ip: bool) -> list[tuple[str, int, int]]:
    """(type, start, end) of each PII span of ``text`` (code points), overlaps resolved."""
    return [tuple(span) for span in _core.pii_find(text, list(types), only_public_ip)]


class PiiScrub(NamedTuple):
    #: The scrubbed text, in the column's own string type.
    text: pa.Array
    #: Per row, a JSON object of what was found (same string type).
    metadata: pa.Array
    #: Spans found per PII type per row: uint64 of shape ``(len(PII_TYPES), rows)``.
    counts: np.ndarray
    #: Per row, whether the text holds more PII than ``max_per_1000_chars`` allows (bool).
    drops: np.ndarray


def pii_scrub(column: pa.Array | pa.ChunkedArray, types: Sequence[str], actions: Sequence[str], only_public_ip: bool,
              salt: str, max_per_1000_chars: float) -> PiiScrub:
    """Each row with the PII of ``types`` treated by the matching ``actions`` (tag, mask,
    hash, dummy, drop_doc, keep)."""
    strings, n, wide = arrow_strings(column)
    new_offsets, new_data, meta_offsets, meta_data, counts, drops = _core.pii_scrub(
        strings, list(types), list(actions), only_public_ip, salt, max_per_1000_chars)
    # The kernel writes 64-bit offsets whatever the column's.
    text = _strings(n, new_offsets, new_data, True)
    metadata = _strings(n, meta_offsets, meta_data, True)
    if not wide:
        text, metadata = text.cast(pa.string()), metadata.cast(pa.string())
    return PiiScrub(text, metadata, _u64(counts).reshape(len(PII_TYPES), n),
                    np.frombuffer(drops, dtype=np.uint8).astype(bool))


def fasttext_prepare(column: pa.Array | pa.ChunkedArray, max_chars: int | None) -> pa.Array:
    """Each row in the one-line form a fastText quality model reads (see ``tokpipe.quality``),
    as a ``large_string`` array."""
    strings, rows, _ = arrow_strings(column)
    out_offsets, out_data = _core.fasttext_prepare(strings, max_chars)
    return _strings(rows, out_offsets, out_data, True)


def load_fasttext_model(data: bytes, name: str) -> _core.FastTextModel:
    """A fastText model (``.bin`` or quantized ``.ftz``) read from its bytes; ``name`` is the
    file named in errors."""
    return _core.FastTextModel(data, name)


def fasttext_scores(model: _core.FastTextModel, column: pa.Array | pa.ChunkedArray, positive: int, prepare: bool,
                    max_chars: int | None) -> np.ndarray:
    """The probability ``model`` gives label ``positive`` for each row (float64); ``prepare``:
    the rows are raw text, put in the model's one-line form first."""
    strings, _, _ = arrow_strings(column)
    return np.frombuffer(model.quality_scores(strings, positive, prepare, max_chars), dtype="<f8")


def fasttext_top_labels(model: _core.FastTextModel, column: pa.Array | pa.ChunkedArray,
                        max_chars: int | None) -> tuple[np.ndarray, np.ndarray]:
    """fastText's top label of each row's first ``max_chars`` characters, newlines read as
    spaces: (label index, int32, -1 when none; its probability, float32)."""
    strings, _, _ = arrow_strings(column)
    labels, probs = model.top_labels(strings, max_chars)
    return np.frombuffer(labels, dtype="<i4"), np.frombuffer(probs, dtype="<f4")


#: The compiled rules of a ``url_filter`` stage (``tokpipe_core::text::urls::UrlRules``).
UrlRules = _core.UrlRules


def url_rules(lists: dict[str, tuple[list[str], list[str]]], block_url_patterns: Sequence[str],
              soft_word_threshold: int) -> UrlRules:
    """The rules of ``lists``: per list name (``block_domains``, ``allow_domains``,
    ``block_urls``, ``banned_words``, ``banned_subwords``, ``soft_banned_words``), its
    (entries, files); the files are read in Rust, without the GIL."""
    def get(key: str) -> tuple[list[str], list[str]]:
        return lists.get(key, ([], []))

    return _core.UrlRules(*get("block_domains"), *get("allow_domains"), *get("block_urls"), list(block_url_patterns),
                          get("banned_words")[0], get("banned_subwords")[0], get("soft_banned_words")[0],
                          soft_word_threshold)


def url_verdicts(rules: UrlRules, column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """One verdict code per row of a URL column (null rows read as empty: missing), uint8;
    the codes are ``tokpipe_core::text::urls::UrlVerdict``'s."""
    strings, _, _ = arrow_strings(column)
    return np.frombuffer(rules.decide(strings), dtype=np.uint8)


#: The n-gram index of the ``decontaminate`` stage (``tokpipe_core::text::decont``).
DecontIndex = _core.DecontIndex


def decont_index(n: int, min_words: int) -> DecontIndex:
    """An empty decontamination index of ``n``-grams of normalised words; a record of
    ``min_words`` to ``n - 1`` words is indexed whole."""
    return _core.DecontIndex(n, min_words)


class DecontAdded(NamedTuple):
    records: int
    #: Records indexed (at least ``min_words`` words).
    usable: int
    #: Records of fewer than ``min_words`` words (but some), skipped.
    short: int
    #: Records without a word, skipped.
    empty: int
    #: n-gram keys new to the index.
    ngrams: int


def decont_add(index: DecontIndex, benchmark: int, column: pa.Array | pa.ChunkedArray) -> DecontAdded:
    """Adds each row of a string column as a record of benchmark number ``benchmark``."""
    strings, _, _ = arrow_strings(column)
    return DecontAdded(*index.add(benchmark, strings))


def decont_scan(index: DecontIndex, column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Each row's first match in the index (null rows read as empty text): the benchmark's
    number (int64, -1 for none) and the matching n-gram's normalised words (a
    ``large_string`` array, null for none)."""
    strings, rows, _ = arrow_strings(column)
    ids, offsets, data = index.scan(strings)
    benchmark = np.frombuffer(ids, dtype="<u4").astype(np.int64) - 1
    valid = pa.py_buffer(np.packbits(benchmark >= 0, bitorder="little"))
    ngrams = pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data), valid)
    return benchmark, ngrams
