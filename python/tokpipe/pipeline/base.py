"""Stages: the unit of a pipeline. A stage maps an Arrow record batch of documents to the
documents it keeps and, for filters, the documents it drops with their reason.

A stage owns its statistics (documents in, kept, dropped per reason, seconds), so a filter is
only its keep mask::

    @register
    class ShortDocs(Filter):
        \"\"\"Drop documents under ``min_chars`` characters.\"\"\"
        name = "short_docs"

        def __init__(self, min_chars: int = 100) -> None:
            self.min_chars = min_chars

        def keep(self, batch: pa.RecordBatch) -> Verdict:
            return pc.greater_equal(pc.utf8_length(batch["text"]), self.min_chars), "too_short"

Stages see batches of any size and must give the same answer however the documents are cut
into batches; a stage that needs every document at once (deduplication across the whole
corpus) says so with ``scope = "global"`` and is run by the executor in its own phase.

A stage can also judge its place in a config (``config_warnings``, given the stages before
it; ``may_reject`` says whether a stage can drop documents), and ask the executor for the
documents that stages before it reject (``rewrites_rejected``, ``rewrite_rejected``): the
``pii`` stage scrubs them before they are written to rejected/.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, Union, runtime_checkable

import numpy as np
import pyarrow as pa

from tokpipe.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["Stage", "Filter", "GlobalStage", "Decision", "DecideContext", "GroupJoin", "split_by_task", "scratch_space",
           "PiecewiseKeys", "key_pieces", "StageResult", "StageStats", "Verdict", "register",
           "REGISTRY", "StageRegistry", "split_rejected", "REASON", "STAGE", "DUPLICATE_OF"]

#: Columns a rejected document carries besides its own: why, and which stage dropped it.
REASON = "reason"
STAGE = "stage"
#: Column of a rejected duplicate: the id of the document kept in its place (the executor
#: fills it from a ``GlobalStage``'s decision).
DUPLICATE_OF = "duplicate_of"

#: What ``Filter.keep`` returns: a boolean mask (True keeps the row) and the reason for the
#: dropped rows, one string for all of them or one per row (only dropped rows' reasons are read).
Verdict = tuple[Union[pa.Array, pa.ChunkedArray, np.ndarray, Sequence[bool]],
                Union[str, pa.Array, np.ndarray, Sequence[str]]]


def numbered(names: Sequence[str]) -> list[str]:
    """``names`` made unique in order: a name met again gets ``-2``, ``-3``... (the run's
    stats rows and the folders of ``rejected_by_stage`` name two stages of one type so)."""
    out: list[str] = []
    for base in names:
        name, n = base, 1
        while name in out:
            n += 1
            name = f"{base}-{n}"
        out.append(name)
    return out


@dataclass
class StageStats:
    """Counts for one stage, summed over batches, tasks and workers."""

    stage: str
    input: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    #: Stage-specific counters (bytes removed, paragraphs removed, ...).
    extra: Counter[str] = field(default_factory=Counter)

    def merge(self, other: StageStats) -> None:
        self.input += other.input
        self.kept += other.kept
        self.dropped.update(other.dropped)
        self.seconds += other.seconds
        self.extra.update(other.extra)

    def as_dict(self) -> dict[str, Any]:
        """Flat, JSON-ready: ``in``, ``kept``, ``dropped_<reason>``, extras, ``seconds``."""
        out: dict[str, Any] = {"in": self.input, "kept": self.kept}
        out.update({f"dropped_{reason}": n for reason, n in sorted(self.dropped.items())})
        out.update(sorted(self.extra.items()))
        out["seconds"] = round(self.seconds, 3)
        return out

    @classmethod
    def from_dict(cls, stage: str, data: dict[str, Any]) -> StageStats:
        stats = cls(stage, input=int(data.get("in", 0)), kept=int(data.get("kept", 0)),
                    seconds=float(data.get("seconds", 0.0)))
        for key, value in data.items():
            if key.startswith("dropped_"):
                stats.dropped[key.removeprefix("dropped_")] = int(value)
            elif key not in ("in", "kept", "seconds"):
                stats.extra[key] = value
        return stats


@dataclass
class StageResult:
    kept: pa.RecordBatch
    #: Dropped documents with ``reason`` and ``stage`` columns added, or None when none were.
    rejected: pa.RecordBatch | None = None


class StageRegistry:
    """Stage classes by their ``name``, as :func:`register` records them.

    Look stages up with :func:`tokpipe.pipeline.stages.registered_stages`, which imports the
    built-in stages first; this module cannot, since they import it.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, type[Stage]] = {}

    def add(self, cls: type[Stage]) -> type[Stage]:
        if not cls.name:
            raise ArgumentTypeError(f"{cls.__name__} needs a `name` to be registered")
        existing = self._by_name.get(cls.name)
        if existing is not None and existing is not cls:
            raise ArgumentTypeError(f"stage name {cls.name!r} is taken by {existing.__module__}.{existing.__qualname__}")
        self._by_name[cls.name] = cls
        return cls

    def snapshot(self) -> dict[str, type[Stage]]:
        """The stages registered so far, sorted by name."""
        return dict(sorted(self._by_name.items()))


