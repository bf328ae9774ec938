"""``train_bpe``, ``train_wordpiece``, ``train_unigram``: train a tokenizer from files, folders
or strings.

Text, JSONL (plain, gzip, zstd) files are read, decoded and counted by the Rust core on all
cores with the GIL released. Parquet files and Python iterables are read here in batches and
handed to the same counter, so memory stays bounded by the batch plus the distinct pre-tokens.

A file, folder or glob may be an object-storage URL (``s3://bucket/corpus/``, see
:mod:`tokpipe.storage`). The Rust readers read local files, so remote text and JSONL files are
downloaded to a temporary folder (``$TMPDIR``) in groups of about :data:`DOWNLOAD_GROUP_BYTES`,
each counted by the same Rust readers as a local corpus (so the trainer sees the same documents
and gives the same tokenizer), then deleted; the next group downloads while one is counted.
Local disk holds two groups at most. Remote Parquet files are streamed through pyarrow, as
local ones are read. Reports and errors name the URLs.

Why one module of over 500 lines: the three trainers share one corpus feed (files, folders,
globs, URLs, iterables, Parquet batches, the report), and the remote groups are only a way of
feeding the same counter; split off, the feed would be one caller's helper in another module.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from tokpipe import _core, presegment, storage
from tokpipe.errors import ArgumentTypeError, CorpusError, InvalidArgumentError
from tokpipe.storage import Location, RemotePath
from tokpipe.tokenizer import Tokenizer

__all__ = ["train_bpe", "train_wordpiece", "train_unigram", "CorpusReport", "TRAINING_SUFFIXES",
           "BERT_SPECIAL_TOKENS", "NORMALIZATION_RULES"]

#: sentencepiece's normalization rules (``normalization_rule_name``), its default first.
NORMALIZATION_RULES = ("nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity")

#: The special tokens HF's ``BertWordPieceTokenizer.train`` gives the first ids.
BERT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

StrPath = Union[str, "os.PathLike[str]"]

#: File endings picked up when a folder is walked (files named explicitly are always read).
TRAINING_SUFFIXES = (".txt", ".text", ".md", ".rst", ".jsonl", ".json", ".ndjson", ".jsonl.gz", ".jsonl.zst",
                     ".json.gz", ".json.zst", ".txt.gz", ".txt.zst", ".parquet")

# Strings per batch handed to Rust from Parquet files and iterables: large enough that the
# per-call cost vanishes, small enough that memory stays flat.
_BATCH = 8192

# Set-aside cases kept as examples, as the Rust readers keep (the counts are always complete).
_MAX_EXAMPLES = 20

#: Remote text and JSONL files are downloaded and counted in groups of about this many bytes
#: (a bigger file is a group of its own): local disk holds two groups, the one being counted
#: and the next one downloading.
DOWNLOAD_GROUP_BYTES = 1 << 30
# Files of a group downloaded at once: object stores serve parallel requests far faster than
# one after the other, most of all for small files.
_DOWNLOADS = 8


@dataclass
class CorpusReport:
    """What a training run read and what it set aside (never silently dropped)."""

    files: int = 0
    empty_files: int = 0
    documents: int = 0
    bytes: int = 0
    invalid_utf8_documents: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, int, str]] = field(default_factory=list)

    def add(self, other: dict[str, object]) -> None:
        self.files += int(other.get("files", 0))  # type: ignore[arg-type]
        self.empty_files += int(other.get("empty_files", 0))  # type: ignore[arg-type]
        self.documents += int(other.get("documents", 0))  # type: ignore[arg-type]
        self.bytes += int(other.get("bytes", 0))  # type: ignore[arg-type]
        self.invalid_utf8_documents += int(other.get("invalid_utf8_documents", 0))  # type: ignore[arg-type]
        for reason, count in dict(other.get("set_aside", {})).items():  # type: ignore[call-overload]
            self.set_aside[reason] = self.set_aside.get(reason, 0) + int(count)
        self.examples.extend(other.get("examples", []))  # type: ignore[arg-type]

    def rows(self) -> list[tuple[str, str]]:
        """The summary table printed at the end of a run."""
        rows = [
            ("files", f"{self.files:,}"),
            ("empty files", f"{self.empty_files:,}"),
            ("documents", f"{self.documents:,}"),
            ("bytes read", f"{self.bytes:,}"),
            ("invalid UTF-8 (replaced)", f"{self.invalid_utf8_documents:,}"),
        ]
        rows += [(f"set aside: {reason}", f"{count:,}") for reason, count in sorted(self.set_aside.items())]
        return rows


def _collect_files(paths: Sequence[Location], sizes: dict[RemotePath, int] | None = None) -> list[Location]:
    """The training files of ``paths``: a file as it is, a folder's files (walked, hidden
    names skipped, :data:`TRAINING_SUFFIXES` only), and for a URL the same over the objects
    under it, or a glob's matches. ``sizes`` receives the size of each remote file."""
    files: list[Location] = []
    for path in paths:
        if isinstance(path, RemotePath):
            files.extend(_remote_files(path, {} if sizes is None else sizes))
        elif path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
                and p.name.lower().endswith(TRAINING_SUFFIXES)
            )
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise CorpusError(f"{path}: no such file or folder")
    if not files:
        raise CorpusError(f"no training files found in {', '.join(_shown(p) for p in paths)}")
    return files


