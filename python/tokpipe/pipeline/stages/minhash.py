"""``minhash_dedup``: drop near-duplicate documents, keeping one per cluster.

Each document becomes a set of shingles (word 5-grams of its lowercased, whitespace-normalised
text by default; character 5-grams for text that is mostly Chinese or Japanese), summarised by
a MinHash signature equal to ``datasketch.MinHash(num_perm, seed, scheme=scheme)`` updated
with the same shingles. Signatures are cut into bands (``bands`` x ``rows``, by default
datasketch's ``MinHashLSH`` optimiser for ``threshold``); documents sharing a band are
candidates, verified (by default, the exact Jaccard similarity of their shingle sets reaches
``threshold``: NeMo Curator's false-positive check), and joined into clusters by union-find. One document per cluster is kept: the first in corpus order, or the
longest (ties to the first).

Like ``exact_dedup`` it is a global stage, run in two steps by the executor: ``keys`` computes
signatures in Rust in the parallel phase; ``decide`` bands and clusters them all at once, in
Rust, in (task, row) order, so the result does not depend on the number of workers. Every
document gets a ``dup_cluster`` column (the id of the document kept for its cluster, null when
it has no near-duplicate); a dropped one goes to ``rejected/`` with reason ``duplicate`` and the
kept document's id in ``duplicate_of``.

Memory: ``decide`` reads the keys a staged row group at a time (``key_pieces``) into a
``tokpipe_core::minhash::banding::LshIndex``, which writes the signatures to a scratch file
(read back through a memory map, so the page cache holds them, not the process) and buffers
band keys up to ``memory_mb`` (16 bytes a document and band; each band's buffer grows to its
share and is reused), spilling sorted runs to disk past it and merging them band by band (the
runs' read buffers share the same budget). The exact check reads the text of the candidates'
documents once each, in slices whose text and shingle sets fit ``memory_mb``
(``EXACT_CHECK_MEMORY_PER_TEXT_BYTE``), and the index writes their shingle sets to a scratch
file it checks the pairs from. Each phase hands what it freed back to the system
(``allocator.release_memory``). Beyond ``memory_mb``, what grows with the corpus is, per
document: the union-find's parent (4 bytes), which ``finish`` turns into the keepers in place
and hands to Python without a copy (the same 4 bytes, held until the verdicts are written), and
a bit to count the clusters; per candidate pair left for the exact check, 8 bytes (16 while
checked), and 16 bytes per document of those pairs; and, in the engine's verdicts, about 40
bytes per duplicate (its keeper's position, count and id). benches/RESULTS.md ("Memory of the
minhash decide, bounded") measures it.
Progress is reported per phase: signatures read, bands joined, texts read for the exact check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.allocator import release_memory
from tokpipe.pipeline.base import (DecideContext, GlobalStage, GroupJoin, key_pieces, register, scratch_space,
                                   split_by_task)
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.kernels import (MINHASH_REPRESENTATIVES, LshIndex, lsh_check_texts, lsh_index,
                                      minhash_dedup_keys, minhash_optimal_params)

__all__ = ["MinhashDedup", "optimal_params", "REPRESENTATIVES"]

#: Memory the exact check may hold per byte of a slice's text: ``memory_mb`` over this is
#: a slice's text. Measured about 4 on English web text at 6M documents (the values taken
#: from the staged row groups, with what Arrow's pool keeps of the row groups, about 1.7;
#: the joined text, 1; the shingle sets, 8 bytes a shingle, 1.3); character shingles of
#: Chinese or Japanese make the sets about 2.7 times the text. Slices cost little (each
#: document's text is read once, whatever the slicing), so the margin is generous.
EXACT_CHECK_MEMORY_PER_TEXT_BYTE = 8

#: Members of a band bucket each member is paired with (``tokpipe_core::minhash::banding::
#: MAX_REPRESENTATIVES``): a band join done elsewhere must pair the same way.
REPRESENTATIVES: int = MINHASH_REPRESENTATIVES


def optimal_params(threshold: float, num_perm: int, false_positive_weight: float = 0.5,
                   false_negative_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive and false negative probabilities
    at ``threshold``: datasketch's ``MinHashLSH`` choice, computed without SciPy."""
    return minhash_optimal_params(threshold, num_perm, false_positive_weight, false_negative_weight)


