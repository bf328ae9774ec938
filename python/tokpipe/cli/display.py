"""What the commands print besides their output: the progress line of a pipeline run, tables
(the per-stage stats, the train/val splits) and the key-value summary of a training run."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tokpipe.pipeline.engines import ProgressUpdate
    from tokpipe.train import CorpusReport

__all__ = ["Progress", "table", "stats_table", "splits_table", "print_summary", "shown_path"]

# Set-aside examples printed after a training summary (the report holds up to 20).
_SHOWN = 5


class Progress:
    """One progress line per phase on stderr, when stderr is a terminal and not --quiet."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.perf_counter()
        self.phase = ""

    def __call__(self, update: ProgressUpdate) -> None:
        if not self.enabled:
            return
        if update.phase != self.phase:
            if self.phase:
                sys.stderr.write("\n")
            self.phase, self.started = update.phase, time.perf_counter()
        elapsed = time.perf_counter() - self.started
        done, total = update.done, update.total
        eta = f", eta {elapsed / done * (total - done):.0f}s" if 0 < done < total else ""
        width = 30
        filled = width * done // max(total, 1)
        if update.unit == "bytes":
            rate = done / 1e6 / elapsed if elapsed > 0 else 0.0
            amount = f"{done / 1e6:,.1f}/{total / 1e6:,.1f} MB, {rate:,.1f} MB/s, {update.documents:,} docs"
        else:
            amount = f"{done}/{total}"
        sys.stderr.write(f"\r{update.phase:<22} [{'#' * filled}{'.' * (width - filled)}] {amount} ({elapsed:.0f}s{eta})  ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.phase:
            sys.stderr.write("\n")


def table(rows: list[tuple[str, ...]]) -> str:
    """A text table: the first row is the header (underlined), the first column is left-aligned
    and the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def stats_table(stats: dict[str, dict[str, Any]]) -> str:
    """Per stage: documents in, kept, dropped, seconds, and the reasons and counters."""
    rows = [("stage", "in", "kept", "dropped", "seconds", "details")]
    for name, s in stats.items():
        dropped = {k.removeprefix("dropped_"): v for k, v in s.items() if k.startswith("dropped_")}
        extra = {k: v for k, v in s.items() if k not in ("in", "kept", "seconds") and not k.startswith("dropped_")}
        details = ", ".join([f"{k} {v:,}" for k, v in dropped.items()] + [f"{k} {v}" for k, v in extra.items()])
        rows.append((name, f"{s.get('in', 0):,}", f"{s.get('kept', 0):,}", f"{sum(dropped.values()):,}",
                     f"{s.get('seconds', 0):.1f}", details))
    return table(rows)


def splits_table(manifest: dict[str, Any]) -> str:
    """Per split of a tokenized output: documents, tokens, shards, packed rows, and the tokens
    the packing and truncation dropped."""
    rows = [("split", "documents", "tokens", "shards", "packed rows", "tail dropped", "truncated")]
    for name, s in manifest["splits"].items():
        packed = s.get("packed", {})
        rows.append((name, f"{s['documents']:,}", f"{s['tokens']:,}", f"{len(s.get('parquet', []))}",
                     f"{packed.get('rows', 0):,}", f"{packed.get('dropped_tail_tokens', 0):,}",
                     f"{s.get('truncated_tokens', 0):,}"))
    return table(rows)


def print_summary(rows: list[tuple[str, str]], report: CorpusReport | None = None) -> None:
    """A training run's summary on stderr: what the corpus report counted, then ``rows`` as
    aligned ``key  value`` lines, then the first inputs set aside."""
    rows = (report.rows() if report is not None else []) + rows
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}", err=True)
    if report is not None and report.examples:
        click.echo(f"first set-aside input ({min(len(report.examples), _SHOWN)} of {sum(report.set_aside.values()):,}):",
                   err=True)
        for path, line, why in report.examples[:_SHOWN]:
            click.echo(f"  {path}:{line}: {why}", err=True)


def shown_path(path: str) -> str:
    """A path or URL as a summary shows it: a URL without anything like a credential."""
    from tokpipe import storage

    return storage.redact(path) if storage.is_remote(path) else path
