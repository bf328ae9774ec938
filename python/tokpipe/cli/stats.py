"""``tokpipe stats``: summarise a finished ``tokpipe clean`` or ``tokpipe tokenize`` output
folder (local, or a URL such as ``s3://bucket/out/``) from its manifest, optionally checking
every file against it; for a tokenized folder, the token counts, document-length percentiles
and a histogram (text, .png or .html; the plot is written locally)."""

from __future__ import annotations

import html
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
                   "every file's size and sha256 (Parquet shards, documents.parquet, megatron.bin/.idx, "
                   "errors.jsonl), the row and sequence counts, and no unlisted file in train/ or val/; a "
                   "manifest from a tokpipe that recorded no digests fails as 'not verified'.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest's stats as JSON instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Tokenized folders: save the document-length histogram as a .png (matplotlib) or .html file "
                   "(a local path).")
@storage_options
@friendly_errors
def stats_command(output: str, verify: bool, as_json: bool, plot: Path | None) -> None:
    """Summarise a finished `tokpipe clean` or `tokpipe tokenize` OUTPUT folder (a path or a
    URL) from its manifest.json (for a tokenized one: tokens, documents, length percentiles,
    histogram)."""
    from tokpipe.pipeline import fs
    from tokpipe.pipeline.tokenize import read_tokenized_manifest
    from tokpipe.pipeline.writers import MANIFEST_NAME, read_manifest, verify_manifest

    out = storage.location(output)
    if isinstance(out, RemotePath) and not fs.exists(out / MANIFEST_NAME):
        # Said here, with the URL: a bucket has no folders for click to find missing.
        raise FileNotFoundError(2, "no manifest.json here (not a finished tokpipe clean or tokenize output "
                                   "folder, or no such folder)", storage.redact(str(out)))

    tokenized = read_tokenized_manifest(out)
    if tokenized is not None:
        from tokpipe.pipeline.tokenize import verify_tokenized

        # Checked before the summary, which reads documents.parquet: a damaged file is then
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
        click.echo(stats_table(manifest["stats"]))
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
    """Every document's token count (EOS included), from each split's documents.parquet."""
    from tokpipe.pipeline import fs

    parts = [fs.read_parquet(out / name / "documents.parquet", columns=["length"]).column("length").to_numpy()
             for name in manifest["splits"] if fs.exists(out / name / "documents.parquet")]
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
        _save_plot(plot, counts, edges)
        click.echo(f"\nhistogram saved to {plot}")


def _save_plot(path: Path, counts: np.ndarray, edges: np.ndarray) -> None:
    suffix = path.suffix.lower()
    if suffix == ".png":
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise UsageError("a .png plot needs matplotlib; install it or give an .html file") from None
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", edgecolor="black")
        ax.set_xscale("log")
        ax.set_xlabel("document length (tokens)")
        ax.set_ylabel("documents")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return
    if suffix not in (".html", ".htm", ".svg"):
        raise UsageError(f"--plot must name a .png or .html file, not {path.name}")
    path.write_text(_svg_page(counts, edges) if suffix != ".svg" else _svg(counts, edges), encoding="utf-8")


def _svg(counts: np.ndarray, edges: np.ndarray) -> str:
    """A bar chart as inline SVG: one bar per bin, labelled with its range and count."""
    width, height, left, bottom = 720, 320, 60, 60
    n = len(counts)
    bar = (width - left - 10) / max(n, 1)
    peak = max(int(counts.max()) if n else 1, 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="10">']
    for i, count in enumerate(counts):
        h = (height - bottom - 10) * int(count) / peak
        x, y = left + i * bar, height - bottom - h
        label = f"{int(edges[i]):,}-{int(edges[i + 1]) - 1:,}"
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" fill="#4a7ab5">'
                     f'<title>{html.escape(label)} tokens: {int(count):,} documents</title></rect>')
        parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 12}" text-anchor="end" '
                     f'transform="rotate(-45 {x + bar / 2:.1f} {height - bottom + 12})">{html.escape(label)}</text>')
    parts.append(f'<text x="10" y="20">documents (max {peak:,})</text>')
    parts.append(f'<text x="{width / 2}" y="{height - 5}" text-anchor="middle">document length (tokens)</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _svg_page(counts: np.ndarray, edges: np.ndarray) -> str:
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>tokpipe: document lengths</title></head>"
            f"<body><h1>Document lengths</h1>\n{_svg(counts, edges)}\n</body></html>\n")
