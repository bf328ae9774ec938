"""What a mix is asked for and what it takes of each source: the options, the sources opened
and checked (a tokenize output of documents, one tokenizer), each source's target tokens per
split (largest remainder) and the documents of each epoch (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tokpipe import storage
from tokpipe.errors import ConfigError, PipelineError
from tokpipe.pipeline import fs
from tokpipe.pipeline.kernels import numpy_of
from tokpipe.pipeline.stages.tokenize import LENGTH
from tokpipe.pipeline.tokenize.keys import shuffle_keys
from tokpipe.pipeline.tokenize.options import FORMAT
from tokpipe.pipeline.writers import MANIFEST_NAME
from tokpipe.pipeline.writers.manifest import FORMAT as CLEAN_FORMAT, tokenized_documents_path

__all__ = ["MixOptions", "MixResult", "Source", "Selection", "parse_source", "weight_of", "largest_remainder",
           "open_source", "check_compatible", "plan", "select"]


@dataclass(frozen=True)
class MixOptions:
    """What ``tokpipe mix`` is asked for besides its sources (its command-line options)."""

    #: The train split's total tokens; None: the most that ``max_epochs`` allows.
    tokens: int | None = None
    max_epochs: float = 1.0
    seed: int = 0
    formats: tuple[str, ...] = ("parquet", "megatron")
    shard_size: int = 256 << 20
    #: Bytes of token ids one key range of the output holds in memory.
    shuffle_buffer: int = 256 << 20
    overwrite: bool = False
    #: Where the run's state and spilled key ranges go (default: ``OUT/.tokpipe``; for an
    #: output in a bucket, a local folder): ``engines.state``.
    staging_dir: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.formats) - {"parquet", "megatron"}
        if unknown or not self.formats:
            raise ConfigError(f"formats must be parquet and/or megatron, not {', '.join(sorted(unknown)) or 'none'}")
        if self.tokens is not None and self.tokens < 1:
            raise ConfigError(f"--tokens must be at least 1, not {self.tokens}")
        if not self.max_epochs > 0 or self.max_epochs == float("inf"):
            raise ConfigError(f"--max-epochs must be a positive number, not {self.max_epochs}")
        if not 0 <= self.seed < 1 << 64:
            raise ConfigError(f"the seed must be in [0, 2**64), not {self.seed}")
        # Checked here, before the output folder is touched: a 0 buffer would divide by zero
        # only once the mix has begun (and --shuffle-buffer 0.5 parses to 0 bytes).
        for option, value in (("--shard-size", self.shard_size), ("--shuffle-buffer", self.shuffle_buffer)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{option} must be at least 1 byte, not {str(value)[:40]}")


@dataclass
class MixResult:
    """The output folder and its manifest (``manifest["mix"]``: the realised figures)."""

    out_dir: storage.Location
    manifest: dict[str, Any]
    #: False when a finished mix of the same sources and options was found and nothing redone.
    written: bool = True


def parse_source(text: str) -> tuple[str, Fraction]:
    """``SOURCE=WEIGHT`` as (source, weight); the weight a positive finite number (``0.7``,
    ``3``, ``1/3``, ``1e-2``), read exactly. The last ``=`` splits (a URL may hold one)."""
    source, sep, weight = text.rpartition("=")
    if not sep or not source:
        raise ConfigError(f"{text[:200]!r}: expected SOURCE=WEIGHT (a tokenize output folder, '=', a weight)")
    return source, weight_of(weight, source)


def weight_of(value: Any, source: str) -> Fraction:
    """``value`` (text or a number) as an exact positive weight of ``source``."""
    try:
        weight = Fraction(value) if not isinstance(value, float) else Fraction(str(value))
    except (ValueError, ZeroDivisionError, TypeError):
        raise ConfigError(f"{source[:200]}: weight {str(value)[:50]!r} is not a number") from None
    if weight <= 0:
        raise ConfigError(f"{source[:200]}: weight {str(value)[:50]} must be positive")
    return weight


def largest_remainder(total: int, shares: Sequence[Fraction]) -> list[int]:
    """``total`` cut in parts proportional to ``shares`` (positive), summing to ``total``:
    each gets the floor of its exact part, and the units left go one each to the largest
    fractional parts (ties: the first listed)."""
    whole = sum(shares)
    exact = [total * s / whole for s in shares]
    parts = [int(e) for e in exact]  # floor: the parts are non-negative
    left = total - sum(parts)
    for i in sorted(range(len(shares)), key=lambda i: (-(exact[i] - parts[i]), i))[:left]:
        parts[i] += 1
    return parts


@dataclass
class Source:
    """A source folder, its manifest, and what the mix takes of each split."""

    index: int
    given: str
    location: storage.Location
    weight: Fraction
    manifest: dict[str, Any]
    manifest_sha256: str
    #: Per split: tokens asked (= realised).
    targets: dict[str, int] = field(default_factory=dict)

    def tokens(self, split: str) -> int:
        return int(self.manifest["splits"].get(split, {}).get("tokens", 0))

    def documents(self, split: str) -> int:
        return int(self.manifest["splits"].get(split, {}).get("documents", 0))


def open_source(index: int, given: str, weight: Fraction) -> Source:
    """A source as given, checked: a finished ``tokpipe tokenize`` output of documents."""
    where = storage.location(given)
    shown = storage.redact(given)[:200]
    if not fs.is_dir(where):
        raise ConfigError(f"{shown}: no such folder (a source must be a tokpipe tokenize output folder)")
    path = where / MANIFEST_NAME
    if not fs.exists(path):
        raise ConfigError(f"{shown}: not a tokpipe tokenize output (no {MANIFEST_NAME}; an unfinished run?)")
    raw = fs.read_bytes(path)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(f"{shown}: its {MANIFEST_NAME} is not valid JSON") from None
    what = manifest.get("format") if isinstance(manifest, dict) else None
    if what != FORMAT or not isinstance(manifest.get("splits"), dict):
        hint = "; tokenize it first (tokpipe tokenize)" if what == CLEAN_FORMAT else ""
        raise ConfigError(f"{shown}: not a tokpipe tokenize output (manifest format {str(what)[:40]!r}){hint}")
    if manifest.get("pack"):
        raise ConfigError(f"{shown}: written with --pack (rows of packed tokens, not documents); mix needs "
                          "documents: tokenize without --pack")
    if "parquet" not in (manifest.get("formats") or []):
        raise ConfigError(f"{shown}: has no Parquet documents (written with --format megatron); mix reads the "
                          "Parquet shards: tokenize with --format parquet or both")
    return Source(index, given, where, weight, manifest, hashlib.sha256(raw).hexdigest())


def check_compatible(sources: list[Source]) -> None:
    """The same tokenizer (file digest, vocabulary, EOS), ids dtype and truncation."""
    first = sources[0]

    def identity(s: Source) -> tuple[Any, ...]:
        t = s.manifest.get("tokenizer") or {}
        return t.get("sha256"), t.get("vocab_size"), t.get("eos_id"), t.get("append_eos")

    def described(s: Source) -> str:
        t = s.manifest.get("tokenizer") or {}
        name = str(t.get("path", "?")).replace("\\", "/").rsplit("/", 1)[-1][:80]
        return (f"{name} (sha256 {str(t.get('sha256'))[:12]}, vocabulary {t.get('vocab_size')}, "
                f"EOS {t.get('eos_id') if t.get('append_eos') else 'not appended'})")

    for s in sources[1:]:
        shown = storage.redact(s.given)[:200]
        if identity(s) != identity(first):
            raise ConfigError(f"{shown}: tokenized with {described(s)}, not {described(first)} as "
                              f"{storage.redact(first.given)[:200]}: mixed sources must share one tokenizer")
        if s.manifest.get("dtype") != first.manifest.get("dtype"):
            raise ConfigError(f"{shown}: ids stored as {s.manifest.get('dtype')}, not {first.manifest.get('dtype')}")
        cut = (bool(s.manifest.get("truncate")), s.manifest.get("seq_len") if s.manifest.get("truncate") else None)
        first_cut = (bool(first.manifest.get("truncate")),
                     first.manifest.get("seq_len") if first.manifest.get("truncate") else None)
        if cut != first_cut:
            raise ConfigError(f"{shown}: documents truncated {'at ' + str(cut[1]) if cut[0] else 'nowhere'}, "
                              f"unlike {storage.redact(first.given)[:200]} "
                              f"({'at ' + str(first_cut[1]) if first_cut[0] else 'not truncated'})")


def plan(sources: list[Source], options: MixOptions) -> list[str]:
    """Each source's target tokens per split (``Source.targets``); returns the splits mixed.
    Fails, naming the source, when a target needs more than ``max_epochs``."""
    max_epochs = Fraction(str(options.max_epochs))
    shares = [s.weight for s in sources]
    whole = sum(shares)
    for s in sources:
        if s.tokens("train") <= 0:
            raise ConfigError(f"{storage.redact(s.given)[:200]}: its train split holds no tokens")
    caps = [int(max_epochs * s.tokens("train")) for s in sources]
    if options.tokens is None:
        total = min(int(cap * whole / share) for cap, share in zip(caps, shares))
        if total < 1:
            raise ConfigError(f"--max-epochs {options.max_epochs:g} allows no token of "
                              f"{storage.redact(sources[caps.index(min(caps))].given)[:200]}")
    else:
        total = options.tokens
    for s, target, cap in zip(sources, largest_remainder(total, shares), caps):
        if target > cap:
            epochs = float(Fraction(target, s.tokens("train")))
            raise ConfigError(f"{storage.redact(s.given)[:200]}: {target:,} tokens asked of its "
                              f"{s.tokens('train'):,} train tokens need {epochs:.4g} epochs, more than --max-epochs "
                              f"{options.max_epochs:g}")
        s.targets["train"] = target
    splits = ["train"]
    if all(s.tokens("val") > 0 for s in sources):
        val_total = min(int(s.tokens("val") * whole / share) for s, share in zip(sources, shares))
        for s, target in zip(sources, largest_remainder(val_total, shares)):
            s.targets["val"] = target
        splits.append("val")
    return splits


@dataclass
class Selection:
    """What one source gives one split: per epoch, the tokens taken of each document (0: not
    taken; its length, or fewer for the one cut), with the epoch's numbering base."""

    takes: list[np.ndarray]
    bases: list[int]
    documents: int
    cut_documents: int


