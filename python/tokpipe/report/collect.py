"""Read one output folder for the report: everything the page shows, in one streaming pass.

The folder's ``manifest.json`` names every shard (kept and rejected, or a tokenize output's
files); the shards are read through :mod:`tokpipe.pipeline.fs` (so a bucket works too), a
batch at a time and only the columns the report needs, so memory holds a batch, the
per-document numbers the histograms bin, and small tallies, never the corpus.

What is exact and what is sampled:

- exact, from every row (every column but the text): the documents kept and rejected by
  stage and reason, languages, sources, domains (the top ones, past ``MAX_DOMAINS``),
  duplicate clusters (up to ``MAX_CLUSTER_IDS`` of them; past it, those of a hash-chosen
  sample of kept ids, each still exact), the rejected samples (the ``SAMPLES_PER_REASON``
  documents with the smallest hash of their id, per reason: the same for every run of the
  report on the same output; their text is fetched afterwards from their row groups alone,
  and masked with the run's ``pii`` stage's detectors when it had one), a tokenize output's
  document lengths in tokens;
- from the text, read for row groups spread evenly through the shards, up to
  ``TEXT_SAMPLE_BYTES`` of it (decompressing all the text is what would make the report slow:
  about 0.5 GB/s on two cores): text bytes and characters (totals and by reason, scaled from
  the sample by the exact row counts), lengths; within that, word counts on
  ``WORDS_SAMPLE_BYTES`` (splitting is ~60 MB/s) and distinct n-gram ratios on the first
  ``NGRAM_SAMPLE_BYTES`` of kept text;
- the per-document values the histograms bin: of every row up to ``HISTOGRAM_ROWS`` rows,
  of row groups spread evenly beyond.

An output smaller than the samples is read whole, and every number is exact. The page says
which numbers are sampled, and how much.

Why one file of nearly 600 lines: it is one pass over the shards, and every tally above is fed
from the same batch; split, each part would need the pass's state handed to it.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe import storage
from tokpipe.errors import FormatError, InvalidArgumentError, NotAnOutputError
from tokpipe.pipeline import fs, summary
from tokpipe.pipeline.kernels import exact_dedup_keys
from tokpipe.pipeline.tokenize.options import read_tokenized_manifest
from tokpipe.pipeline.writers import manifest as manifests
from tokpipe.storage import Location

__all__ = ["RunData", "Metric", "Threshold", "Sample", "read_output", "read_manifest", "LABELS",
           "SAMPLES_PER_REASON", "TEXT_SAMPLE_BYTES", "WORDS_SAMPLE_BYTES", "HISTOGRAM_ROWS", "NGRAM_SAMPLE_BYTES",
           "NGRAM_SIZES", "MAX_CLUSTER_IDS"]

SAMPLES_PER_REASON = 3
#: Characters of a sample document shown on the page.
SAMPLE_CHARS = 600
TEXT_SAMPLE_BYTES = 256 << 20
WORDS_SAMPLE_BYTES = 48 << 20
HISTOGRAM_ROWS = 2_000_000
NGRAM_SAMPLE_BYTES = 4 << 20
NGRAM_SIZES = (1, 2, 3, 4)
#: Domains kept in the tally before the rare ones are pruned (a web crawl has millions).
MAX_DOMAINS = 200_000
#: Distinct kept ids (clusters) whose duplicates a dedup stage's tally counts exactly; beyond,
#: it keeps the clusters of a hash-chosen half of the ids, then a quarter... (see ``_Clusters``).
MAX_CLUSTER_IDS = 200_000

#: Numeric columns stages write, beside ``stat_*`` (text_stats).
STAGE_COLUMNS = ("language_score", "perplexity", "quality_score", "blocklist_hits", "blocklist_per_1000_words")
_HOST = r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/?#]*@)?(?P<host>[^/:?#]+)"
_DEDUP_STAGES = ("exact_dedup", "minhash_dedup")


@dataclass
class Threshold:
    """A stage parameter drawn on a histogram: ``kind`` is ``min`` (documents under it are
    dropped), ``max`` (over it) or ``mark`` (a reference, such as ``seq_len``)."""

    value: float
    label: str
    kind: str = "min"


@dataclass
class Metric:
    """Per-document values of one column or text measure, kept against rejected."""

    key: str
    label: str
    kept: list[np.ndarray] = field(default_factory=list)
    rejected: list[np.ndarray] = field(default_factory=list)
    thresholds: list[Threshold] = field(default_factory=list)
    #: Documents whose value was measured, of ``total`` (sampled where fewer).
    measured: int = 0
    total: int = 0

    def values(self, kept: bool) -> np.ndarray:
        parts = self.kept if kept else self.rejected
        return np.concatenate(parts) if parts else np.zeros(0)


@dataclass
class Sample:
    """A rejected document shown on the page (text truncated to ``SAMPLE_CHARS``)."""

    id: str
    text: str
    truncated: bool
    duplicate_of: str | None = None


@dataclass
class RunData:
    """Everything the page shows about one output folder."""

    name: str
    manifest: dict[str, Any]
    kind: str
    rows: Counter = field(default_factory=Counter)  # "kept" / "rejected": every row read
    text_rows: Counter = field(default_factory=Counter)  # rows whose text was read, by side
    text_read: Counter = field(default_factory=Counter)  # their text bytes, by side
    reason_rows: Counter = field(default_factory=Counter)  # (stage, reason): every rejected row
    reason_text_rows: Counter = field(default_factory=Counter)  # (stage, reason): rows whose text was read
    reason_text_read: Counter = field(default_factory=Counter)  # (stage, reason): their text bytes
    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)
    errors: Counter = field(default_factory=Counter)
    error_samples: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    metrics: dict[str, Metric] = field(default_factory=dict)
    languages: dict[str, Counter] = field(default_factory=lambda: {"kept": Counter(), "rejected": Counter()})
    sources: dict[str, Counter] = field(default_factory=lambda: {"kept": Counter(), "rejected": Counter()})
    domains: Counter = field(default_factory=Counter)
    clusters: dict[str, Counter] = field(default_factory=dict)  # dedup stage -> kept id -> duplicates
    #: dedup stage -> k: ``clusters`` holds the clusters of 1 in 2**k kept ids (0: all of them).
    cluster_sampling: Counter = field(default_factory=Counter)
    cluster_removed: Counter = field(default_factory=Counter)  # dedup stage -> rows with a duplicate_of: exact
    ngram_ratios: dict[int, float] = field(default_factory=dict)
    ngram_docs: int = 0
    ngram_words: int = 0
    doc_lengths: np.ndarray | None = None  # tokenize: tokens per document
    seq_len: int | None = None
    tokens_by: dict[str, Counter] = field(default_factory=dict)  # "language"/"source" -> tokens
    notes: list[str] = field(default_factory=list)

    @property
    def text_sampled(self) -> bool:
        """Whether the text of some rows was not read (bytes are then estimates)."""
        return sum(self.text_rows.values()) < sum(self.rows.values())

    def text_bytes(self, side: str) -> int | None:
        """The text bytes of the ``side`` ("kept", "rejected") documents: exact when every
        row's text was read, else the sampled rows' mean times the rows; None if none read."""
        return _scaled(self.text_read[side], self.text_rows[side], self.rows[side])

    def reason_bytes(self, key: tuple[str, str]) -> int | None:
        """The text bytes of the documents dropped for ``key`` (stage, reason), as
        :meth:`text_bytes`."""
        return _scaled(self.reason_text_read[key], self.reason_text_rows[key], self.reason_rows[key])

    def stage_bytes(self, stage: str) -> int | None:
        """The text bytes of the documents ``stage`` dropped; None if it dropped none."""
        parts = [self.reason_bytes(key) for key in self.reason_rows if key[0] == stage]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None


def _id_hashes(ids: pa.Array) -> np.ndarray:
    """The first 8 bytes, big-endian, of each id's BLAKE2b-128 (the exact-dedup kernel's key):
    a stable order over ids, the same in every run."""
    return np.frombuffer(exact_dedup_keys(ids, False, False).buffers()[1], dtype=">u8")[::2][:len(ids)]


def _hash_level_ok(ids: pa.Array, level: int) -> pa.Array:
    """Whether each id's hash falls in the lowest 1/2**``level`` of the range."""
    return pa.array(_id_hashes(ids) >> np.uint64(64 - level) == 0)