def _remote_files(where: RemotePath, sizes: dict[RemotePath, int]) -> list[Location]:
    """The training files a URL names: the object, the objects under a prefix (as a local
    folder is walked), or those a glob matches (folders among them walked, files of
    :data:`TRAINING_SUFFIXES` kept)."""
    def training_file(key: str) -> bool:
        return key.lower().endswith(TRAINING_SUFFIXES) and not key.rsplit("/", 1)[-1].startswith(".")

    try:
        found = storage.objects(where, training_file)
    except FileNotFoundError:
        pattern = " (the pattern matches nothing)" if storage.is_pattern(where.key) else ""
        raise CorpusError(f"{_shown(where)}: no such file or folder{pattern}") from None
    files: list[Location] = []
    for key, info in found.items():
        url = RemotePath(f"{where.scheme}://{key}")
        sizes[url] = int(info.get("size") or 0)
        files.append(url)
    return files


def _shown(path: Location) -> str:
    return storage.redact(str(path)) if isinstance(path, RemotePath) else str(path)


def _as_paths(files: StrPath | Sequence[StrPath]) -> list[Location]:
    if isinstance(files, (str, os.PathLike)):
        return [_location(files)]
    paths = list(files)
    if not all(isinstance(p, (str, os.PathLike, RemotePath)) for p in paths):
        raise ArgumentTypeError("files must be paths (str or os.PathLike); pass strings to train on as texts=")
    return [_location(p) for p in paths]


def _location(path: StrPath | RemotePath) -> Location:
    """A URL as its location; any other path as ``Path(path)``, as it always was."""
    if isinstance(path, RemotePath) or storage.is_url(path):
        return storage.location(path)
    return Path(path)


_CoreTrainer = Union[_core.BpeTrainer, _core.WordPieceTrainer, _core.UnigramTrainer, _core.LmTrainer]


def _feed_parquet(trainer: _CoreTrainer, where: Location, text_field: str, strict: bool, report: CorpusReport) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = _shown(where)
    try:
        if isinstance(where, RemotePath):
            from tokpipe.pipeline import fs

            parquet = fs.parquet_file(where)
        else:
            parquet = pq.ParquetFile(where)
    except (pa.ArrowException, OSError) as e:
        raise CorpusError(f"{path}: not a readable Parquet file ({storage.redact(str(e))})") from None
    schema = parquet.schema_arrow
    if text_field not in schema.names:
        raise CorpusError(f"{path}: no column {text_field!r} (columns: {', '.join(schema.names)})")
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise CorpusError(f"{path}: column {text_field!r} holds {kind}, not strings")
    report.files += 1
    row = 0
    for batch in parquet.iter_batches(batch_size=_BATCH, columns=[text_field]):
        column = batch.column(0)
        if column.null_count:
            first = row + pc.index(pc.is_null(column), True).as_py()
            if strict:
                raise CorpusError(f"{path}: row {first}: {text_field!r} is null")
            report.set_aside["null_text_field"] = report.set_aside.get("null_text_field", 0) + column.null_count
            if len(report.examples) < _MAX_EXAMPLES:
                report.examples.append((str(path), first, f"null_text_field: {text_field!r} is null"))
            column = column.drop_null()
        row += batch.num_rows
        report.documents += len(column)
        report.bytes += pc.sum(pc.binary_length(column)).as_py() or 0
        trainer.feed(column.to_pylist())


