"""What the commands print besides their output: the progress line of a pipeline run, tables
(the per-stage stats, the train/val splits) and the key-value summary of a training run.

The progress line is redrawn in place (``\r``, then the line, then ``ESC [K``, which clears
what a longer line before it left) and cut to the terminal's width, so it never wraps into a
second line that ``\r`` cannot reach. ``rich`` would do the same, but importing its progress
bar took 60 to 130 ms of every command's start (``python -X importtime``, on 2 busy cores), for
one line.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tokpipe.pipeline.engines import ProgressUpdate
    from tokpipe.train import CorpusReport

__all__ = ["Progress", "table", "fitted_table", "stats_table", "splits_table", "print_summary", "shown_path", "terminal_width"]

# Set-aside examples printed after a training summary (the report holds up to 20).
_SHOWN = 5


# The widest bar; it narrows first when the terminal is narrow.
_BAR = 30
# "Clear to the end of the line": what a longer line drawn before leaves there goes.
_CLEAR = "\x1b[K"


def terminal_width() -> int:
    """The terminal's width in columns (``$COLUMNS`` first; 80 when unknown)."""
    return shutil.get_terminal_size((80, 24)).columns


class Progress:
    """One progress line per phase on stderr, when stderr is a terminal and not --quiet: a
    bar, the amount done, the rate and an estimate of the time left. The engine calls it
    as work finishes and a few times a second in between, so the elapsed time moves."""

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
        sys.stderr.write("\r" + self.line(update, time.perf_counter() - self.started, terminal_width()) + _CLEAR)
        sys.stderr.flush()

    @staticmethod
    def line(update: ProgressUpdate, elapsed: float, columns: int) -> str:
        """The progress line of ``update`` after ``elapsed`` seconds, in fewer than
        ``columns`` characters (a line that reaches the last column wraps on some terminals)."""
        done, total = update.done, update.total
        if update.unit == "bytes":
            rate = done / elapsed if elapsed > 0 else 0.0
            amount = f"{done / 1e6:,.1f}/{total / 1e6:,.1f} MB  {rate / 1e6:,.1f} MB/s"
            if update.documents:  # counted as tasks finish: "0 docs" while the first one reads would mislead
                amount += f"  {update.documents:,} docs"
        else:
            amount = f"{done:,}/{total:,}"
        times = f"{_duration(elapsed)}"
        if 0 < done < total:
            times += f", eta {_duration(elapsed / done * (total - done))}"
        rest = f" {amount}  ({times})"
        name = update.phase[:22].ljust(16)
        room = columns - 1 - len(name) - len(rest) - 3  # the bar's brackets and a space
        width = min(_BAR, room)
        if width >= 5:
            filled = width * min(done, total) // max(total, 1)
            text = f"{name} [{'#' * filled}{'.' * (width - filled)}]{rest}"
        else:
            text = f"{name}{rest}"
        return text[:max(columns - 1, 1)]

    def close(self) -> None:
        if self.enabled and self.phase:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h03m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def table(rows: list[tuple[str, ...]], left: int = 1) -> str:
    """A text table: the first row is the header (underlined), the first ``left`` columns are
    left-aligned and the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fitted_table(rows: list[tuple[str, ...]], left: int = 1, columns: int | None = None) -> str:
    """:func:`table`, cut to the terminal's width (``columns``, the terminal's by default):
    where the rows are too wide, the columns after the first ``left`` are split into several
    tables one below the other, each repeating the first ``left`` columns, so no line wraps;
    a cell too wide even alone is cut, ending in ``…``."""
    columns = columns or terminal_width()
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    room = columns - 1 - sum(widths[:left]) - 2 * left
    widest = max(room - 2, 8)
    if max(widths[left:], default=0) > widest:
        rows = [row[:left] + tuple(c if len(c) <= widest else c[:widest - 1] + "…" for c in row[left:])
                for row in rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    parts: list[list[int]] = [[]]
    used = 0
    for i in range(left, len(widths)):
        if parts[-1] and used + widths[i] + 2 > room:
            parts.append([])
            used = 0
        parts[-1].append(i)
        used += widths[i] + 2
    keep = list(range(left))
    return "\n\n".join(table([tuple(row[i] for i in keep + part) for row in rows], left) for part in parts)


def stats_table(stats: dict[str, dict[str, Any]], wall_seconds: float | None = None,
                columns: int | None = None, run_wall_seconds: float | None = None) -> str:
    """Per stage: documents in, kept, dropped and the time spent in the stage summed over the
    workers; then each stage's drop reasons and counters, wrapped to ``columns`` (the
    terminal's width by default); then what the time column is, beside the wall time
    (``wall_seconds``) when it is known: the run's, unless ``run_wall_seconds`` (the run's,
    over all its calls, when a resume or a rerun makes it differ) is given, which makes
    ``wall_seconds`` this command's."""
    columns = columns or terminal_width()
    rows = [("stage", "in", "kept", "dropped", "worker s")]
    details = []
    for name, s in stats.items():
        dropped = {k.removeprefix("dropped_"): v for k, v in s.items() if k.startswith("dropped_")}
        extra = {k: v for k, v in s.items() if k not in ("in", "kept", "seconds") and not k.startswith("dropped_")}
        # "\0" holds each reason to its count where the lines wrap.
        listed = [f"{k}\0{v:,}" for k, v in dropped.items()] + [f"{k}\0{v}" for k, v in extra.items()]
        rows.append((name, f"{s.get('in', 0):,}", f"{s.get('kept', 0):,}", f"{sum(dropped.values()):,}",
                     f"{s.get('seconds', 0):.1f}"))
        if listed:
            details.append(textwrap.fill(f"{name}: {', '.join(listed)}", width=max(columns - 1, 20),
                                         subsequent_indent="    ", break_on_hyphens=False).replace("\0", " "))
    note = "worker s: seconds spent in the stage, summed over the workers (workers run side by side, so it can " \
           "exceed the run's time)"
    if wall_seconds is not None and run_wall_seconds is not None:
        note += f"; wall time of this command: {wall_seconds:,.1f} s, of the run over all its calls: " \
                f"{run_wall_seconds:,.1f} s"
    elif wall_seconds is not None or run_wall_seconds is not None:
        note += f"; wall time of the run: {wall_seconds if wall_seconds is not None else run_wall_seconds:,.1f} s"
    parts = [table(rows)] + (["\n".join(details)] if details else []) + \
        [textwrap.fill(note, width=max(columns - 1, 20), break_on_hyphens=False)]
    return "\n\n".join(parts)


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