#: The one registry: built-in stages and every user stage decorated with ``@register``.
REGISTRY = StageRegistry()


def register(cls: type[Stage]) -> type[Stage]:
    """Class decorator: make a stage usable by its ``name`` in configs and on the command line."""
    return REGISTRY.add(cls)


class Stage:
    """Maps a record batch to a record batch. Subclasses set ``name`` and implement ``apply``
    (or, for filters, ``keep``); ``process`` adds the timing and the counting."""

    #: Registered name, used in configs (``type: <name>``) and stats.
    name: ClassVar[str] = ""
    #: "document": each document is handled on its own (runs in parallel, per batch).
    #: "global": the stage needs the whole corpus; the executor gives it its own phase.
    scope: ClassVar[str] = "document"

    _stats: StageStats

    @property
    def stats(self) -> StageStats:
        if not hasattr(self, "_stats"):
            self._stats = StageStats(self.name)
        return self._stats

    def process(self, batch: pa.RecordBatch) -> StageResult:
        started = time.perf_counter()
        result = self.apply(batch)
        if isinstance(result, pa.RecordBatch):
            result = StageResult(result)
        stats = self.stats
        stats.input += batch.num_rows
        stats.kept += result.kept.num_rows
        if result.rejected is not None and result.rejected.num_rows:
            # Counted in Arrow, then in the order np.unique gave (sorted), so the stats read
            # as they did; a string column's to_numpy() would import pandas (0.8 s of CPU in
            # every worker, more than a stage spends on a few MB).
            counted = result.rejected.column(REASON).value_counts()
            values = ["None" if v is None else str(v) for v in counted.field("values").to_pylist()]
            for value, count in sorted(zip(values, counted.field("counts").to_pylist())):
                stats.dropped[value] += count
        stats.seconds += time.perf_counter() - started
        return result

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch | StageResult:
        raise NotImplementedError(f"{type(self).__name__} must implement apply() or keep()")

    def params(self) -> dict[str, Any]:
        """The parameters this stage was built with (as a config would give them)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def pinned_params(self) -> dict[str, Any]:
        """Parameters whose value this stage resolved from the machine it was built on (the
        ``language`` stage's ``backend: auto``), as they resolved. ``parse_config`` records them
        in the config: every worker then builds the same stage, and a resume where they would
        resolve otherwise is refused as another config instead of mixing two results."""
        return {}

    def may_reject(self) -> bool:
        """Whether this stage, with these parameters, can drop documents. Only config checks
        ask (see ``config_warnings``); the default is yes, since a stage that says nothing
        might."""
        return True

    def config_warnings(self, earlier: Sequence[Stage]) -> list[str]:
        """Problems with this stage's place in a pipeline, given the stages before it (built
        from the same config): ``parse_config`` raises each as a ``ConfigWarning``. Say what
        goes wrong in one line, never with document data."""
        return []

    def rewrites_rejected(self) -> bool:
        """Whether the executor must hand this stage, through ``rewrite_rejected``, the
        documents that stages *before* it reject. For a stage that removes what must not be
        stored (``pii``): rejected/ is an output too, and a document dropped before the
        stage never reached it."""
        return False

    def rewrite_rejected(self, rejected: pa.RecordBatch) -> pa.RecordBatch:
        """Documents an earlier stage rejected (they carry ``reason``, ``stage`` and perhaps
        ``duplicate_of``), rewritten as this stage rewrites the documents it keeps; the same
        rows in the same order, nothing dropped, no stats counted. Called only when
        ``rewrites_rejected``."""
        return rejected

    def reject(self, batch: pa.RecordBatch, mask: np.ndarray, reasons: str | np.ndarray) -> StageResult:
        """Split ``batch`` by ``mask`` (True keeps), labelling dropped rows with ``reasons``."""
        return split_rejected(batch, mask, reasons, self.name)


def split_rejected(batch: pa.RecordBatch, mask: np.ndarray, reasons: str | np.ndarray, stage: str) -> StageResult:
    """``batch`` split by ``mask`` (True keeps); the dropped rows get the ``reason`` (one for
    all, or per row of ``batch``) and ``stage`` columns every rejected document carries."""
    from tokpipe.pipeline.kernels import arrow_of, repeat_string, string_array

    mask = np.asarray(mask, dtype=bool)
    if mask.all():
        return StageResult(batch)
    # Rows by index (not a boolean filter): no pyarrow conversion of a numpy array needed.
    kept = batch.take(arrow_of(np.flatnonzero(mask)))
    dropped = batch.take(arrow_of(np.flatnonzero(~mask)))
    if isinstance(reasons, str):
        reason_column = repeat_string(reasons, dropped.num_rows)
    else:
        reason_column = string_array(np.asarray(reasons, dtype=object)[~mask].tolist())
    dropped = dropped.append_column(REASON, reason_column)
    dropped = dropped.append_column(STAGE, repeat_string(stage, dropped.num_rows))
    return StageResult(kept, dropped)


class Filter(Stage):
    """A stage that only keeps or drops documents: implement ``keep``."""

    def keep(self, batch: pa.RecordBatch) -> Verdict:
        raise NotImplementedError(f"{type(self).__name__} must implement keep()")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        mask, reasons = self.keep(batch)
        if isinstance(mask, (pa.Array, pa.ChunkedArray)):
            from tokpipe.pipeline.kernels import flags_of

            mask = flags_of(mask)
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (batch.num_rows,):
            raise InvalidArgumentError(f"stage {self.name}: keep() gave {mask.shape[0]} flags for {batch.num_rows} documents")
        if not isinstance(reasons, str) and isinstance(reasons, (pa.Array, pa.ChunkedArray)):
            reasons = np.asarray(reasons.to_pylist(), dtype=object)
        return self.reject(batch, mask, reasons)


@dataclass
class Decision:
    """A global stage's verdict on one task: ``keeper`` as ``GlobalStage.decide`` describes,
    and per-document ``columns`` (one value per document) handed back to ``revise`` with the
    task's documents."""

    keeper: np.ndarray
    columns: dict[str, pa.Array] = field(default_factory=dict)