@register
class MinhashDedup(GlobalStage):
    """Near-duplicates (estimated Jaccard similarity of shingle sets >= ``threshold``) are
    dropped with reason ``duplicate``, one document per cluster kept (``keep``: ``first`` or
    ``longest``). ``shingle``: ``word`` (``ngram`` words), ``char`` (``char_ngram``
    characters) or ``auto`` (characters for text at least one third Han or kana).
    ``scheme``: datasketch's permutations, ``affine32`` (datasketch >= 2.0) or ``legacy``
    (datasketch < 2.0). ``hashfunc``: ``sha1`` (datasketch's default) or ``xxh3`` (faster;
    datasketch with ``hashfunc=lambda b: xxhash.xxh3_64_intdigest(b) & 0xFFFFFFFF``).
    ``verify``: how candidates (documents sharing a band) are checked before joining:
    ``exact`` (the default) computes the exact Jaccard similarity of their shingle sets from
    their text; ``signature`` compares their signatures (an estimate, standard error ~0.035
    at 0.8 with 128 values); ``none`` trusts the bands. Bands and rows come from datasketch's
    optimiser for ``threshold`` with ``false_positive_weight`` and ``false_negative_weight``
    (datasketch's 0.5 and 0.5, or 0.05 and 0.95 with ``exact``, whose check removes the false
    positives); ``bands`` and ``rows`` override it together. ``memory_mb``: memory for band
    keys (and for the candidates' text in the exact check); past it band keys are sorted and
    spilled to the run's scratch space (the result is the same)."""

    name = "minhash_dedup"
    cluster_column = "dup_cluster"

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, seed: int = 1, scheme: str = "affine32",
                 shingle: str = "auto", ngram: int = 5, char_ngram: int = 5, lowercase: bool = True,
                 bands: int | None = None, rows: int | None = None, verify: str | bool = "exact",
                 keep: str = "first",
                 false_positive_weight: float | None = None, false_negative_weight: float | None = None,
                 hashfunc: str = "sha1", memory_mb: int = 512) -> None:
        where = "minhash_dedup"
        if not 0.0 < threshold <= 1.0:
            raise InvalidArgumentError(f"{where}: threshold must be in (0, 1], got {threshold}")
        if num_perm < 2:
            raise InvalidArgumentError(f"{where}: num_perm must be at least 2, got {num_perm}")
        if not 0 <= seed < 2**32:
            raise InvalidArgumentError(f"{where}: seed must be in [0, 2**32), got {seed}")
        if scheme not in ("affine32", "legacy"):
            raise InvalidArgumentError(f"{where}: scheme must be affine32 or legacy, got {scheme!r}")
        if shingle not in ("word", "char", "auto"):
            raise InvalidArgumentError(f"{where}: shingle must be word, char or auto, got {shingle!r}")
        if ngram < 1 or char_ngram < 1:
            raise InvalidArgumentError(f"{where}: n-gram sizes must be positive")
        if hashfunc not in ("sha1", "xxh3"):
            raise InvalidArgumentError(f"{where}: hashfunc must be sha1 or xxh3, got {hashfunc!r}")
        if isinstance(verify, bool):  # the earlier switch: True checked signatures
            verify = "signature" if verify else "none"
        if verify not in ("exact", "signature", "none"):
            raise InvalidArgumentError(f"{where}: verify must be exact, signature or none, got {verify!r}")
        if memory_mb < 1:
            raise InvalidArgumentError(f"{where}: memory_mb must be at least 1, got {memory_mb}")
        if keep not in ("first", "longest"):
            raise InvalidArgumentError(f"{where}: keep must be first or longest, got {keep!r}")
        if (bands is None) != (rows is None):
            raise InvalidArgumentError(f"{where}: give both bands and rows, or neither")
        if bands is not None and rows is not None and (bands < 1 or rows < 1 or bands * rows > num_perm):
            raise InvalidArgumentError(f"{where}: need bands * rows <= num_perm, got {bands} x {rows} > {num_perm}")
        self.threshold = threshold
        self.num_perm = num_perm
        self.seed = seed
        self.scheme = scheme
        self.shingle = shingle
        self.ngram = ngram
        self.char_ngram = char_ngram
        self.lowercase = lowercase
        self.bands = bands
        self.rows = rows
        self.verify = verify
        self.keep = keep
        # An exact check removes every false positive the bands let through, at the cost of
        # reading the candidates' text, so the bands may favour recall: at 0.8 and 128
        # values, 16 bands of 8 rows make a pair at exactly 0.8 a candidate 95% of the time,
        # datasketch's balanced 9 x 13 only 40% (benches/RESULTS.md, MinHash).
        recall_first = verify == "exact"
        self.false_positive_weight = false_positive_weight if false_positive_weight is not None else (
            0.05 if recall_first else 0.5)
        self.false_negative_weight = false_negative_weight if false_negative_weight is not None else (
            0.95 if recall_first else 0.5)
        self.hashfunc = hashfunc
        self.memory_mb = memory_mb

    def lsh_params(self) -> tuple[int, int]:
        """The (bands, rows) used: as given, or datasketch's optimum for the threshold."""
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        return optimal_params(self.threshold, self.num_perm, self.false_positive_weight, self.false_negative_weight)

    def key_type(self) -> pa.DataType:
        return pa.binary(8 + 4 * self.num_perm)

    def keys(self, batch: pa.RecordBatch) -> pa.Array:
        return minhash_dedup_keys(batch.column(TEXT), self.num_perm, self.seed, self.scheme, self.shingle,
                                  self.ngram, self.char_ngram, self.lowercase, self.hashfunc)

    def decide(self, keys: Sequence[pa.Array], context: DecideContext | None = None) -> list[np.ndarray]:
        return self._decide(keys, context, None)

    def decide_with_candidates(self, keys: Sequence[pa.Array], candidates: np.ndarray,
                               context: DecideContext | None = None) -> list[np.ndarray]:
        """``decide`` with the band join done elsewhere (the Ray engine's groupby):
        ``candidates`` holds pairs of global positions, shape ``(k, 2)``, pairing every member
        of each bucket of equal band values (in position order) with the bucket's first
        ``REPRESENTATIVES`` members. The clusters are ``decide``'s. Needs ``verify`` exact or
        none (signature verification depends on the order within a bucket)."""
        if self.verify == "signature":
            raise InvalidArgumentError("minhash_dedup: verify='signature' needs the band join done in decide")
        return self._decide(keys, context, np.ascontiguousarray(candidates, dtype="<u4"))

    def join(self) -> GroupJoin | None:
        """The band join as a group-by: each document's band values, grouped by band and
        value, each bucket's members paired as ``LshIndex`` pairs them; the pairs are then
        checked and clustered by ``decide_with_candidates``, so the clusters are
        ``decide``'s. None with ``verify='signature'``, which needs the order within a bucket."""
        if self.verify == "signature":
            return None
        bands, rows = self.lsh_params()
        return GroupJoin("band join", ("band", "key"), BandRows(bands, rows, 8 + 4 * self.num_perm),
                         self._decide_joined, REPRESENTATIVES)

    def _decide_joined(self, pairs: np.ndarray, keys: Sequence[pa.Array], sizes: Sequence[int],
                       context: DecideContext) -> list[np.ndarray]:
        return self.decide_with_candidates(keys, pairs, context)

    def _decide(self, keys: Sequence[pa.Array], context: DecideContext | None,
                candidates: np.ndarray | None) -> list[np.ndarray]:
        bands, rows = self.lsh_params()
        context = context or DecideContext()
        if self.verify == "exact" and context.column is None:
            raise InvalidArgumentError("minhash_dedup: verify='exact' reads the candidates' text, and this decide "
                                       "was given no column reader (DecideContext.column)")
        progress = context.progress
        width = 8 + 4 * self.num_perm
        sizes = []
        stats = self.stats.extra
        with scratch_space(context) as scratch:
            index = lsh_index(scratch, self.num_perm, bands, rows, self.verify, self.threshold, self.keep,
                              self.memory_mb << 20)
            if candidates is not None:
                index.band_elsewhere()
            tasks = len(keys)
            progress("signatures", 0, tasks)
            for task in range(tasks):
                # A piece (a staged row group) at a time: the index holds the keys on disk, so
                # no task's keys are ever all in memory.
                size = 0
                for k in key_pieces(keys, task):
                    if k.null_count:
                        raise InvalidArgumentError("minhash_dedup: a document has no signature")
                    if len(k):
                        index.add(np.frombuffer(k.buffers()[1], dtype=np.uint8)[
                            k.offset * width:(k.offset + len(k)) * width])
                    size += len(k)
                    del k
                sizes.append(size)
                progress("signatures", task + 1, tasks)
                release_memory()
            if candidates is None:
                for band in range(bands):
                    progress("bands", band, bands)
                    index.join_band()
                progress("bands", bands, bands)
            else:
                index.offer_pairs(candidates)
                del candidates
            # The merge's read buffers: the exact check's budget now.
            release_memory()
            if self.verify == "exact":
                assert context.column is not None
                stats["candidates_rejected"] += self._exact_check(index, context.column, progress)
            raw, candidate_count, rejected, spilled, clusters = index.finish()
        # The keepers stay the u32s the index handed over (4 bytes a document, no copy); each
        # task's are a view of them.
        keeper = np.frombuffer(raw, dtype=np.uint32)
        stats["bands"], stats["rows"] = bands, rows
        stats["candidates"] += candidate_count
        stats["candidates_rejected"] += rejected
        stats["spilled_runs"] += spilled
        stats["clusters"] += clusters
        return split_by_task(keeper, sizes)

    def _exact_check(self, index: LshIndex, column: Callable[[str, np.ndarray], pa.Array],
                     progress: Callable[[str, int, int], None]) -> int:
        """Joins the candidate pairs whose shingle sets' exact Jaccard similarity reaches the
        threshold; returns how many did not. The index names the pairs' documents in
        position order, cut into slices of about ``memory_mb`` over
        ``EXACT_CHECK_MEMORY_PER_TEXT_BYTE`` of text (from the lengths in its keys: Python
        holds none); each slice's texts are read in one pass over the staging, once per
        document whatever pairs it is in, and their shingle sets go to the index's scratch
        file, from which it checks the pairs."""
        budget = (self.memory_mb << 20) // EXACT_CHECK_MEMORY_PER_TEXT_BYTE
        raw, cuts = index.check_documents(budget)
        documents = np.frombuffer(raw, dtype=np.uint32)
        total = len(documents)
        progress("exact check", 0, total)
        for start, end in zip(cuts, cuts[1:]):
            if start == end:
                continue
            texts = column(TEXT, documents[start:end])
            lsh_check_texts(index, texts, self.shingle, self.ngram, self.char_ngram, self.lowercase)
            del texts
            release_memory()
            progress("exact check", end, total)
        del documents, raw
        return int(index.check_pairs())