def _epoch_seed(seed: int, source: int, epoch: int) -> int:
    """``s`` of the package docstring: the seed of source ``source``'s order in ``epoch``."""
    return int(shuffle_keys(seed, np.array([(source << 32) | epoch], dtype=np.uint64))[0])


def select(source: Source, split: str, seed: int, base: int) -> tuple[Selection, int]:
    """The documents ``source`` gives ``split`` (see the package docstring); ``base``: the
    numbering of the first epoch's documents. Returns the selection and the next base."""
    target = source.targets[split]
    # (ParquetFile.read, not read_table: that imports pyarrow.dataset, and pandas with it.)
    with fs.parquet_file(source.location / tokenized_documents_path(source.manifest, split)) as parquet:
        lengths = numpy_of(parquet.read(columns=[LENGTH]).column(LENGTH)).astype(np.int64)
    total = int(lengths.sum())
    if total != source.tokens(split):
        raise PipelineError(f"{storage.redact(source.given)[:200]}: its {split} documents file counts {total:,} "
                            f"tokens, its manifest {source.tokens(split):,}")
    full, rest = divmod(target, total)
    takes: list[np.ndarray] = [lengths] * full
    cut = 0
    if rest:
        order = np.argsort(shuffle_keys(_epoch_seed(seed, source.index, full), np.arange(len(lengths))))
        reached = np.cumsum(lengths[order])
        last = int(np.searchsorted(reached, rest))  # the first document whose end reaches the target
        take = np.zeros_like(lengths)
        take[order[:last]] = lengths[order[:last]]
        take[order[last]] = rest - (int(reached[last - 1]) if last else 0)
        cut = int(take[order[last]] < lengths[order[last]])
        takes.append(take)
    bases = [base + e * len(lengths) for e in range(len(takes))]
    documents = sum(int(np.count_nonzero(t)) for t in takes)
    return Selection(takes, bases, documents, cut), base + len(takes) * len(lengths)