def _scaled(read: int, rows_read: int, rows: int) -> int | None:
    if rows_read == rows:
        return read
    return round(read / rows_read * rows) if rows_read else None


class _Spread:
    """Says yes to a ``rate`` share of calls, spread evenly (the first call is a yes)."""

    def __init__(self, rate: float) -> None:
        self.rate, self.credit = min(1.0, rate), 1.0

    def __call__(self) -> bool:
        if self.credit >= 1.0:
            self.credit += self.rate - 1.0
            return True
        self.credit += self.rate
        return False


def read_manifest(out: Location) -> dict[str, Any]:
    """The manifest of a clean or tokenize output (read and checked by the writers' own
    readers), or :class:`NotAnOutputError` naming the folder."""
    shown = storage.redact(str(out))
    if not fs.exists(out / manifests.MANIFEST_NAME):
        raise NotAnOutputError(f"{shown}: not a tokpipe output folder (no {manifests.MANIFEST_NAME}; give the -o "
                               "folder of a finished `tokpipe clean` or `tokpipe tokenize` run)")
    try:
        return read_tokenized_manifest(out) or manifests.read_manifest(out)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NotAnOutputError(f"{shown}/{manifests.MANIFEST_NAME}: not valid JSON ({e})") from None
    except FormatError as e:
        raise NotAnOutputError(f"{e} (not a finished tokpipe clean or tokenize output)") from None


