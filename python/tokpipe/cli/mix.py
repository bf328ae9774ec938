"""``tokpipe mix``: several ``tokpipe tokenize`` outputs, weighted, into one shuffled
``tokenize``-style output with exactly the asked share of tokens of each (see
:mod:`tokpipe.pipeline.mix` and docs/mix.md)."""

from __future__ import annotations

import sys
import time

import click

from tokpipe.cli.app import UsageError, cli, fail, friendly_errors
from tokpipe.cli.display import Progress, splits_table, table
from tokpipe.cli.options import LOCATION, SIZE, staging_dir_option, storage_options
from tokpipe.errors import ConfigError, PipelineError


@cli.command("mix")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE=WEIGHT...")
@click.option("-o", "--output", required=True, type=LOCATION,
              help="Output folder or URL: a tokenize-style folder (train/ and val/ shards, documents/, megatron/ "
                   "with a --data-path weight list, manifest.json, README.md).")
@click.option("--tokens", type=click.IntRange(min=1), default=None,
              help="Train tokens in all; each source gets its weight's share, exactly [default: the most that "
                   "--max-epochs allows].")
@click.option("--max-epochs", type=click.FloatRange(min=0.0, min_open=True), default=1.0, show_default=True,
              help="The most passes over any source's train split (1: no upsampling; 2.5: up to two and a half).")
@click.option("--seed", type=click.IntRange(min=0, max=(1 << 64) - 1), default=0, show_default=True,
              help="Seed of the documents' choice and order: the same seed gives the same bytes.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "megatron", "both"]), default="both",
              show_default=True, help="Parquet shards, Megatron-LM .bin/.idx, or both.")
@click.option("--shard-size", type=SIZE, default="256MB", show_default=True, help="Start a new Parquet shard after this many bytes.")
@click.option("--shuffle-buffer", type=SIZE, default="256MB", show_default=True,
              help="Token ids held in memory at once; past it, the output is written key range by key range "
                   "(spilled to the staging folder).")
@click.option("--overwrite", is_flag=True, help="Delete OUTPUT and start over.")
@staging_dir_option
@storage_options
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary.")
@friendly_errors
def mix_command(sources: tuple[str, ...], output: str, tokens: int | None, max_epochs: float, seed: int, fmt: str,
                shard_size: int, shuffle_buffer: int, overwrite: bool, staging_dir: str | None, quiet: bool) -> None:
    """Mix tokenize outputs by weight, exactly.

    Each SOURCE=WEIGHT is a `tokpipe tokenize` output folder (local or a URL) and its
    relative share of the train tokens (0.7, 3, 1/3).

    Each source gives round(N x share) tokens (largest remainder, so the shares sum to N
    exactly): whole epochs of its documents, then documents in a seeded order, the last one
    cut to the tokens left. The val split is mixed when every source has one (same weights,
    no repetition). All sources must share one tokenizer. The output is shuffled across
    sources by --seed. A rerun of a finished mix redoes nothing; one killed starts over.
    Exit codes: 0 done, 1 the mix failed, 2 wrong usage (a bad SOURCE or weight, tokenizers
    that differ, a budget past --max-epochs, an OUTPUT holding another run).
    """
    from tokpipe.pipeline.mix import MixOptions, mix, parse_source

    try:
        pairs = [parse_source(text) for text in sources]
        options = MixOptions(tokens=tokens, max_epochs=max_epochs, seed=seed,
                             formats=("parquet", "megatron") if fmt == "both" else (fmt,),
                             shard_size=shard_size, shuffle_buffer=shuffle_buffer,
                             overwrite=overwrite, staging_dir=staging_dir)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    progress = Progress(enabled=not quiet and sys.stderr.isatty())
    started = time.perf_counter()
    try:
        result = mix(pairs, output, options, progress=progress)
    except ConfigError as e:  # a bad source or budget, or an output holding another run: exit 2
        progress.close()
        raise UsageError(str(e)) from None
    except PipelineError as e:
        progress.close()
        fail(e)
    progress.close()
    if quiet:
        return
    manifest = result.manifest
    rows = [("source", "weight", "split", "tokens", "documents", "epochs")]
    for entry in manifest["mix"]["sources"]:
        for split, figures in entry["splits"].items():
            rows.append((entry["path"], f"{entry['share']:.4g}", split, f"{figures['tokens']:,}",
                         f"{figures['documents']:,}", f"{figures['epochs']:.4g}"))
    click.echo(table(rows), err=True)
    click.echo("", err=True)
    click.echo(splits_table(manifest), err=True)
    done = "already mixed, nothing redone" if not result.written else f"{time.perf_counter() - started:.1f} s"
    totals = manifest["totals"]
    click.echo(f"\n{totals['tokens']:,} tokens in {totals['documents']:,} documents ({done}) -> {output}", err=True)