@dataclass(frozen=True)
class BandRows:
    """A task's rows for the band join (``MinhashDedup.join``): one per document with a
    signature and per band, ``band``, ``key`` (the band's values hashed by :func:`band_keys`)
    and ``pos``. Empty documents take no part, as in ``LshIndex``."""

    bands: int
    rows: int
    width: int

    def __call__(self, keys: pa.Array, positions: np.ndarray) -> pa.Table:
        tables = []
        if len(keys):
            raw = np.frombuffer(keys.buffers()[1], dtype=np.uint8)[
                keys.offset * self.width:(keys.offset + len(keys)) * self.width]
            signatures = raw.reshape(-1, self.width)[:, 8:].copy().view("<u4")
            live = (signatures != np.uint32(0xFFFFFFFF)).any(axis=1)
            signatures, positions = signatures[live], positions[live]
            for band in range(self.bands):
                tables.append(pa.table({"band": np.full(len(positions), band, dtype=np.int32),
                                        "key": band_keys(signatures, band, self.rows), "pos": positions}))
        if not tables:
            return pa.table({"band": pa.array([], pa.int32()), "key": pa.array([], pa.int64()),
                             "pos": pa.array([], pa.int64())})
        return pa.concat_tables(tables)


def band_keys(signatures: np.ndarray, band: int, rows: int) -> np.ndarray:
    """A 64-bit key of each signature's band ``band``: its values chained through a
    multiply-xorshift mix. Documents group by it as the core's ``LshIndex`` groups them by
    its own 64-bit band hash: equal bands always meet, unequal ones collide with odds of
    2^-64 a pair."""
    values = signatures[:, band * rows:(band + 1) * rows].astype(np.uint64)
    h = np.full(len(values), np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(band), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in values.T:
            h ^= column
            h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xC4CEB9FE1A85EC53)
            h ^= h >> np.uint64(29)
    return h.view(np.int64)