def _thresholds(manifest: dict[str, Any]) -> dict[str, list[Threshold]]:
    """The config's thresholds, by the metric they apply to."""
    out: dict[str, list[Threshold]] = {}

    def add(metric: str, value: Any, label: str, kind: str) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.setdefault(metric, []).append(Threshold(float(value), label, kind))

    for stage, params in summary.pipeline_stages(manifest):
        if stage == "language":
            add("language_score", params.get("min_score"), "language.min_score", "min")
        elif stage == "perplexity":
            add("perplexity", params.get("max_perplexity"), "perplexity.max_perplexity", "max")
            for n, cut in enumerate(params.get("cutoffs") or ()):
                add("perplexity", cut, f"perplexity.cutoffs[{n}]", "mark")
        elif stage == "quality_classifier":
            add("quality_score", params.get("threshold"), "quality_classifier.threshold", "min")
        elif stage == "blocklist":
            add("blocklist_per_1000_words", params.get("max_per_1000_words"), "blocklist.max_per_1000_words", "max")
        elif stage == "text_stats":
            for key, value in params.items():
                bound, _, feature = key.partition("_")
                if bound in ("min", "max") and feature:
                    add(f"stat_{feature}", value, f"text_stats.{key}", bound)
        elif stage == "gopher_quality":
            add("words", params.get("min_doc_words"), "gopher_quality.min_doc_words", "min")
            add("words", params.get("max_doc_words"), "gopher_quality.max_doc_words", "max")
        elif stage == "length_filter":
            metric = "bytes" if params.get("unit") == "bytes" else "chars"
            add(metric, params.get("min"), "length_filter.min", "min")
            add(metric, params.get("max"), "length_filter.max", "max")
    return out


LABELS = {"chars": "length (characters)", "bytes": "length (UTF-8 bytes)",
           "words": "words (whitespace-separated)", "language_score": "language_score",
           "tokens": "document length (tokens)"}