def _checked_strings(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        if not isinstance(text, str):
            raise ArgumentTypeError(f"training input must be strings, got {type(text).__name__}")
        yield text


def _feed_texts(trainer: _CoreTrainer, texts: Iterable[str], report: CorpusReport) -> None:
    batch: list[str] = []
    for text in _checked_strings(texts):
        batch.append(text)
        if len(batch) >= _BATCH:
            trainer.feed(batch)
            report.documents += len(batch)
            batch = []
    if batch:
        trainer.feed(batch)
        report.documents += len(batch)


def train_bpe(
    files: StrPath | Sequence[StrPath] | None = None,
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 32000,
    pattern: str = "gpt2",
    special_tokens: Sequence[str] = ("<|endoftext|>",),
    min_frequency: int = 2,
    max_token_length: int | None = None,
    pre_segment: str | None = None,
    show_progress: bool = True,
    strict: bool = False,
    text_field: str = "text",
    report: list[CorpusReport] | None = None,
) -> Tokenizer:
    """Train a byte-level BPE tokenizer on ``files`` or on ``texts``.

    ``files`` is a file or folder (walked recursively for .txt, .jsonl[.gz|.zst], .parquet),
    or a list of them, each local or an object-storage URL (a file, a prefix or a glob; see
    the module notes); in text files each line is one sequence, as in HF ``tokenizers``.
    ``texts`` is any iterable of strings, each one sequence (HF's ``train_from_iterator``);
    it is consumed in batches, never held whole. Give one of the two.

    The merges are those HF ``BpeTrainer`` makes with the same pre-tokenizer, vocabulary size,
    special tokens and ``min_frequency`` (ids: special tokens first, then the 256 bytes, then
    the merges). Invalid UTF-8 is replaced with U+FFFD and counted, or raises ``CorpusError``
    with ``strict=True``; malformed records are set aside and counted. Pass a list as
    ``report`` to receive the :class:`CorpusReport`.

    ``pre_segment="jieba"`` cuts runs of Han characters into words with jieba first, so no
    merge crosses a word boundary; the tokenizer encodes raw text without jieba (see
    :mod:`tokpipe.presegment`; needs the ``chinese`` extra).
    """
    check_corpus_arguments("train_bpe", files, texts)
    segmenter = presegment.segmenter(pre_segment, "train_bpe")
    trainer = _core.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        max_token_length=max_token_length,
        show_progress=show_progress,
        pattern=pattern,
    )
    feed_corpus(trainer, files, texts, strict=strict, text_field=text_field, report=report, segmenter=segmenter)
    return Tokenizer(trainer.train())


