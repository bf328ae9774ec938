"""``tokpipe clean``: run a cleaning pipeline over files into sharded Parquet; ``tokpipe stats``
summarises a finished output folder."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import click

from tokpipe.cli import UsageError, cli, friendly_errors
from tokpipe.errors import ConfigError, ConfigWarning, CorpusError, PipelineError
from tokpipe.pipeline.engines.local import ProgressUpdate

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}


def parse_size(text: str) -> int:
    """``256MB``, ``1G``, ``4096``: a byte count."""
    raw = text.strip().upper().replace("IB", "B")
    number = raw.rstrip("KMGB")
    unit = raw[len(number):]
    try:
        value = float(number)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size like 256MB, 1G or 4096") from None
    if unit not in _UNITS or value <= 0:
        raise click.BadParameter(f"{text!r} is not a size like 256MB, 1G or 4096")
    return int(value * _UNITS[unit])


class _Progress:
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


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def stats_table(stats: dict[str, dict[str, Any]]) -> str:
    rows = [("stage", "in", "kept", "dropped", "seconds", "details")]
    for name, s in stats.items():
        dropped = {k.removeprefix("dropped_"): v for k, v in s.items() if k.startswith("dropped_")}
        extra = {k: v for k, v in s.items() if k not in ("in", "kept", "seconds") and not k.startswith("dropped_")}
        details = ", ".join([f"{k} {v:,}" for k, v in dropped.items()] + [f"{k} {v}" for k, v in extra.items()])
        rows.append((name, f"{s.get('in', 0):,}", f"{s.get('kept', 0):,}", f"{sum(dropped.values()):,}",
                     f"{s.get('seconds', 0):.1f}", details))
    return _table(rows)


@cli.command("clean")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder: Parquet shards, rejected/, errors.jsonl and manifest.json.")
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Pipeline config (YAML or TOML) with a `stages:` list; default: normalize, length_filter, exact_dedup.")
@click.option("-w", "--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes [default: the number of cores].")
@click.option("--shard-size", default="256MB", show_default=True,
              help="Start a new output shard after this many bytes (e.g. 64MB, 1G).")
@click.option("--task-size", default="64MB", show_default=True,
              help="Split plain .jsonl (and line-split .txt) files bigger than this into tasks of about this size; "
                   "tasks are the unit of parallel work and of resume.")
@click.option("--text-field", default="text", show_default=True, help="JSONL/Parquet field holding the text.")
@click.option("--id-field", default="id", show_default=True,
              help="JSONL/Parquet field holding the id; documents without one get path:line.")
@click.option("--split", type=click.Choice(["none", "lines", "paragraphs"]), default="none", show_default=True,
              help="How .txt files become documents: one per file, per line, or per paragraph.")
@click.option("--strict", is_flag=True, help="Stop (exit 1) at the first unreadable input instead of recording it in errors.jsonl.")
@click.option("--overwrite", is_flag=True, help="Delete OUTPUT and start over (otherwise an interrupted run resumes).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where the work runs: processes on this machine, or a Ray cluster (pip install 'tokpipe[ray]'; "
                   "inputs and OUTPUT must be on storage every node sees).")
@click.option("--ray-address", default=None,
              help="With --engine ray: the cluster to join ('auto', 'ray://head:10001'); default: start a local Ray.")
@click.option("--print-config", is_flag=True, help="Print the effective pipeline config (YAML) and exit.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no stats table.")
@friendly_errors
def clean_command(inputs: tuple[Path, ...], output: Path | None, config_path: Path | None, workers: int | None,
                  shard_size: str, task_size: str, text_field: str, id_field: str, split: str, strict: bool, overwrite: bool,
                  engine: str, ray_address: str | None, print_config: bool, quiet: bool) -> None:
    """Clean INPUT files and folders (.txt, .jsonl[.gz|.zst], .parquet, .warc.gz) into sharded Parquet.

    Rerunning the same command after a crash or kill finishes only what is left; the output
    is then exactly that of an uninterrupted run. Every input document ends up kept, in
    rejected/ (with the reason and stage), or in errors.jsonl (unreadable input).
    Exit codes: 0 done, 1 the run failed, 2 wrong usage or config.
    """
    import yaml

    from tokpipe.pipeline.config import load_config
    from tokpipe.pipeline.engines import LocalExecutor, RunOptions
    from tokpipe.pipeline.readers import ReaderOptions

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConfigWarning)
            config = load_config(config_path)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    for warning in caught:
        # A config that runs but probably not as meant: one line, like the errors.
        if issubclass(warning.category, ConfigWarning):
            click.echo(f"tokpipe: warning: {' '.join(str(warning.message).split())}", err=True)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    if print_config:
        click.echo(yaml.safe_dump(config.to_dict(), sort_keys=False), nl=False)
        return
    if not inputs:
        raise UsageError("give at least one INPUT file or folder")
    if output is None:
        raise UsageError("give the output folder with -o/--output")
    size = parse_size(shard_size)
    reader = ReaderOptions(text_field=text_field, id_field=id_field, split=split, strict=strict,
                           task_bytes=parse_size(task_size))
    options = RunOptions(workers=workers or os.cpu_count() or 1, shard_size=size, strict=strict,
                         overwrite=overwrite, reader=reader)
    progress = _Progress(enabled=not quiet and sys.stderr.isatty())
    if engine == "ray":
        from tokpipe.pipeline.engines.ray import RAY_INSTALL_HINT, RayExecutor, ray_available

        if not ray_available():
            raise UsageError(RAY_INSTALL_HINT)
        executor: LocalExecutor = RayExecutor(config, inputs, output, options, progress=progress, address=ray_address)
    else:
        if ray_address is not None:
            raise UsageError("--ray-address needs --engine ray")
        executor = LocalExecutor(config, inputs, output, options, progress=progress)
    try:
        result = executor.run()
    except CorpusError as e:  # planning: a missing input, no input files
        raise UsageError(str(e)) from None
    except PipelineError as e:
        progress.close()
        click.echo(f"tokpipe: error: {' '.join(str(e).split())}", err=True)
        sys.exit(1)
    progress.close()
    if not quiet:
        click.echo(stats_table({name: s.as_dict() for name, s in result.stats.items()}), err=True)
        click.echo(f"\n{result.kept:,} documents kept in {len(result.shards)} shard(s), "
                   f"{result.rejected_rows:,} rejected, {result.errors:,} unreadable (errors.jsonl) -> {output}", err=True)


@cli.command("stats")
@click.argument("output", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--verify", is_flag=True,
              help="Also check the folder against its manifest; exit 1 naming each file that differs. `clean` "
                   "output: every shard's size, sha256 and row count, and no unlisted shard. `tokenize` output: "
                   "every file's size and sha256 (Parquet shards, documents.parquet, megatron.bin/.idx, "
                   "errors.jsonl), the row and sequence counts, and no unlisted file in train/ or val/; a "
                   "manifest from a tokpipe that recorded no digests fails as 'not verified'.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest's stats as JSON instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tokenized folders: save the document-length histogram as a .png (matplotlib) or .html file.")
@friendly_errors
def stats_command(output: Path, verify: bool, as_json: bool, plot: Path | None) -> None:
    """Summarise a finished `tokpipe clean` or `tokpipe tokenize` OUTPUT folder from its
    manifest.json (for a tokenized one: tokens, documents, length percentiles, histogram)."""
    from tokpipe.pipeline.tokenized import read_tokenized_manifest
    from tokpipe.pipeline.writers import read_manifest, verify_manifest

    tokenized = read_tokenized_manifest(output)
    if tokenized is not None:
        from tokpipe.cli.tokenize import tokenized_stats

        from tokpipe.pipeline.tokenized import verify_tokenized

        # Checked before the summary, which reads documents.parquet: a damaged file is then
        # named as a problem rather than failing the summary with a decoder's error.
        found = verify_tokenized(output, tokenized) if verify else []
        for problem in found:
            click.echo(f"tokpipe: problem: {problem}", err=True)
        if found:
            sys.exit(1)
        if as_json:
            click.echo(json.dumps({k: tokenized[k] for k in ("totals", "splits", "stats")}, indent=2))
        else:
            tokenized_stats(output, tokenized, plot)
        if verify:
            click.echo("verified: every file matches its size and sha256 in the manifest, and the counts agree")
        return
    if plot is not None:
        raise UsageError("--plot applies to a `tokpipe tokenize` output folder")
    manifest = read_manifest(output)
    if as_json:
        click.echo(json.dumps(manifest["stats"], indent=2))
    else:
        click.echo(stats_table(manifest["stats"]))
        totals = manifest.get("totals", {})
        click.echo(f"\nshards {len(manifest['shards'])}, rows {totals.get('rows', 0):,}, "
                   f"bytes {totals.get('bytes', 0):,}, rejected rows {totals.get('rejected_rows', 0):,}, "
                   f"tokpipe {manifest.get('tokpipe_version')}")
    if verify:
        problems = verify_manifest(output)
        for problem in problems:
            click.echo(f"tokpipe: problem: {problem}", err=True)
        if problems:
            sys.exit(1)
        click.echo("verified: every shard matches the manifest")