def _metric(run: RunData, key: str, thresholds: dict[str, list[Threshold]]) -> Metric:
    if key not in run.metrics:
        run.metrics[key] = Metric(key, LABELS.get(key, key), thresholds=thresholds.get(key, []))
    return run.metrics[key]


def _count(counter: Counter, array: pa.Array) -> None:
    for item in pc.value_counts(array).to_pylist():
        value = item["values"]
        counter["(none)" if value is None else str(value)] += item["counts"]


def _hosts(urls: pa.Array) -> pa.Array | None:
    if not pa.types.is_string(urls.type) and not pa.types.is_large_string(urls.type):
        return None
    return pc.struct_field(pc.extract_regex(urls, _HOST), "host")


def _domains(batch: pa.RecordBatch) -> pa.Array | None:
    """Each row's host: of its ``url`` column, else of ``metadata.url`` (Common Crawl JSONL),
    else of its id where the id is a URL; lowercased, ``www.`` removed; null when none."""
    found = []
    names = batch.schema.names
    if "url" in names:
        found.append(_hosts(batch.column("url")))
    if "metadata" in names:
        meta = batch.column("metadata")
        if pa.types.is_struct(meta.type) and meta.type.get_field_index("url") >= 0:
            found.append(_hosts(pc.struct_field(meta, "url")))
    if "id" in names:
        found.append(_hosts(batch.column("id")))
    found = [f for f in found if f is not None]
    if not found:
        return None
    hosts = pc.coalesce(*found) if len(found) > 1 else found[0]
    return pc.replace_substring_regex(pc.utf8_lower(hosts), r"^www\.", "")