def _no_progress(phase: str, done: int, total: int) -> None:
    pass


@dataclass
class DecideContext:
    """What the executor lends a global stage's ``decide``: ``scratch``, a private directory
    on the run's disk (emptied afterwards) for what outgrows memory; ``progress(phase, done,
    total)`` to report each phase of a long decision; and ``column(name, positions)``, the
    values of a string column (the text, say) at sorted global positions, read from the
    staged documents, for a stage whose keys do not say enough."""

    scratch: Path | None = None
    progress: Callable[[str, int, int], None] = _no_progress
    column: Callable[[str, np.ndarray], pa.Array] | None = None

    @classmethod
    def of_batches(cls, batches: Sequence[pa.RecordBatch], scratch: Path | None = None) -> DecideContext:
        """A context over documents held in memory: the batches whose keys ``decide`` gets,
        in the same order (for calling ``decide`` outside an executor)."""
        def column(name: str, positions: np.ndarray) -> pa.Array:
            values = pa.concat_arrays([b.column(name) for b in batches]) if batches else pa.array([], pa.string())
            return values.take(pa.array(positions))
        return cls(scratch=scratch, column=column)


@contextmanager
def scratch_space(context: DecideContext | None) -> Iterator[Path]:
    """The context's scratch directory, or a temporary one (for ``decide`` called by hand)."""
    if context is not None and context.scratch is not None:
        context.scratch.mkdir(parents=True, exist_ok=True)
        yield context.scratch
        return
    with tempfile.TemporaryDirectory(prefix="tokpipe-") as tmp:
        yield Path(tmp)


