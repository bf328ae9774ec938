"""``evaluate_tokenizers``: several tokenizers on the same documents, overall and per group.

The corpus is streamed in the pipeline's reader batches (:mod:`tokpipe.pipeline.readers`: text,
JSON Lines, Parquet and WARC files, folders, globs and URLs; a ``tokpipe clean`` output folder
stands for its kept shards). Each batch is encoded once per tokenizer with
:meth:`~tokpipe.Tokenizer.encode_arrow` (Rust, all cores, GIL released) and measured with numpy
over the flat ids: a ``bincount`` per group for the vocabulary, prefix sums for the per-document
fallback counts. Python touches each document once (the round trip: one ``decode`` call of the
document's ids), never each token.

What is measured, per tokenizer and group (:class:`Metrics`):

- characters, UTF-8 bytes and words per token; words are Unicode words (a Rust kernel: UAX
  #29's word boundaries, the segments holding a letter or digit, every Han or kana character a
  word of its own);
- fallback: the tokens that stand for text the vocabulary does not hold, i.e. the unknown token
  (WordPiece ``[UNK]``, Unigram ``<unk>``, a BPE's ``unk_token``) and sentencepiece's
  byte-fallback pieces ``<0x00>``..``<0xFF>``. A byte-level BPE (GPT-2, cl100k, o200k) has a
  token for every byte and never falls back: 0, and :attr:`TokenizerInfo.fallback` says so.
  Reported as the share of documents holding one, the share of bytes in such documents, and the
  share of tokens that are one;
- vocabulary use: the share of the vocabulary (``vocab_size`` ids, special tokens included)
  used at least once, and how many distinct tokens make 90% of all uses;
- the longest token used, by the length of its bytes (:meth:`~tokpipe.Tokenizer.token_bytes`:
  a WordPiece continuation's ``##`` and sentencepiece's ``▁`` count), beside the longest one in
  the vocabulary (:attr:`TokenizerInfo.longest_in_vocabulary`, added tokens left out);
- round trip: the share of documents with ``decode(encode(text)) == text``. A tokenizer that
  normalizes (BERT uncased lowercases, strips accents and decodes with spaces between words;
  sentencepiece applies NFKC and turns unknown characters into `` ⁇ ``) cannot round-trip most
  text, and the number says so rather than hiding it.

Groups (``by``): ``"language"`` (the input's language column, e.g. a ``tokpipe clean`` output's,
else the guess of :func:`tokpipe.tokeval.scripts.guess_languages`), ``"source"`` (a ``source``
column, else the input file's name) or ``"script"``
(:func:`tokpipe.tokeval.scripts.dominant_scripts`). At most :data:`MAX_GROUPS` groups are kept
apart, the first ones met; the documents of any later group count under ``(other)``.

Sampling (``max_documents``, ``max_bytes``) takes the first documents in input order (files in
the order given, a folder's files sorted), so the same arguments measure the same documents.

(Over 500 lines: the reading, the per-tokenizer tallies and the metrics are one pass over the
corpus and share its state; the result types are what the page and the command print.)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe import storage
from tokpipe.errors import InvalidArgumentError, NoDocumentsError
from tokpipe.tokenizer import Tokenizer

if TYPE_CHECKING:
    # Types only: the readers are imported where the corpus is read.
    from tokpipe.pipeline.readers import ReadError, ReaderOptions, Task

__all__ = ["evaluate_tokenizers", "Evaluation", "Metrics", "TokenizerInfo", "Token", "GROUPINGS", "MAX_GROUPS",
           "OTHER", "ALL", "TokenizerSpec", "CorpusSpec", "load_tokenizers"]

StrPath = Union[str, "os.PathLike[str]"]
#: A tokenizer to evaluate: a file :meth:`Tokenizer.from_file` opens (a path or URL), or a
#: :class:`Tokenizer`.
TokenizerSpec = Union[StrPath, Tokenizer]
#: The documents: one file, folder, glob or URL, or several.
CorpusSpec = Union[StrPath, Sequence[StrPath]]

#: The groupings ``by`` takes.
GROUPINGS = ("language", "source", "script")
#: Groups kept apart; later ones count under :data:`OTHER`. Each group holds a count per
#: vocabulary id and tokenizer (8 bytes each: 1.6 MB for o200k).
MAX_GROUPS = 32
#: The group of the documents past :data:`MAX_GROUPS` groups.
OTHER = "(other)"
#: The name of the whole corpus where groups are listed.
ALL = "all"

@dataclass(frozen=True)
class Token:
    """One vocabulary entry: its id, its bytes (:meth:`Tokenizer.token_bytes`) as text (bytes
    that are not UTF-8 as U+FFFD) and their length."""

    id: int
    text: str
    bytes: int


@dataclass(frozen=True)
class TokenizerInfo:
    """What is known of a tokenizer before any document: its name in the tables, where it
    came from, its model, vocabulary size, fallback tokens and longest token."""

    name: str
    path: str | None
    model: str
    vocab_size: int
    #: What counts as a fallback for this tokenizer, in words (``"none: byte-level ..."``).
    fallback: str
    #: Whether the tokenizer has any fallback token at all.
    falls_back: bool
    longest_in_vocabulary: Token | None


@dataclass(frozen=True)
class Metrics:
    """One tokenizer on one group of documents (see the module's notes for each measure)."""

    documents: int
    chars: int
    bytes: int
    words: int
    tokens: int
    #: Tokens that are the unknown token or a byte-fallback piece.
    fallback_tokens: int
    #: Documents holding at least one fallback token, and their bytes.
    fallback_documents: int
    fallback_document_bytes: int
    #: Documents with ``decode(encode(text)) == text``.
    round_trips: int
    #: Distinct ids used, and how many of the most used ones make 90% of the uses.
    distinct_tokens: int
    tokens_for_90: int
    vocab_size: int
    longest_used: Token | None

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens if self.tokens else 0.0

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0

    @property
    def fallback_document_share(self) -> float:
        return self.fallback_documents / self.documents if self.documents else 0.0

    @property
    def fallback_byte_share(self) -> float:
        return self.fallback_document_bytes / self.bytes if self.bytes else 0.0

    @property
    def fallback_token_share(self) -> float:
        return self.fallback_tokens / self.tokens if self.tokens else 0.0

    @property
    def vocabulary_used(self) -> float:
        """The share of the vocabulary used at least once."""
        return self.distinct_tokens / self.vocab_size if self.vocab_size else 0.0

    @property
    def round_trip_share(self) -> float:
        return self.round_trips / self.documents if self.documents else 0.0


@dataclass(frozen=True)
class Evaluation:
    """The result of :func:`evaluate_tokenizers`."""

    tokenizers: list[TokenizerInfo]
    #: The grouping (``"language"``, ``"source"``, ``"script"``) or None.
    by: str | None
    #: Where the groups came from, in words (``"the language column"``, ``"script guess"``).
    grouped_from: str | None
    #: Group names, the most bytes first; ``[ALL]`` without ``by``.
    groups: list[str]
    #: Tokenizer name to its metrics on the whole corpus.
    overall: dict[str, Metrics]
    #: Group to tokenizer name to metrics.
    per_group: dict[str, dict[str, Metrics]]
    documents: int
    bytes: int
    #: Input records that could not be read (set aside, as the pipeline does).
    unreadable: int
    #: How the documents were sampled, in words; None when all were read.
    sampled: str | None
    #: Seconds of the whole evaluation, and per tokenizer the seconds spent encoding.
    seconds: float
    encode_seconds: dict[str, float] = field(default_factory=dict)


def load_tokenizers(tokenizers: Sequence[TokenizerSpec] | Mapping[str, TokenizerSpec]
                    ) -> dict[str, tuple[Tokenizer, str | None]]:
    """Name to (tokenizer, path): files load with :meth:`Tokenizer.from_file` and are named by
    their file name (with the folder above where two share one); a mapping names them itself;
    objects are ``tokenizer 1``, ``tokenizer 2``..."""
    if isinstance(tokenizers, Mapping):
        given = list(tokenizers.items())
    else:
        given = [(None, spec) for spec in tokenizers]
    if not given:
        raise InvalidArgumentError("no tokenizer to evaluate")
    names = _names([spec for _, spec in given])
    out: dict[str, tuple[Tokenizer, str | None]] = {}
    for (name, spec), default in zip(given, names):
        name = name or default
        if name in out:
            raise InvalidArgumentError(f"two tokenizers are named {name!r}")
        if isinstance(spec, Tokenizer):
            out[name] = (spec, None)
        else:
            out[name] = (Tokenizer.from_file(spec), storage.redact(os.fspath(spec)))
    return out


def _names(specs: Sequence[TokenizerSpec]) -> list[str]:
    # Names and paths are printed, in the page and the JSON: a URL's credentials are not.
    paths = [None if isinstance(s, Tokenizer) else storage.redact(os.fspath(s)).rstrip("/") for s in specs]
    base = [p.rsplit("/", 1)[-1] if p is not None else "" for p in paths]
    names = []
    for n, (path, name) in enumerate(zip(paths, base)):
        if path is None:
            names.append(f"tokenizer {n + 1}")
        elif base.count(name) > 1:
            names.append("/".join(path.split("/")[-2:]))
        else:
            names.append(name)
    return names


def evaluate_tokenizers(tokenizers: Sequence[TokenizerSpec] | Mapping[str, TokenizerSpec], corpus: CorpusSpec, *,
                        by: Literal["language", "source", "script"] | None = None, text_field: str = "text",
                        language_field: str = "language", split: str = "none", max_documents: int | None = None,
                        max_bytes: int | None = None, strict: bool = False,
                        num_threads: int | None = None) -> Evaluation:
    """Measure ``tokenizers`` on the documents of ``corpus`` (see the module's notes).

    ``tokenizers``: files (anything :meth:`Tokenizer.from_file` opens), :class:`Tokenizer`
    objects, or a mapping of names to either. ``by``: ``"language"``, ``"source"``,
    ``"script"`` or None. ``text_field``: the text's field in JSONL and Parquet input;
    ``language_field``: the column ``by="language"`` reads where the input has it. ``split``:
    how a ``.txt`` file becomes documents (``"none"``: one per file, ``"lines"``,
    ``"paragraphs"``). ``max_documents`` / ``max_bytes``: read only the first documents, in
    input order, up to these many. ``strict``: fail on an unreadable record instead of setting
    it aside. ``num_threads``: encoding threads (all cores when None).

    Raises :class:`~tokpipe.CorpusError` for a missing or empty corpus and
    :class:`~tokpipe.errors.NoDocumentsError` when no document could be read.
    """
    from tokpipe.pipeline.readers import ReaderOptions, plan_tasks
    from tokpipe.pipeline.tokenize.run import expand_inputs

    if by is not None and by not in GROUPINGS:
        raise InvalidArgumentError(f"by must be one of {', '.join(GROUPINGS)} or None, not {by!r}")
    for name, limit in (("max_documents", max_documents), ("max_bytes", max_bytes)):
        if limit is not None and limit < 1:
            raise InvalidArgumentError(f"{name} must be at least 1, not {limit}")
    started = time.perf_counter()
    inputs = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    options = ReaderOptions(text_field=text_field, split=split, strict=strict)
    tasks = plan_tasks(expand_inputs([os.fspath(i) for i in inputs]), options)
    loaded = load_tokenizers(tokenizers)
    states = {name: _TokenizerState(name, tokenizer, path) for name, (tokenizer, path) in loaded.items()}

    unreadable = 0
    # Why records were set aside, and the first missing-field error's detail (the fields the
    # records have instead): what the message says when no document could be read.
    reasons: dict[str, int] = {}
    missing_field: list[str] = []

    def on_error(error: ReadError) -> None:
        nonlocal unreadable
        unreadable += 1
        reasons[error.reason] = reasons.get(error.reason, 0) + 1
        if error.reason == "missing_text_field" and not missing_field:
            missing_field.append(error.detail)

    groups = _Groups()
    grouped_from: set[str] = set()
    documents = total_bytes = 0
    sampled = None
    for batch, path in _batches(tasks, options, on_error):
        texts = batch.column(1)
        nbytes = pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
        keep = _within(nbytes, documents, total_bytes, max_documents, max_bytes)
        if keep < len(nbytes):
            sampled = _sample_note(max_documents, max_bytes)
            batch, texts, nbytes = batch.slice(0, keep), texts.slice(0, keep), nbytes[:keep]
        if keep:
            documents += keep
            total_bytes += int(nbytes.sum())
            _measure(batch, texts, nbytes, path, by, language_field, groups, grouped_from, states, num_threads)
        if sampled is not None:
            break
    if not documents:
        raise NoDocumentsError(_nothing_read(inputs, reasons, missing_field[0] if missing_field else None, text_field))
    names = groups.ordered()
    per_group = {g: {name: s.metrics(groups.index[g]) for name, s in states.items()} for g in names}
    overall = {name: s.metrics(None) for name, s in states.items()}
    return Evaluation(
        tokenizers=[s.info for s in states.values()], by=by,
        grouped_from=" and ".join(sorted(grouped_from)) if by else None,
        groups=names if by else [ALL], overall=overall, per_group=per_group if by else {ALL: overall},
        documents=documents, bytes=total_bytes, unreadable=unreadable, sampled=sampled,
        seconds=time.perf_counter() - started, encode_seconds={n: s.encode_seconds for n, s in states.items()})


def _nothing_read(inputs: list[StrPath], reasons: dict[str, int], missing_field: str | None, text_field: str) -> str:
    """The one-line message of a corpus that gave no document: the inputs, why their records
    were set aside, and, only where records lacked the text field, the fields they have and
    the one likely meant (as ``tokpipe clean`` says it)."""
    from tokpipe.pipeline.engines.outcome import suggest_field
    from tokpipe.pipeline.readers.base import fields_in_detail

    message = f"no document read from {', '.join(storage.redact(os.fspath(i)) for i in inputs)}"
    if not reasons:
        return message
    total = sum(reasons.values())
    why = ", ".join(f"{n:,} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    message += f" ({total:,} unreadable record{'s' if total != 1 else ''}: {why})"
    if missing_field is None:
        return message
    names, _ = fields_in_detail(missing_field)
    suggestion = suggest_field(text_field, names)
    hint = f"no field {text_field!r}" + (f"; did you mean {suggestion!r}?" if suggestion is not None else "")
    return f"{message}: {hint} (--text-field, or text_field= in Python)"


def _batches(tasks: list[Task], options: ReaderOptions,
             on_error: Callable[[ReadError], None]) -> Iterator[tuple[pa.RecordBatch, str]]:
    """Every non-empty batch of the corpus, in input order, with the file it came from."""
    from tokpipe.pipeline.readers import read_task

    for task in tasks:
        for batch in read_task(task, options, on_error):
            if batch.num_rows:
                yield batch, task.path


def _within(nbytes: np.ndarray, documents: int, total: int, max_documents: int | None, max_bytes: int | None) -> int:
    """How many documents of a batch stay within the limits (the first document of all
    always: a corpus whose first document is bigger than ``max_bytes`` still measures it)."""
    keep = len(nbytes)
    if max_documents is not None:
        keep = min(keep, max(max_documents - documents, 0))
    if max_bytes is not None:
        within = int(np.searchsorted(np.cumsum(nbytes), max_bytes - total, side="right"))
        keep = min(keep, max(within, 1 if documents == 0 else 0))
    return keep


def _sample_note(max_documents: int | None, max_bytes: int | None) -> str:
    limits = ([f"{max_documents:,} documents"] if max_documents else []) + \
        ([f"{max_bytes:,} bytes"] if max_bytes else [])
    return f"the first documents in input order, up to {' or '.join(limits)}"


class _Groups:
    """Group names to indices, in the order met, at most :data:`MAX_GROUPS` plus ``(other)``."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.bytes: list[int] = []

    def indices(self, labels: list[str], nbytes: np.ndarray) -> np.ndarray:
        out = np.empty(len(labels), dtype=np.int64)
        for n, label in enumerate(labels):
            if label not in self.index:
                if len(self.index) >= MAX_GROUPS:
                    label = OTHER
                if label not in self.index:
                    self.index[label] = len(self.index)
                    self.bytes.append(0)
            out[n] = self.index[label]
        for g, b in zip(out.tolist(), nbytes.tolist()):
            self.bytes[g] += b
        return out

    def ordered(self) -> list[str]:
        """Most bytes first, ``(other)`` last."""
        return sorted(self.index, key=lambda g: (g == OTHER, -self.bytes[self.index[g]], g))


def _labels(batch: pa.RecordBatch, texts: list[str], path: str, by: str | None, language_field: str,
            grouped_from: set[str]) -> list[str]:
    from tokpipe.tokeval.scripts import dominant_scripts, guess_languages

    if by is None:
        return [ALL] * len(texts)
    column = {"language": language_field, "source": "source"}.get(by)
    if column is not None and column in batch.schema.names:
        grouped_from.add(f"the {column} column")
        values = batch.column(column)
        if pa.types.is_nested(values.type):
            # A column of lists or objects has no string cast: each value as JSON text, as
            # the readers carry values of clashing types.
            return [json.dumps(v, sort_keys=True, ensure_ascii=False) if v else "unknown" for v in values.to_pylist()]
        return [v if v else "unknown" for v in values.cast(pa.string()).to_pylist()]
    if by == "source":
        grouped_from.add("the file name")
        return [storage.redact(path).rstrip("/").rsplit("/", 1)[-1]] * len(texts)
    if by == "language":
        grouped_from.add("a guess from the dominant script")
        return guess_languages(texts)
    grouped_from.add("the dominant script")
    return dominant_scripts(texts)


def _measure(batch: pa.RecordBatch, texts: pa.Array, nbytes: np.ndarray, path: str, by: str | None,
             language_field: str, groups: _Groups, grouped_from: set[str], states: dict[str, _TokenizerState],
             num_threads: int | None) -> None:
    from tokpipe.pipeline import kernels

    python_texts = [t or "" for t in texts.to_pylist()]
    group = groups.indices(_labels(batch, python_texts, path, by, language_field, grouped_from), nbytes)
    chars = pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
    # Unicode words (UAX #29), every Han and kana character one word: the same unit in every
    # script, so tokens per word compare across languages.
    words = kernels.word_counts(texts, "unicode", np.ones(len(python_texts), dtype=bool)).astype(np.int64)
    for state in states.values():
        state.add(texts, python_texts, group, chars, nbytes, words, num_threads)


class _Tally:
    """The running sums of one tokenizer on one group."""

    def __init__(self, vocab_size: int) -> None:
        self.counts = np.zeros(vocab_size, dtype=np.int64)
        self.sums = np.zeros(9, dtype=np.int64)  # see _SUMS


_SUMS = ("documents", "chars", "bytes", "words", "tokens", "fallback_tokens", "fallback_documents",
         "fallback_document_bytes", "round_trips")


class _TokenizerState:
    """One tokenizer's fallback ids, token lengths and per-group tallies."""

    def __init__(self, name: str, tokenizer: Tokenizer, path: str | None) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.fallback_ids, fallback, falls_back = _fallback(tokenizer)
        self.is_fallback = np.zeros(self.vocab_size, dtype=np.int64)
        self.is_fallback[list(self.fallback_ids)] = 1
        self.lengths = np.fromiter(map(len, map(_bytes_of(tokenizer), range(self.vocab_size))), dtype=np.int64,
                                   count=self.vocab_size)
        ordinary = self.lengths.copy()
        ordinary[[i for i in tokenizer.added_tokens.values() if i < self.vocab_size]] = -1
        longest = self._token(int(ordinary.argmax())) if self.vocab_size else None
        self.info = TokenizerInfo(name=name, path=path, model=tokenizer.model_type, vocab_size=self.vocab_size,
                                  fallback=fallback, falls_back=falls_back, longest_in_vocabulary=longest)
        self.tallies: dict[int, _Tally] = {}
        self.encode_seconds = 0.0

    def _token(self, id: int) -> Token:
        raw = self.tokenizer.token_bytes(id) or b""
        return Token(id=id, text=raw.decode("utf-8", "replace"), bytes=len(raw))

    def add(self, texts: pa.Array, python_texts: list[str], group: np.ndarray, chars: np.ndarray,
            nbytes: np.ndarray, words: np.ndarray, num_threads: int | None) -> None:
        from tokpipe.pipeline.kernels import list_buffers

        started = time.perf_counter()
        offsets, values = list_buffers(self.tokenizer.encode_arrow(texts, num_threads=num_threads))
        self.encode_seconds += time.perf_counter() - started
        offsets = offsets - offsets[0]
        values = values.astype(np.int64)
        lengths = np.diff(offsets)
        running = np.concatenate(([0], np.cumsum(self.is_fallback[values])))
        fallback = running[offsets[1:]] - running[offsets[:-1]]
        decode = self.tokenizer.decode
        round_trip = np.fromiter((decode(values[s:e].tolist()) == text
                                  for s, e, text in zip(offsets[:-1].tolist(), offsets[1:].tolist(), python_texts)),
                                 dtype=np.int64, count=len(python_texts))
        has_fallback = (fallback > 0).astype(np.int64)
        per_document = np.stack([np.ones_like(lengths), chars, nbytes, words, lengths, fallback, has_fallback,
                                 has_fallback * nbytes, round_trip])
        token_group = np.repeat(group, lengths)
        for g in np.unique(group).tolist():
            tally = self.tallies.get(g)
            if tally is None:
                tally = self.tallies[g] = _Tally(self.vocab_size)
            documents, tokens = group == g, token_group == g
            tally.sums += per_document[:, documents].sum(axis=1)
            tally.counts += np.bincount(values[tokens], minlength=self.vocab_size)

    def metrics(self, group: int | None) -> Metrics:
        """The metrics of one group, or of every group together (None)."""
        if group is None:
            tallies = list(self.tallies.values())
        else:
            tallies = [self.tallies[group]] if group in self.tallies else []
        counts = sum((t.counts for t in tallies), np.zeros(self.vocab_size, dtype=np.int64))
        sums = sum((t.sums for t in tallies), np.zeros(len(_SUMS), dtype=np.int64))
        used = np.flatnonzero(counts)
        ranked = np.sort(counts[used])[::-1]
        total = int(ranked.sum())
        cover = int(np.searchsorted(np.cumsum(ranked), 0.9 * total, side="left")) + 1 if total else 0
        longest = self._token(int(used[np.argmax(self.lengths[used])])) if len(used) else None
        return Metrics(**{k: int(v) for k, v in zip(_SUMS, sums.tolist())}, distinct_tokens=len(used),
                       tokens_for_90=cover, vocab_size=self.vocab_size, longest_used=longest)


def _fallback(tokenizer: Tokenizer) -> tuple[set[int], str, bool]:
    """The ids of the tokenizer's fallback tokens (unknown token, byte pieces), what they are
    in words, and whether there are any."""
    if tokenizer.model_type == "BPE" and _byte_level(tokenizer):
        # Every byte has a token: nothing can fall back, whatever the file declares. (And the
        # JSON of a 200k vocabulary takes a second to write and another to parse.)
        return set(), "none: byte-level BPE, every byte has a token", False
    model = json.loads(tokenizer.to_str()).get("model", {})
    ids: set[int] = set()
    names = []
    unk_id = model.get("unk_id")
    unk = tokenizer.id_to_token(unk_id) if isinstance(unk_id, int) else model.get("unk_token")
    if unk:
        found = tokenizer.token_to_id(unk)
        if found is not None:
            ids.add(found)
            names.append(unk)
    if model.get("byte_fallback"):
        pieces = [tokenizer.token_to_id(f"<0x{b:02X}>") for b in range(256)]
        ids.update(p for p in pieces if p is not None)
        names.append("<0x00>..<0xFF> byte pieces")
    if ids:
        return ids, " and ".join(names), True
    return ids, "none: no unknown token", False


def _bytes_of(tokenizer: Tokenizer) -> Callable[[int], bytes]:
    """The bytes of a token id, empty for an id that is no token (a gap below ``vocab_size``)."""
    token_bytes = tokenizer.token_bytes
    return lambda id: token_bytes(id) or b""


def _byte_level(tokenizer: Tokenizer) -> bool:
    return all(tokenizer.bytes_to_id(bytes([b])) is not None for b in range(256))