class _Collector:
    """The streaming pass over one clean output's shards, a row group at a time."""

    def __init__(self, run: RunData, out: Location, total_rows: int, text_bytes_estimate: int) -> None:
        self.run, self.out = run, out
        self.total_rows = total_rows
        self.thresholds = _thresholds(run.manifest)
        text_share = min(1.0, TEXT_SAMPLE_BYTES / max(text_bytes_estimate, 1))
        self.text_spread = _Spread(text_share)
        self.words_spread = _Spread(WORDS_SAMPLE_BYTES / max(text_bytes_estimate * text_share, 1))
        self.histogram_spread = _Spread(HISTOGRAM_ROWS / max(total_rows, 1))
        self.heaps: dict[tuple[str, str], list[tuple[int, str, int, Sample, tuple[str, int, int] | None]]] = {}
        self.seen = 0
        self.ngram_texts: list[str] = []
        self.ngram_bytes = 0
        self.masker = _sample_masker(run.manifest)

    def shard(self, rel: str, kept: bool) -> None:
        path = self.out / rel
        if not rel.endswith(".parquet"):
            note = "JSON Lines shards are counted from the manifest only (the per-document sections read Parquet)"
            if note not in self.run.notes:
                self.run.notes.append(note)
            return
        with fs.parquet_file(path) as parquet:
            schema = parquet.schema_arrow
            names = schema.names
            numeric = [n for n in names if (n in STAGE_COLUMNS or n.startswith("stat_"))
                       and (pa.types.is_integer(schema.field(n).type) or pa.types.is_floating(schema.field(n).type))]
            wanted = ["id", "language", "source", "url", "stage", "reason", "duplicate_of", *numeric]
            columns = [c for c in wanted if c in names]
            if "metadata" in names and pa.types.is_struct(schema.field("metadata").type) \
                    and schema.field("metadata").type.get_field_index("url") >= 0:
                columns.append("metadata")
            for group in range(parquet.metadata.num_row_groups):
                with_text = "text" in names and self.text_spread()
                batch = parquet.read_row_group(group, columns=columns + ["text"] * with_text)
                self.batch(batch, kept, numeric, (rel, group))

    def batch(self, batch: pa.Table, kept: bool, numeric: list[str], where: tuple[str, int]) -> None:
        run, side = self.run, "kept" if kept else "rejected"
        names = batch.schema.names
        run.rows[side] += batch.num_rows
        histogram = self.histogram_spread()
        size = None
        if "text" in names:
            text = batch.column("text")
            size = pc.binary_length(text).to_numpy(zero_copy_only=False)
            chars = pc.utf8_length(text).to_numpy(zero_copy_only=False)
            run.text_rows[side] += batch.num_rows
            run.text_read[side] += int(size.sum())
            self._measure("chars", side, chars)
            if "bytes" in self.thresholds:
                self._measure("bytes", side, size)
            if self.words_spread():
                words = pc.list_value_length(pc.utf8_split_whitespace(text)).to_numpy(zero_copy_only=False)
                self._measure("words", side, words)
                if kept and self.ngram_bytes < NGRAM_SAMPLE_BYTES:
                    for doc in text.to_pylist():
                        if doc and self.ngram_bytes < NGRAM_SAMPLE_BYTES:
                            self.ngram_texts.append(doc)
                            self.ngram_bytes += len(doc)
        if histogram:
            for name in numeric:
                values = batch.column(name).to_numpy().astype(np.float32)
                self._measure(name, side, values[~np.isnan(values)], batch.num_rows)
        if "language" in names:
            _count(run.languages[side], batch.column("language"))
        if "source" in names:
            _count(run.sources[side], batch.column("source"))
        if kept:
            hosts = _domains(batch)
            if hosts is not None:
                _count(run.domains, hosts)
                if len(run.domains) > MAX_DOMAINS:
                    run.domains = Counter(dict(run.domains.most_common(MAX_DOMAINS // 2)))
        elif "reason" in names:
            self.rejected(batch, size, where)

    def _measure(self, key: str, side: str, values: np.ndarray, rows: int | None = None) -> None:
        metric = _metric(self.run, key, self.thresholds)
        getattr(metric, side).append(values.astype(np.float32))
        metric.measured += len(values) if rows is None else rows

    def rejected(self, batch: pa.Table, size: np.ndarray | None, where: tuple[str, int]) -> None:
        """Tallies of one batch of rejected rows, vectorised: a batch holds few reasons."""
        run = self.run
        names = batch.schema.names
        n = batch.num_rows
        stages = batch.column("stage") if "stage" in names else pa.nulls(n, pa.string())
        keys = pc.binary_join_element_wise(pc.fill_null(stages, ""), pc.fill_null(batch.column("reason"), ""), "\x1f")
        ids = batch.column("id") if "id" in names else pa.array([f"{where[0]}#{where[1]}:{i}" for i in range(n)])
        ranks = _id_hashes(ids)
        codes = pc.dictionary_encode(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys)
        indices = codes.indices.to_numpy(zero_copy_only=False)
        texts = batch.column("text") if "text" in names else None
        dups = batch.column("duplicate_of") if "duplicate_of" in names else None
        for code, joined in enumerate(codes.dictionary.to_pylist()):
            key = tuple(joined.split("\x1f", 1))
            rows = np.flatnonzero(indices == code)
            run.reason_rows[key] += len(rows)
            if size is not None:
                run.reason_text_rows[key] += len(rows)
                run.reason_text_read[key] += int(size[rows].sum())
            if dups is not None and key[0] in _DEDUP_STAGES:
                of = pc.drop_null(dups.take(pa.array(rows)))
                if len(of):
                    self._clusters(key[0], of)
            self._candidates(key, rows, ranks, ids, texts, dups, where)

    def _clusters(self, stage: str, of: pa.Array) -> None:
        """Count the duplicates of each kept id in ``of``, bounded: past ``MAX_CLUSTER_IDS``
        distinct ids, only the ids whose hash falls in the lowest 1/2**k of the range are kept
        (k raised by one each time the tally fills again). Whether an id is kept depends on the
        id alone, so a kept id's count is exact; the page scales the number of clusters and
        their sizes' distribution by 2**k and says they are sampled."""
        run = self.run
        run.cluster_removed[stage] += len(of)
        cluster = run.clusters.setdefault(stage, Counter())
        level = run.cluster_sampling[stage]
        counts = pc.value_counts(of)
        values = counts.field("values")
        if level:
            values_kept = _hash_level_ok(values, level)
            counts = counts.filter(values_kept)
        for item in counts.to_pylist():
            cluster[item["values"]] += item["counts"]
        while len(cluster) > MAX_CLUSTER_IDS:
            level = run.cluster_sampling[stage] = run.cluster_sampling[stage] + 1
            ids = list(cluster)
            keep = _hash_level_ok(pa.array(ids, pa.string()), level).to_numpy(zero_copy_only=False)
            run.clusters[stage] = cluster = Counter({i: cluster[i] for i, ok in zip(ids, keep) if ok})

    def _candidates(self, key: tuple[str, str], rows: np.ndarray, ranks: np.ndarray, ids: Any, texts: Any,
                    dups: Any, where: tuple[str, int]) -> None:
        heap = self.heaps.setdefault(key, [])
        best = rows[np.argsort(ranks[rows], kind="stable")[:SAMPLES_PER_REASON]]
        for row in best:
            rank = int(ranks[row])
            if len(heap) == SAMPLES_PER_REASON and -heap[0][0] <= rank:
                break
            doc_id = str(ids[int(row)].as_py())
            if any(item[1] == doc_id for item in heap):  # an id an output repeats is shown once
                continue
            text = texts[int(row)].as_py() if texts is not None else None
            dup = dups[int(row)].as_py() if dups is not None else None
            sample = Sample(doc_id, *self._shown(text), dup)
            # The counter breaks ties between equal ids (an output may repeat one) before the sample.
            self.seen += 1
            item = (-rank, sample.id, -self.seen, sample, None if texts is not None else (*where, int(row)))
            if len(heap) < SAMPLES_PER_REASON:
                heapq.heappush(heap, item)
            else:
                heapq.heapreplace(heap, item)

    def _shown(self, text: str | None) -> tuple[str, bool]:
        """A sample's text as the page shows it: PII masked when a ``pii`` stage ran (the
        whole text, before the cut, so that no match is cut in two and missed), then cut at
        ``SAMPLE_CHARS``; and whether it was cut."""
        text = text or ""
        if self.masker is not None and text:
            text = self.masker.scrub(pa.array([text], pa.large_string()))[0][0].as_py()
        return text[:SAMPLE_CHARS], len(text) > SAMPLE_CHARS

    def finish(self) -> None:
        """The text of the samples whose row group was read without it, and the n-grams."""
        missing: dict[tuple[str, int], list[tuple[int, Sample]]] = {}
        for heap in self.heaps.values():
            for _, _, _, sample, place in heap:
                if place is not None:
                    missing.setdefault(place[:2], []).append((place[2], sample))
        for (rel, group), wanted in missing.items():
            with fs.parquet_file(self.out / rel) as parquet:
                text = parquet.read_row_group(group, columns=["text"]).column("text")
            for row, sample in wanted:
                sample.text, sample.truncated = self._shown(text[row].as_py())
        for key, heap in self.heaps.items():
            ordered = sorted(heap, key=lambda item: (-item[0], item[1], -item[2]))
            self.run.samples[key] = [sample for _, _, _, sample, _ in ordered]
        if self.ngram_texts:
            self.run.ngram_ratios, self.run.ngram_words = ngram_ratios(self.ngram_texts)
            self.run.ngram_docs = len(self.ngram_texts)
        for metric in self.run.metrics.values():
            metric.total = self.total_rows


def _sample_masker(manifest: dict[str, Any]) -> Any:
    """The run's ``pii`` stage, rebuilt with its ``types`` and ``only_public_ip`` and the action
    ``mask``, to mask the sample texts the page shows (whatever the run's own ``action`` and
    ``scrub_rejected``: a ``tag`` or ``keep`` run, or ``scrub_rejected: false``, leaves PII in
    rejected/); None when no ``pii`` stage ran."""
    for stage, params in summary.pipeline_stages(manifest):
        if stage == "pii":
            from tokpipe.pipeline.stages.pii import Pii  # here: importing it loads every stage

            try:
                return Pii(types=params.get("types"), only_public_ip=params.get("only_public_ip") is True,
                           action="mask")
            except InvalidArgumentError:  # types this tokpipe does not know: mask every type it does
                return Pii(action="mask")
    return None


def ngram_ratios(texts: list[str], sizes: tuple[int, ...] = NGRAM_SIZES) -> tuple[dict[int, float], int]:
    """Distinct word n-grams over all n-grams, for each n in ``sizes``, over ``texts``
    (lowercased, whitespace-split words; n-grams do not cross documents); and the words read.

    Vectorised: each word becomes its index among the distinct words, each n-gram a 64-bit
    mix of its words' indices (a collision among a few million n-grams is unlikely, and
    would only lower a ratio by one in millions)."""
    words = pc.utf8_split_whitespace(pc.utf8_lower(pa.array(texts, pa.large_string())))
    flat = pc.list_flatten(words)
    if not len(flat):
        return {}, 0
    ids = pc.dictionary_encode(flat).indices.to_numpy(zero_copy_only=False).astype(np.uint64)
    doc = pc.list_parent_indices(words).to_numpy(zero_copy_only=False)
    ratios = {}
    with np.errstate(over="ignore"):
        for n in sizes:
            if len(ids) < n:
                continue
            key = ids[: len(ids) - n + 1].copy()
            for k in range(1, n):
                key = key * np.uint64(0x9E3779B97F4A7C15) ^ ids[k: len(ids) - n + 1 + k]
            inside = doc[: len(doc) - n + 1] == doc[n - 1:]
            grams = key[inside]
            if len(grams):
                ratios[n] = len(np.unique(grams)) / len(grams)
    return ratios, len(flat)


def _errors(run: RunData, out: Location) -> None:
    path = out / manifests.ERRORS_NAME
    if not fs.exists(path):
        return
    with fs.open_read(path) as f:
        for line in f:
            try:
                error = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            reason = str(error.get("reason", "unknown"))
            run.errors[reason] += 1
            shown = run.error_samples.setdefault(reason, [])
            if len(shown) < SAMPLES_PER_REASON:
                shown.append({"path": storage.redact(str(error.get("path", "")))[-200:],
                              "location": str(error.get("location", ""))[:80],
                              "detail": str(error.get("detail", ""))[:200]})


def _estimate_text_bytes(out: Location, shards: list[str]) -> int:
    """The text column's uncompressed size, from the Parquet footers (no data read)."""
    total = 0
    for rel in shards:
        if not rel.endswith(".parquet"):
            continue
        with fs.parquet_file(out / rel) as parquet:
            meta = parquet.metadata
            names = parquet.schema_arrow.names
            if "text" not in names:
                continue
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    if group.column(c).path_in_schema == "text":
                        total += group.column(c).total_uncompressed_size
    return total


def read_output(output: str, name: str | None = None) -> RunData:
    """Read the output folder ``output`` (a path or URL) for the report: its manifest and
    errors, and a clean output's shards (:func:`tokpipe.report.collect` adds a tokenize
    output's documents)."""
    out = storage.location(output)
    manifest = read_manifest(out)
    run = RunData(name or storage.redact(str(output)), manifest, summary.run_kind(manifest))
    _errors(run, out)
    if run.kind == "tokenize":  # its documents are read by tokpipe.report.tokens
        return run
    kept = [e["path"] for e in manifest.get("shards") or ()]
    rejected = [e["path"] for e in manifest.get("rejected") or ()]
    rows = sum(int(e.get("rows", 0)) for e in (manifest.get("shards") or []) + (manifest.get("rejected") or []))
    collector = _Collector(run, out, rows, _estimate_text_bytes(out, kept + rejected))
    for rel in kept:
        collector.shard(rel, kept=True)
    for rel in rejected:
        collector.shard(rel, kept=False)
    collector.finish()
    return run