@dataclass(frozen=True)
class GroupJoin:
    """A global stage's decision cast as a group-by, which an engine may run across machines
    (the Ray engine does, on Ray Data) instead of calling ``decide`` on the driver; see
    ``GlobalStage.join``. Plain data and functions: the stage knows no engine.

    The engine turns each task's keys into rows with ``rows(keys, positions)``: a table of
    the ``by`` columns and ``pos``, the documents' global positions (in task order). It
    groups every task's rows by ``by`` and, over the groups of more than one row, finds:

    * with ``representatives`` None, each document's *keeper*: the smallest position in its
      group (its own when it is alone), one int64 per document in global order. ``by`` is
      then one column of binary values of one length.
    * with ``representatives`` n, the candidate *pairs* of positions ``(a, b)``: each member
      ``b`` of a group (in position order) with the group's first ``min(rank of b, n)``
      members; an array of shape ``(k, 2)``, sorted and unique. The engine may first keep
      only the rows whose last ``by`` value occurs in such a group: a row that gets through
      on that value alone still lands in its own group, and a group of one pairs nothing.

    ``finish(found, keys, sizes, context)`` makes ``decide``'s answer of what the engine
    found, the keys (per task, as ``decide`` gets them), the documents per task, and the
    context. ``name`` names the join in progress messages.
    """

    name: str
    by: tuple[str, ...]
    rows: Callable[[pa.Array, np.ndarray], pa.Table]
    finish: Callable[[np.ndarray, Sequence[pa.Array], Sequence[int], DecideContext],
                     Union[list[np.ndarray], list[Decision]]]
    representatives: int | None = None


@runtime_checkable
class PiecewiseKeys(Protocol):
    """Keys an engine can also hand over a piece at a time (``pieces(task)``: the task's
    keys in order, as a few arrays read one after another), so that a stage which consumes
    its keys as a stream holds one piece instead of a whole task's."""

    def pieces(self, task: int) -> Iterator[pa.Array]: ...


def key_pieces(keys: Sequence[pa.Array], task: int) -> Iterator[pa.Array]:
    """Task ``task``'s keys in order: in pieces when ``keys`` offers them
    (:class:`PiecewiseKeys`), else the task's whole array."""
    if isinstance(keys, PiecewiseKeys):
        return keys.pieces(task)
    return iter([keys[task]])


def split_by_task(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Values in global order cut into one array per task of ``sizes`` documents."""
    bounds = np.cumsum([0, *sizes])
    return [values[bounds[i]:bounds[i + 1]] for i in range(len(sizes))]


class GlobalStage(Stage):
    """A stage that must see the whole corpus before it can drop anything (deduplication).

    The executor runs it in two steps: ``keys`` in the parallel phase, one key per document
    of every batch; then ``decide`` once, over the keys of every task in task order, giving
    for each document the position (in that same global order) of the document kept in its
    place: its own position keeps it, any other drops it as a ``duplicate`` of that one.

    ``keys`` may be read lazily, task by task: iterate it once. ``context`` gives scratch
    space and a progress callback (see ``DecideContext``).

    ``decide`` may also return a ``Decision`` per task, whose columns come back to ``revise``
    with each batch of the task's documents before the duplicates are dropped (by default
    they are added to the documents). Counts ``decide`` puts in ``self.stats`` (``extra``, and
    ``dropped`` for what ``revise`` will drop) are reported with the stage's.

    A stage whose decision is a group-by of its keys may say so with ``join`` (a
    ``GroupJoin``): an engine that runs on a cluster (``ray``) then does the grouping there,
    and the stage finishes the decision from what the grouping found.
    """

    scope = "global"

    #: When set, the executor gives every document this column: the id of the document kept
    #: for its cluster of duplicates (the kept one included), null for a document with none.
    cluster_column: ClassVar[str | None] = None

    def keys(self, batch: pa.RecordBatch) -> pa.Array:
        raise NotImplementedError(f"{type(self).__name__} must implement keys()")

    def key_type(self) -> pa.DataType:
        """The type of the arrays ``keys`` returns (to read back a task with no documents)."""
        return pa.binary(16)

    def decide(self, keys: Sequence[pa.Array], context: DecideContext | None = None) -> list[np.ndarray] | list[Decision]:
        raise NotImplementedError(f"{type(self).__name__} must implement decide()")

    def join(self) -> GroupJoin | None:
        """This decision as a group-by an engine may distribute (see ``GroupJoin``), or None
        (the default) when ``decide`` must run as it is."""
        return None

    def revise(self, batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> tuple[pa.RecordBatch, np.ndarray | None]:
        """Applies a ``Decision``'s columns to a batch of its task's documents, before the
        duplicates are dropped: the batch (the same rows, in order) and, optionally, a reason
        per row for the rows the stage drops (empty keeps them). By default the columns are
        added to the documents."""
        for name, column in columns.items():
            batch = batch.append_column(name, column)
        return batch, None