def train_wordpiece(
    files: StrPath | Sequence[StrPath] | None = None,
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 30000,
    score: str = "frequency",
    min_frequency: int = 2,
    special_tokens: Sequence[str] = BERT_SPECIAL_TOKENS,
    limit_alphabet: int | None = 1000,
    initial_alphabet: Sequence[str] = (),
    lowercase: bool = True,
    strip_accents: bool | None = None,
    clean_text: bool = True,
    handle_chinese_chars: bool = True,
    continuing_subword_prefix: str = "##",
    unk_token: str = "[UNK]",
    pre_segment: str | None = None,
    show_progress: bool = True,
    strict: bool = False,
    text_field: str = "text",
    report: list[CorpusReport] | None = None,
) -> Tokenizer:
    """Train a BERT WordPiece tokenizer on ``files`` or on ``texts`` (as :func:`train_bpe`).

    Words are counted after the BERT normalizer (``lowercase``, ``strip_accents``,
    ``clean_text``, ``handle_chinese_chars``) and pre-tokenizer. Each word starts as its
    characters (all but the first prefixed with ``##``); pairs are merged until the vocabulary
    holds ``vocab_size`` tokens, special tokens and alphabet included. ``score`` picks the
    pair to merge:

    ``"frequency"`` (the default)
        the most frequent pair, as HF's ``WordPieceTrainer`` (a BPE trainer with ``##``)
        does: the same vocabulary as HF's on the same corpus and settings, and the most
        compact of the three (a merge applied f times saves exactly f tokens);
    ``"likelihood"``
        the original WordPiece rule (Schuster & Nakajima 2012): the merge that raises the
        corpus log-likelihood under a unigram model over the current symbols the most, computed
        exactly (the derivation is in the Rust trainer's module notes); it compresses 0 to
        2.4% less than ``"frequency"`` on English, Japanese and Chinese, and trains slower;
    ``"pmi"``
        the HF course's formula, the pair maximising freq(ab) / (freq(a) · freq(b)); it
        favours pairs of rare symbols and compresses far less (tokpipe's ``"likelihood"``
        before issue 23).

    Pairs seen fewer than ``min_frequency`` times are never merged; the alphabet keeps the
    ``limit_alphabet`` most frequent characters (plus ``initial_alphabet``). The tokenizer
    has the special tokens, ``[CLS] … [SEP]`` on request, and saves as HF ``tokenizer.json``
    or ``vocab.txt``.
    """
    check_corpus_arguments("train_wordpiece", files, texts)
    if pre_segment is not None:
        # BERT's pre-tokenizer makes each CJK character a word: see tokpipe.presegment.
        raise InvalidArgumentError("train_wordpiece: pre_segment is not supported (BERT's pre-tokenizer splits every "
                                   "CJK character into its own word); use train_bpe or train_unigram")
    if any(len(c) != 1 for c in initial_alphabet):
        raise ArgumentTypeError("initial_alphabet must hold single characters")
    trainer = _core.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        limit_alphabet=limit_alphabet,
        initial_alphabet=list(initial_alphabet),
        continuing_subword_prefix=continuing_subword_prefix,
        unk_token=unk_token,
        score=score,
        lowercase=lowercase,
        strip_accents=strip_accents,
        clean_text=clean_text,
        handle_chinese_chars=handle_chinese_chars,
        show_progress=show_progress,
    )
    feed_corpus(trainer, files, texts, strict=strict, text_field=text_field, report=report)
    return Tokenizer(trainer.train())


