"""``tokpipe tokenize``: text (any reader format, or a ``tokpipe clean`` output folder) to
pretraining shards: Parquet token ids, packed rows, Megatron-LM ``.bin``/``.idx``; and the
token statistics ``tokpipe stats`` shows for such a folder."""

from __future__ import annotations

import html
import os
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from tokpipe.cli import UsageError, cli, friendly_errors
from tokpipe.cli.clean import _Progress, _table, parse_size, stats_table
from tokpipe.errors import ConfigError, CorpusError, PipelineError


@cli.command("tokenize")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("-t", "--tokenizer", "tokenizer_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="tokenizer.json, a .tiktoken[.gz] rank file (cl100k/o200k/r50k in its name), GPT-2's "
                   "encoder.json (vocab.bpe beside it) or BERT's vocab.txt.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder: train/ and val/ shards, manifest.json.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "megatron", "both"]), default="parquet",
              show_default=True, help="Parquet shards, Megatron-LM .bin/.idx, or both.")
@click.option("--seq-len", type=click.IntRange(min=1), default=None,
              help="Sequence length N: packed rows hold N+1 tokens (inputs row[:-1], targets row[1:]).")
@click.option("--pack", is_flag=True, help="Write Parquet rows of exactly N+1 tokens, documents concatenated "
                                           "with EOS between them (needs --seq-len).")
@click.option("--truncate", is_flag=True, help="Cut each document at N+1 tokens (dropping the rest) instead of "
                                               "letting it run on into the next rows (needs --seq-len).")
@click.option("--pad-tail", is_flag=True, help="Pad the last partial packed row with EOS instead of dropping it.")
@click.option("--append-eos/--no-append-eos", default=True, show_default=True,
              help="Put the end-of-document token after each document.")
@click.option("--eos-token", default=None,
              help="The end-of-document token [default: <|endoftext|>, </s> or [SEP], the first the tokenizer has].")
@click.option("--shuffle-seed", type=click.IntRange(min=0, max=(1 << 64) - 1), default=0, show_default=True,
              help="Seed of the global document shuffle and of the train/validation split.")
@click.option("--no-shuffle", is_flag=True, help="Keep the input order of documents.")
@click.option("--val-fraction", type=click.FloatRange(min=0.0, max=1.0, max_open=True), default=0.0,
              show_default=True, help="Fraction of documents (chosen by seeded hash) written to val/.")
@click.option("-w", "--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes (each reads its tasks and encodes them on --threads threads) "
                   "[default: half the cores].")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Encoding threads per worker [default: the cores divided by --workers].")
@click.option("--shard-size", default="256MB", show_default=True, help="Start a new Parquet shard after this many bytes.")
@click.option("--shuffle-buffer", default="256MB", show_default=True,
              help="Memory the shuffle holds at once (its index of documents, about 80 bytes each, or, "
                   "for staging larger than half the memory, token ids); past it, it works key range by "
                   "key range.")
@click.option("--task-size", default="16MB", show_default=True,
              help="Split big .jsonl (and line-split .txt) files into tasks of about this size (smaller than "
                   "clean's: the workers then read one task while encoding another).")
@click.option("--text-field", default="text", show_default=True, help="JSONL/Parquet field holding the text.")
@click.option("--id-field", default="id", show_default=True, help="JSONL/Parquet field holding the id.")
@click.option("--split", type=click.Choice(["none", "lines", "paragraphs"]), default="none", show_default=True,
              help="How .txt files become documents: one per file, per line, or per paragraph.")
