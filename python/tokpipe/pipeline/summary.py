"""What a run did, read from its manifest alone: the funnel and the drop reasons.

One summary of an output folder's ``manifest.json`` (a ``tokpipe clean`` or a ``tokpipe
tokenize`` one), shared by everything that shows it: ``tokpipe report`` (HTML) and the
dataset card (Markdown). Pure functions over the manifest dict, no I/O, and no formatting but
:func:`byte_size`, so that each caller renders the same numbers its own way and writes a size
as every other one does.

A manifest's ``stats`` holds one entry per stage, in pipeline order (``read`` first): ``in``,
``kept``, ``dropped_<reason>`` counts, ``seconds`` (time spent in the stage, summed over workers) and the
stage's own counters (``pii_email``, ``line-kept``, ``tokens``...). Shares are fractions in
[0, 1] (0 where the denominator is 0).

- :func:`funnel`: documents through every stage (:class:`FunnelStep`).
- :func:`drop_reasons`: every reason a stage dropped documents for (:class:`DropReason`),
  largest first within each stage, stages in pipeline order.
- :func:`overview`: the run's totals (:class:`Overview`): documents read, kept, rejected and
  unreadable; bytes of kept and rejected shards; tokens for a tokenize output.
- :func:`counters`: each stage's own counters (everything but ``in``/``kept``/``dropped_*``
  and ``seconds``); :func:`pii_counts`: the ``pii`` stage's matches by type.
- :func:`run_kind`: ``"clean"`` or ``"tokenize"``; :func:`pipeline_stages`: the stages with
  their parameters as the config recorded them.
- :func:`byte_size`: a number of bytes as the card and the report write it (``12.3 kB``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FunnelStep", "DropReason", "Overview", "run_kind", "funnel", "drop_reasons", "overview", "counters",
           "pii_counts", "pipeline_stages", "byte_size", "UNATTRIBUTED"]

#: The reason given to documents a stage dropped beyond its ``dropped_<reason>`` counts (a
#: manifest whose counts disagree; never seen from tokpipe itself, but shown, not hidden).
UNATTRIBUTED = "(no reason recorded)"

#: The ``read`` pseudo-stage: every readable input document, before the first real stage.
READ = "read"
_BASE_KEYS = ("in", "kept", "seconds")
_DROPPED = "dropped_"
#: The ``pii`` stage's counters that are not matches of one type.
_PII_NOT_TYPES = ("pii_ids_hashed", "pii_in_fields")


def _share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


@dataclass(frozen=True)
class FunnelStep:
    """One stage of the funnel: the documents it saw and kept.

    ``share_kept`` is ``kept`` over the documents read (the funnel's height at this stage);
    ``share_dropped`` is ``dropped`` over this stage's own input. ``tokens`` is the tokens the
    stage counted (the ``tokenize`` stage), None where it counts none.
    """

    stage: str
    documents_in: int
    kept: int
    dropped: int
    share_kept: float
    share_dropped: float
    seconds: float
    tokens: int | None = None


@dataclass(frozen=True)
class DropReason:
    """Documents one stage dropped for one reason; shares of that stage's input and of the
    documents read."""

    stage: str
    reason: str
    count: int
    share_of_stage: float
    share_of_input: float


@dataclass(frozen=True)
class Overview:
    """A run's totals. ``documents_read`` is every input record, the ``unreadable`` ones
    (set aside in ``errors.jsonl``, counted as dropped by ``read``) included;
    ``kept_bytes``/``rejected_bytes`` are the shards' sizes on disk (None where the manifest
    lists no shards: a tokenize output); ``tokens`` is None for a clean output."""

    kind: str
    documents_read: int
    documents_kept: int
    documents_rejected: int
    unreadable: int
    kept_bytes: int | None
    rejected_bytes: int | None
    tokens: int | None
    shards: int
    inputs: tuple[str, ...]


def run_kind(manifest: dict[str, Any]) -> str:
    """``"tokenize"`` for a ``tokpipe tokenize`` manifest, ``"clean"`` otherwise."""
    # Imported here: the tokenize package imports the engines, which import the card, which
    # imports this module (the options module itself imports neither).
    from tokpipe.pipeline.tokenize.options import FORMAT as TOKENIZED_FORMAT

    return "tokenize" if manifest.get("format") == TOKENIZED_FORMAT else "clean"


def byte_size(size: int) -> str:
    """``size`` bytes in the largest decimal (SI) unit that leaves at least 1, to three
    significant digits: ``999 B``, ``12.3 kB``, ``4.56 GB``, ``123 MB``."""
    if size < 1000:
        return f"{size:,} B"
    value = float(size)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if round(value) < 1000 or unit == "TB":  # 999.6 kB is written 1.00 MB, not 1,000 kB
            break
    digits = 2 if round(value, 2) < 10 else 1 if round(value, 1) < 100 else 0
    return f"{value:,.{digits}f} {unit}"


def _stats(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    stats = manifest.get("stats") or {}
    return {name: entry for name, entry in stats.items() if isinstance(entry, dict)}


def _read_count(manifest: dict[str, Any]) -> int:
    stats = _stats(manifest)
    if READ in stats:
        return int(stats[READ].get("in", 0))
    first = next(iter(stats.values()), {})
    return int(first.get("in", 0))


def funnel(manifest: dict[str, Any]) -> list[FunnelStep]:
    """Every stage of ``manifest["stats"]`` in pipeline order, ``read`` first."""
    read = _read_count(manifest)
    steps = []
    for stage, entry in _stats(manifest).items():
        documents_in, kept = int(entry.get("in", 0)), int(entry.get("kept", 0))
        tokens = entry.get("tokens")
        steps.append(FunnelStep(stage, documents_in, kept, documents_in - kept, _share(kept, read),
                                _share(documents_in - kept, documents_in), float(entry.get("seconds", 0.0)),
                                int(tokens) if isinstance(tokens, (int, float)) and not isinstance(tokens, bool)
                                else None))
    return steps


def drop_reasons(manifest: dict[str, Any], include_zero: bool = False) -> list[DropReason]:
    """Every reason any stage dropped documents for, stages in pipeline order and each
    stage's reasons largest first (ties by name). Reasons with a count of 0 are left out
    unless ``include_zero``. Documents a stage dropped beyond its reason counts appear under
    :data:`UNATTRIBUTED`."""
    read = _read_count(manifest)
    out = []
    for stage, entry in _stats(manifest).items():
        documents_in = int(entry.get("in", 0))
        reasons = {key.removeprefix(_DROPPED): int(value) for key, value in entry.items()
                   if key.startswith(_DROPPED) and isinstance(value, (int, float))}
        missing = documents_in - int(entry.get("kept", 0)) - sum(reasons.values())
        if missing > 0:
            reasons[UNATTRIBUTED] = missing
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
            if count or include_zero:
                out.append(DropReason(stage, reason, count, _share(count, documents_in), _share(count, read)))
    return out


def counters(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each stage's own counters (``pii_email``, ``line-kept``, ``clusters``, ``tokens``...),
    by stage in pipeline order; stages with none are left out."""
    out = {}
    for stage, entry in _stats(manifest).items():
        own = {key: value for key, value in entry.items() if key not in _BASE_KEYS and not key.startswith(_DROPPED)}
        if own:
            out[stage] = own
    return out