def train_unigram(
    files: StrPath | Sequence[StrPath] | None = None,
    *,
    texts: Iterable[str] | None = None,
    vocab_size: int = 8000,
    character_coverage: float = 0.9995,
    normalization: str = "nmt_nfkc",
    max_piece_length: int = 16,
    byte_fallback: bool = False,
    user_defined_symbols: Sequence[str] = (),
    control_symbols: Sequence[str] = (),
    unk_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int = -1,
    unk_piece: str = "<unk>",
    bos_piece: str = "<s>",
    eos_piece: str = "</s>",
    pad_piece: str = "<pad>",
    split_by_whitespace: bool = True,
    split_by_unicode_script: bool = True,
    split_by_number: bool = True,
    split_digits: bool = False,
    add_dummy_prefix: bool = True,
    remove_extra_whitespaces: bool = True,
    shrinking_factor: float = 0.75,
    num_sub_iterations: int = 2,
    seed_size: int = 1_000_000,
    max_sentence_length: int = 4192,
    pre_segment: str | None = None,
    show_progress: bool = True,
    strict: bool = False,
    text_field: str = "text",
    report: list[CorpusReport] | None = None,
) -> Tokenizer:
    """Train a sentencepiece Unigram tokenizer on ``files`` or on ``texts`` (as :func:`train_bpe`).

    sentencepiece's algorithm with its option names and defaults: every line is a sentence
    (of a text file, of a JSONL/Parquet record's text, of each string in ``texts``), normalized
    by the rule ``normalization`` (one of :data:`NORMALIZATION_RULES`: ``nmt_nfkc``, NFKC plus
    sentencepiece's whitespace and control-character mapping, is its default; ``*_cf`` also
    case-folds; ``identity`` leaves the text alone) and its whitespace options, the normalizer
    the trained tokenizer then encodes with. Seed pieces are frequent substrings; EM re-scores
    them and prunes the least useful (``shrinking_factor`` a round, ``num_sub_iterations`` EM
    steps between) until ``vocab_size`` pieces are left.

    - ``character_coverage``: share of the corpus's characters the alphabet must cover (1.0 for
      small alphabets, 0.9995 for Chinese or Japanese); rarer characters are unknown, or
      ``byte_fallback`` spells them as ``<0xNN>`` byte pieces.
    - ``max_piece_length`` (sentencepiece's ``max_sentencepiece_length``): longest piece, in
      characters. ``seed_size`` (``seed_sentencepiece_size``): seed substrings kept.
    - ``split_by_whitespace``, ``split_by_unicode_script``, ``split_by_number``,
      ``split_digits``: where pieces may not cross (a space, a change of script, the edge of
      a number, between two digits).
    - ``add_dummy_prefix``: put ``▁`` before each text so a word is one piece anywhere;
      ``remove_extra_whitespaces``: drop leading, trailing and repeated spaces.
    - ``user_defined_symbols`` are always one piece wherever they occur; ``control_symbols``
      only have ids. ``unk_id``/``bos_id``/``eos_id``/``pad_id`` place ``<unk>``, ``<s>``,
      ``</s>``, ``<pad>`` (``-1`` leaves one out; ``unk_id`` cannot be).
    - Sentences longer than ``max_sentence_length`` bytes, or holding U+2585 (which
      sentencepiece reserves), are skipped, as sentencepiece skips them, and counted in the
      report (``sentence_too_long``, ``reserved_character``).
    - ``pre_segment="jieba"``: runs of Han characters are cut into words with jieba, and no
      piece crosses a cut (no ``▁`` is added there); the model encodes raw text without jieba
      (see :mod:`tokpipe.presegment`; needs the ``chinese`` extra).

    The result is the tokenizer :meth:`Tokenizer.from_sentencepiece` loads from the ``.model``
    sentencepiece writes for these pieces and options: ``save_sentencepiece`` writes that
    ``.model`` (``sentencepiece.SentencePieceProcessor`` loads it and gives the same ids) and
    ``save`` an HF ``tokenizer.json``. The same for any number of threads.
    """
    check_corpus_arguments("train_unigram", files, texts)
    segmenter = presegment.segmenter(pre_segment, "train_unigram")
    trainer = _core.UnigramTrainer(
        vocab_size,
        character_coverage=character_coverage,
        max_sentencepiece_length=max_piece_length,
        seed_sentencepiece_size=seed_size,
        shrinking_factor=shrinking_factor,
        num_sub_iterations=num_sub_iterations,
        max_sentence_length=max_sentence_length,
        split_by_whitespace=split_by_whitespace,
        split_by_unicode_script=split_by_unicode_script,
        split_by_number=split_by_number,
        split_digits=split_digits,
        add_dummy_prefix=add_dummy_prefix,
        remove_extra_whitespaces=remove_extra_whitespaces,
        unk_id=unk_id,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        unk_piece=unk_piece,
        bos_piece=bos_piece,
        eos_piece=eos_piece,
        pad_piece=pad_piece,
        user_defined_symbols=list(user_defined_symbols),
        control_symbols=list(control_symbols),
        byte_fallback=byte_fallback,
        normalization=normalization,
        show_progress=show_progress,
    )
    reports: list[CorpusReport] = []
    feed_corpus(trainer, files, texts, strict=strict, text_field=text_field, report=reports, segmenter=segmenter)
    core, stats = trainer.train()
    # Sentences sentencepiece's rules skip are set aside like unreadable input: counted, shown.
    summary = reports[0]
    for reason, key in (("sentence_too_long", "skipped_too_long"), ("reserved_character", "skipped_reserved_char")):
        if stats[key]:
            summary.set_aside[reason] = summary.set_aside.get(reason, 0) + int(stats[key])
    if report is not None:
        report.append(summary)
    return Tokenizer(core)


def check_corpus_arguments(name: str, files: object, texts: object) -> None:
    """A trainer takes files or texts=, one of them: a list of paths passed as texts would be
    trained on as text."""
    if (files is None) == (texts is None):
        raise ArgumentTypeError(f"{name} takes either files or texts=, not both and not neither")
    if isinstance(texts, (str, bytes)):
        raise ArgumentTypeError("texts must be an iterable of strings, not one string")