@click.option("--strict", is_flag=True, help="Stop (exit 1) at the first unreadable input.")
@click.option("--overwrite", is_flag=True, help="Delete OUTPUT and start over (otherwise an interrupted run resumes).")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary.")
@friendly_errors
def tokenize_command(inputs: tuple[Path, ...], tokenizer_path: str, output: Path | None, fmt: str,
                     seq_len: int | None, pack: bool, truncate: bool, pad_tail: bool, append_eos: bool,
                     eos_token: str | None, shuffle_seed: int, no_shuffle: bool, val_fraction: float,
                     workers: int | None, threads: int | None, shard_size: str, shuffle_buffer: str, task_size: str,
                     text_field: str, id_field: str, split: str, strict: bool, overwrite: bool, quiet: bool) -> None:
    """Tokenize INPUT files and folders (.txt, .jsonl[.gz|.zst], .parquet, .warc.gz, or a
    `tokpipe clean` output folder) into pretraining shards in OUTPUT.

    Documents are shuffled globally (seeded; the same output for any --workers) and split
    into train/ and val/. Rerunning after a crash resumes the tokenizing where it stopped.
    Exit codes: 0 done, 1 the run failed, 2 wrong usage.
    """
    from tokpipe.pipeline.engines import RunOptions
    from tokpipe.pipeline.readers import ReaderOptions
    from tokpipe.pipeline.tokenized import TokenizeOptions, tokenize_corpus

    if not inputs:
        raise UsageError("give at least one INPUT file or folder")
    if output is None:
        raise UsageError("give the output folder with -o/--output")
    formats = ("parquet", "megatron") if fmt == "both" else (fmt,)
    # Encoding is parallel inside a worker already; more workers only add readers (JSON is
    # parsed in Python) and a copy of the tokenizer each, so half the cores by default, and the
    # cores shared out between the workers' encoding threads.
    cores = os.cpu_count() or 1
    workers = workers or max(1, cores // 2)
    threads = threads or max(1, cores // workers)
    try:
        options = TokenizeOptions(tokenizer=tokenizer_path, formats=formats, append_eos=append_eos,
                                  eos_token=eos_token, seq_len=seq_len, pack=pack, truncate=truncate,
                                  pad_tail=pad_tail, shuffle=not no_shuffle, seed=shuffle_seed,
                                  val_fraction=val_fraction, shuffle_buffer=parse_size(shuffle_buffer),
                                  threads=threads)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    # Bigger batches than clean's 1024 documents: each is one parallel encode call, and fewer
    # calls leave the encoding threads idle less often (the reader still closes a batch at
    # 64 MB of text).
    reader = ReaderOptions(text_field=text_field, id_field=id_field, split=split, strict=strict,
                           task_bytes=parse_size(task_size), batch_rows=8192)
    run = RunOptions(workers=workers, shard_size=parse_size(shard_size), strict=strict,
                     overwrite=overwrite, reader=reader)
    progress = _Progress(enabled=not quiet and sys.stderr.isatty())
    try:
        result = tokenize_corpus([str(p) for p in inputs], output, options, run, progress=progress)
    except (CorpusError, ConfigError) as e:
        raise UsageError(str(e)) from None
    except PipelineError as e:
        progress.close()
        click.echo(f"tokpipe: error: {' '.join(str(e).split())}", err=True)
        sys.exit(1)
    progress.close()
    if not quiet:
        manifest = result.manifest
        click.echo(stats_table(manifest["stats"]), err=True)
        click.echo("", err=True)
        click.echo(_splits_table(manifest), err=True)
        totals = manifest["totals"]
        click.echo(f"\n{totals['tokens']:,} tokens in {totals['documents']:,} documents ({manifest['dtype']}), "
                   f"{manifest['errors']:,} unreadable (errors.jsonl) -> {output}", err=True)


def _splits_table(manifest: dict[str, Any]) -> str:
    rows = [("split", "documents", "tokens", "shards", "packed rows", "tail dropped", "truncated")]
    for name, s in manifest["splits"].items():
        packed = s.get("packed", {})
        rows.append((name, f"{s['documents']:,}", f"{s['tokens']:,}", f"{len(s.get('parquet', []))}",
                     f"{packed.get('rows', 0):,}", f"{packed.get('dropped_tail_tokens', 0):,}",
                     f"{s.get('truncated_tokens', 0):,}"))
    return _table(rows)


# ---------------------------------------------------------------------------------------------
# `tokpipe stats OUT` for a tokenized folder.

_BINS = 20


def document_lengths(out: Path, manifest: dict[str, Any]) -> np.ndarray:
    """Every document's token count (EOS included), from each split's documents.parquet."""
    import pyarrow.parquet as pq

    parts = [pq.read_table(out / name / "documents.parquet", columns=["length"]).column("length").to_numpy()
             for name in manifest["splits"] if (out / name / "documents.parquet").exists()]
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


def tokenized_stats(out: Path, manifest: dict[str, Any], plot: Path | None) -> None:
    lengths = document_lengths(out, manifest)
    totals = manifest["totals"]
    click.echo(f"tokens {totals['tokens']:,}, documents {totals['documents']:,}, dtype {manifest['dtype']}, "
               f"tokenizer {Path(manifest['tokenizer']['path']).name} (sha256 {manifest['tokenizer']['sha256'][:12]}), "
               f"eos {manifest['tokenizer']['eos_id']}, seq_len {manifest['seq_len']}, seed {manifest['seed']}")
    click.echo(_splits_table(manifest))
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