def pii_counts(manifest: dict[str, Any]) -> dict[str, int]:
    """The ``pii`` stage's matches by type (``email``, ``phone``...), all types it looked
    for, zeros included; empty when no ``pii`` stage ran."""
    entry = _stats(manifest).get("pii", {})
    return {key.removeprefix("pii_"): int(value) for key, value in entry.items()
            if key.startswith("pii_") and key not in _PII_NOT_TYPES}


def overview(manifest: dict[str, Any]) -> Overview:
    """The run's totals, from ``totals``, ``shards``/``rejected`` (or ``splits``),
    ``errors`` and ``inputs``."""
    kind = run_kind(manifest)
    totals = manifest.get("totals") or {}
    read = _read_count(manifest)
    inputs = tuple(str(i) for i in manifest.get("inputs") or ())
    errors = manifest.get("errors", 0)
    unreadable = int(errors) if isinstance(errors, int) else len(errors or ())
    if kind == "tokenize":
        kept = int(totals.get("documents", 0))
        shards = sum(len(split.get("parquet") or ()) for split in (manifest.get("splits") or {}).values())
        # Rejected by a stage: what the readers passed on and the output lacks (read - kept
        # alone would count the unreadable records twice).
        rejected = max(0, read - unreadable - kept)
        return Overview(kind, read, kept, rejected, unreadable, None, None, int(totals.get("tokens", 0)), shards,
                        inputs)
    kept = int(totals.get("rows", 0))
    return Overview(kind, read, kept, int(totals.get("rejected_rows", read - kept)), unreadable,
                    int(totals.get("bytes", 0)), sum(int(e.get("bytes", 0)) for e in manifest.get("rejected") or ()),
                    None, len(manifest.get("shards") or ()), inputs)


def pipeline_stages(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stages as the manifest's config recorded them: ``(type, parameters)`` in pipeline
    order. A tokenize output has one, ``tokenize``, with its write options and tokenizer."""
    if run_kind(manifest) == "tokenize":
        params = dict(manifest.get("params") or {})
        tokenizer = manifest.get("tokenizer") or {}
        if tokenizer:
            params["tokenizer"] = tokenizer.get("path")
        return [("tokenize", params)]
    stages = (manifest.get("config") or {}).get("stages") or []
    return [(str(s.get("type")), {k: v for k, v in s.items() if k != "type"}) for s in stages if isinstance(s, dict)]