def feed_corpus(trainer: Any, files: Any, texts: Iterable[str] | None, *, strict: bool, text_field: str,
                report: list[CorpusReport] | None, segmenter: presegment.Segmenter | None = None) -> None:
    """Feed a core trainer (anything with ``feed`` and ``feed_files``) ``texts`` or every
    document of ``files``: the Rust readers take text and JSON lines, parquet goes through
    pyarrow. With a ``segmenter``, every document is read in Python and pre-segmented (see
    :mod:`tokpipe.presegment`). Raises ``CorpusError`` when no text came; appends the report
    to ``report``."""
    summary = CorpusReport()
    if segmenter is not None:
        documents = texts if texts is not None else presegment.read_documents(
            _collect_files(_as_paths(files)), text_field=text_field, strict=strict, report=summary)
        segmenter.feed(trainer, _checked_strings(documents), summary)
    elif texts is not None:
        _feed_texts(trainer, texts, summary)
    else:
        sizes: dict[RemotePath, int] = {}
        found = _collect_files(_as_paths(files), sizes)
        native = [os.fspath(f) for f in found if isinstance(f, Path) and not f.name.lower().endswith(".parquet")]
        if native:
            summary.add(trainer.feed_files(native, strict=strict, text_field=text_field))
        remote = [f for f in found if isinstance(f, RemotePath) and not f.name.lower().endswith(".parquet")]
        if remote:
            _feed_remote(trainer, remote, sizes, strict, text_field, summary)
        for f in found:
            if f.name.lower().endswith(".parquet"):
                _feed_parquet(trainer, f, text_field, strict, summary)
    if summary.documents == 0:
        raise CorpusError("the training corpus holds no text")
    if report is not None:
        report.append(summary)


def _feed_remote(trainer: Any, files: list[RemotePath], sizes: dict[RemotePath, int], strict: bool, text_field: str,
                 summary: CorpusReport) -> None:
    """Feed remote text and JSONL files to ``trainer.feed_files``: downloaded a group at a
    time into a temporary folder (the next group downloading while one is counted), each file
    under its own name (the Rust readers tell formats by name), deleted once counted. The
    report and errors name the URLs."""
    groups = list(_groups(files, sizes))
    folder = Path(tempfile.mkdtemp(prefix="tokpipe-train-"))
    pool = ThreadPoolExecutor(max_workers=_DOWNLOADS, thread_name_prefix="tokpipe-download")
    try:
        def start(n: int) -> list[tuple[RemotePath, Path, Future[None]]]:
            started = []
            for i, url in groups[n]:
                local = folder / str(i) / url.name
                started.append((url, local, pool.submit(_download, url, local)))
            return started

        pending = start(0)
        for n in range(len(groups)):
            current, pending = pending, (start(n + 1) if n + 1 < len(groups) else [])
            for _, _, download in current:
                download.result()
            copies = {os.fspath(local): str(url) for url, local, _ in current}
            with storage.naming_urls(copies):
                report = trainer.feed_files(list(copies), strict=strict, text_field=text_field)
            report["examples"] = [(_url_of(copies, name), line, reason)
                                  for name, line, reason in report.get("examples", [])]
            summary.add(report)
            for _, local, _ in current:
                shutil.rmtree(local.parent, ignore_errors=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(folder, ignore_errors=True)


def _groups(files: list[RemotePath], sizes: dict[RemotePath, int]) -> Iterator[list[tuple[int, RemotePath]]]:
    """``files`` (numbered) in runs of about :data:`DOWNLOAD_GROUP_BYTES`."""
    group: list[tuple[int, RemotePath]] = []
    total = 0
    for i, url in enumerate(files):
        if group and total + sizes.get(url, 0) > DOWNLOAD_GROUP_BYTES:
            yield group
            group, total = [], 0
        group.append((i, url))
        total += sizes.get(url, 0)
    if group:
        yield group


def _download(url: RemotePath, local: Path) -> None:
    local.parent.mkdir(parents=True, exist_ok=True)
    with storage.calling(url) as (fs, key):
        fs.get_file(key, os.fspath(local))


def _url_of(copies: dict[str, str], name: str) -> str:
    """The URL of a local copy a report names (the name itself when it is none)."""
    return storage.redact(copies[name]) if name in copies else name
