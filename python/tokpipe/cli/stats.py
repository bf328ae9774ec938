"""``tokpipe stats``: summarise a finished ``tokpipe clean`` or ``tokpipe tokenize`` output
folder (local, or a URL such as ``s3://bucket/out/``) from its manifest, optionally checking
every file against it; for a tokenized folder, the token counts, document-length percentiles
and a histogram (text, .png or .html; the plot is written locally)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from tokpipe import storage
from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.display import splits_table, stats_table
from tokpipe.cli.options import EXISTING_FOLDER, storage_options
from tokpipe.storage import Location, RemotePath

__all__ = ["stats_command", "document_lengths", "length_histogram", "tokenized_stats"]

_BINS = 20


@cli.command("stats")
@click.argument("output", type=EXISTING_FOLDER)
@click.option("--verify", is_flag=True,
              help="Also check the folder against its manifest; exit 1 naming each file that differs. `clean` "
                   "output: every shard's size, sha256 and row count, and no unlisted shard. `tokenize` output: "
                   "every file's size and sha256 (Parquet shards, documents/, megatron/ .bin/.idx, "
                   "errors.jsonl), the row and sequence counts, and no unlisted file beside them; a "
                   "manifest from a tokpipe that recorded no digests fails as 'not verified'.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest's stats as JSON instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tokenized folders: save the document-length histograms (documents and tokens per length, "
                   "p50/p90/p99 and seq_len marked) as an .html or .svg file (the report's charts), or a .png "
                   "(needs matplotlib: pip install 'tokpipe[plot]'); a local path.")
@storage_options
@friendly_errors
def stats_command(output: str, verify: bool, as_json: bool, plot: Path | None) -> None:
    """Summarise a finished `tokpipe clean` or `tokpipe tokenize` OUTPUT folder (a path or a
    URL) from its manifest.json (for a tokenized one: tokens, documents, length percentiles,
    histogram)."""
    from tokpipe.pipeline import fs
    from tokpipe.pipeline.tokenize import read_tokenized_manifest
    from tokpipe.pipeline.writers import MANIFEST_NAME, read_manifest, verify_manifest

    if plot is not None:
        check_plot(plot)
    out = storage.location(output)
    if not fs.exists(out / MANIFEST_NAME):
        # One line naming the folder, exit 2 as for any argument that is not what the
        # command takes (a bucket has no folders for click to find missing, so a URL is
        # checked here too).
        raise UsageError(f"{storage.redact(str(out)) if isinstance(out, RemotePath) else output}: no manifest.json "
                         "here (not a finished tokpipe clean or tokenize output folder, or no such folder)")

    tokenized = read_tokenized_manifest(out)
    if tokenized is not None:
        from tokpipe.pipeline.tokenize import verify_tokenized

        # Checked before the summary, which reads the documents files: a damaged file is then
        # named as a problem rather than failing the summary with a decoder's error.
        found = verify_tokenized(out, tokenized) if verify else []
        for problem in found:
            click.echo(f"tokpipe: problem: {problem}", err=True)
        if found:
            sys.exit(1)
        if as_json:
            click.echo(json.dumps({k: tokenized[k] for k in ("totals", "splits", "stats")}, indent=2))
        else:
            tokenized_stats(out, tokenized, plot)
        if verify:
            click.echo("verified: every file matches its size and sha256 in the manifest, and the counts agree")
        return
    if plot is not None:
        raise UsageError("--plot applies to a `tokpipe tokenize` output folder")
    manifest = read_manifest(out)
    if as_json:
        click.echo(json.dumps(manifest["stats"], indent=2))
    else:
        click.echo(stats_table(manifest["stats"], wall_seconds=manifest.get("wall_seconds")))
        totals = manifest.get("totals", {})
        click.echo(f"\nshards {len(manifest['shards'])}, rows {totals.get('rows', 0):,}, "
                   f"bytes {totals.get('bytes', 0):,}, rejected rows {totals.get('rejected_rows', 0):,}, "
                   f"tokpipe {manifest.get('tokpipe_version')}")
    if verify:
        problems = verify_manifest(out)
        for problem in problems:
            click.echo(f"tokpipe: problem: {problem}", err=True)
        if problems:
            sys.exit(1)
        click.echo("verified: every shard matches the manifest")


def document_lengths(out: Location, manifest: dict[str, Any]) -> np.ndarray:
    """Every document's token count (EOS included), from each split's documents file
    (``documents/{split}.parquet``; ``{split}/documents.parquet`` in an older folder)."""
    from tokpipe.pipeline import fs
    from tokpipe.pipeline.writers.manifest import tokenized_documents_path

    paths = [out / tokenized_documents_path(manifest, name) for name in manifest["splits"]]
    parts = [fs.read_parquet(path, columns=["length"]).column("length").to_numpy() for path in paths if fs.exists(path)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def length_histogram(lengths: np.ndarray, bins: int = _BINS) -> tuple[np.ndarray, np.ndarray]:
    """Counts over log-spaced bins of document length (lengths span orders of magnitude)."""
    if not len(lengths):
        return np.zeros(0, dtype=np.int64), np.array([1.0, 2.0])
    low, high = max(1, int(lengths.min())), max(2, int(lengths.max()) + 1)
    edges = np.unique(np.geomspace(low, high, bins + 1).round().astype(np.int64))
    if len(edges) < 2:
        edges = np.array([low, high])
    counts, edges = np.histogram(lengths, bins=edges)
    return counts, edges


def tokenized_stats(out: Location, manifest: dict[str, Any], plot: Path | None) -> None:
    """Print a tokenized folder's summary: totals, splits, length percentiles and histogram;
    with ``plot``, save the histogram there too."""
    lengths = document_lengths(out, manifest)
    totals = manifest["totals"]
    click.echo(f"tokens {totals['tokens']:,}, documents {totals['documents']:,}, dtype {manifest['dtype']}, "
               f"tokenizer {Path(manifest['tokenizer']['path']).name} (sha256 {manifest['tokenizer']['sha256'][:12]}), "
               f"eos {manifest['tokenizer']['eos_id']}, seq_len {manifest['seq_len']}, seed {manifest['seed']}")
    click.echo(splits_table(manifest))
    if not len(lengths):
        click.echo("\nno documents")
        return
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    click.echo(f"\ndocument length in tokens: mean {lengths.mean():,.1f}, p50 {p50:,.0f}, p90 {p90:,.0f}, "
               f"p99 {p99:,.0f}, min {lengths.min():,}, max {lengths.max():,}\n")
    counts, edges = length_histogram(lengths)
    peak = max(int(counts.max()), 1)
    for count, lo, hi in zip(counts, edges[:-1], edges[1:]):
        bar = "#" * int(round(40 * count / peak))
        click.echo(f"{int(lo):>9,} - {int(hi) - 1:>9,}  {int(count):>10,}  {bar}")
    if plot is not None:
        _save_plot(plot, lengths, edges, manifest.get("seq_len"))
        click.echo(f"\nhistogram saved to {plot}")


#: What ``--plot`` writes, by suffix.
PLOT_SUFFIXES = (".html", ".htm", ".svg", ".png")


def check_plot(path: Path) -> None:
    """Before any work: the ``--plot`` file's type is one we write, and a .png's library is
    installed (exit 2, one line, naming the extra)."""
    suffix = path.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise UsageError(f"--plot must name a .html, .svg or .png file, not {path.name}")
    if suffix != ".png":
        return
    try:
        import matplotlib  # noqa: F401  (imported, not just found: an install that cannot load counts as none)
    except ImportError:
        raise UsageError(f"--plot {path.name} needs matplotlib: pip install 'tokpipe[plot]' (or give an .html or "
                         ".svg file, which needs nothing)") from None


def _save_plot(path: Path, lengths: np.ndarray, edges: np.ndarray, seq_len: int | None) -> None:
    """The document-length histograms, documents and tokens per bin over the text
    histogram's ``edges``, with p50/p90/p99 and ``seq_len`` marked: the report's charts in
    an .html page or an .svg, or matplotlib's for a .png."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        _save_png(path, lengths, edges, seq_len)
        return
    from tokpipe.report.render import CHART_HEIGHT, length_charts, length_histograms, page

    if suffix == ".svg":
        # The two charts one above the other in one SVG (nested <svg> elements placed by y).
        svgs = length_histograms(lengths, seq_len, edges=edges)
        stacked = "".join(svg.replace("<svg ", f'<svg y="{k * CHART_HEIGHT}" ', 1) for k, svg in enumerate(svgs))
        text = (f'<svg xmlns="http://www.w3.org/2000/svg" width="560" height="{CHART_HEIGHT * len(svgs)}">'
                + stacked + "</svg>\n")
    else:
        text = page("tokpipe: document lengths", length_charts(lengths, seq_len, edges=edges))
    path.write_text(text, encoding="utf-8")


def _save_png(path: Path, lengths: np.ndarray, edges: np.ndarray, seq_len: int | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    weights = (None, lengths)
    for ax, weight, label in zip(axes, weights, ("documents", "tokens (token-weighted)")):
        ax.hist(lengths, bins=edges, weights=weight, edgecolor="black")
        ax.set_xscale("log")
        ax.set_ylabel(label)
        for q, value in zip((50, 90, 99), np.percentile(lengths, [50, 90, 99])):
            ax.axvline(value, color="grey", linestyle="--", linewidth=1, label=f"p{q} {value:,.0f}")
        if seq_len:
            ax.axvline(seq_len, color="red", linewidth=1.5, label=f"seq_len {seq_len:,}")
    axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("document length (tokens)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
