"""``tokpipe clean``: run a cleaning pipeline over files into sharded Parquet (through
:func:`tokpipe.pipeline.run`, on this machine or on Ray)."""

from __future__ import annotations

import os
import sys
import time
import warnings

import click

from tokpipe.cli.app import UsageError, cli, fail, friendly_errors
from tokpipe.cli.display import Progress, stats_table
from tokpipe.cli.options import (EXISTING_FILE, LOCATION, SIZE, keep_staging_option, staging_dir_option,
                                 storage_options, workers_option)
from tokpipe.errors import ConfigError, ConfigWarning, CorpusError, PipelineError


@cli.command("clean")
@click.argument("inputs", nargs=-1, type=LOCATION)
@click.option("-o", "--output", type=LOCATION,
              help="Output folder or URL (s3://bucket/out, gs://..., az://...): data/ (the kept shards), "
                   "rejected/, errors.jsonl, manifest.json and a dataset card, README.md [required unless "
                   "--print-config].")
@click.option("-c", "--config", "config_path", type=EXISTING_FILE, default=None,
              help="Pipeline config (YAML or TOML) with a `stages:` list; default: normalize, length_filter, exact_dedup.")
@workers_option("the number of cores")
@click.option("--shard-size", type=SIZE, default="256MB", show_default=True,
              help="Start a new output shard after this many bytes (e.g. 64MB, 1G).")
@click.option("--output-format", default="parquet", show_default=True, metavar="FORMAT",
              help="Format of the kept and rejected shards: parquet (zstd), jsonl, jsonl.gz or jsonl.zst "
                   "(one JSON object per line; same manifest, resume and --verify).")
@click.option("--rejected-by-stage", is_flag=True,
              help="Write each stage's rejected documents to a folder of its own, rejected/STAGE/ (STAGE: the "
                   "stage's type, -2, -3... for a type met again), to sample one stage's drops.")
@click.option("--task-size", type=SIZE, default="64MB", show_default=True,
              help="Split plain .jsonl (and line-split .txt) files bigger than this into tasks of about this size; "
                   "tasks are the unit of parallel work and of resume.")
@click.option("--text-field", default="text", show_default=True, help="JSONL/Parquet field holding the text.")
@click.option("--id-field", default="id", show_default=True,
              help="JSONL/Parquet field holding the id; documents without one get path:line.")
@click.option("--split", type=click.Choice(["none", "lines", "paragraphs"]), default="none", show_default=True,
              help="How .txt files become documents: one per file, per line, or per paragraph.")
@click.option("--strict", is_flag=True, help="Stop (exit 1) at the first unreadable input instead of recording it in errors.jsonl.")
@click.option("--overwrite", is_flag=True, help="Delete OUTPUT and start over (otherwise an interrupted run resumes).")
@staging_dir_option
@keep_staging_option("A rerun with another --shard-size or --workers then re-cuts the shards without redoing "
                     "the stages.")
@storage_options
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where the work runs: processes on this machine, or a Ray cluster (pip install 'tokpipe[ray]'; "
                   "inputs and OUTPUT must be in object storage or on a filesystem every node sees).")
@click.option("--ray-address", default=None,
              help="With --engine ray: the cluster to join ('auto', 'ray://head:10001'); default: start a local Ray.")
@click.option("--print-config", is_flag=True, help="Print the effective pipeline config (YAML) and exit.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no stats table.")
@friendly_errors
def clean_command(inputs: tuple[str, ...], output: str | None, config_path: str | None, workers: int | None,
                  shard_size: int, output_format: str, rejected_by_stage: bool, task_size: int, text_field: str,
                  id_field: str, split: str, strict: bool, overwrite: bool,
                  staging_dir: str | None, keep_staging: bool, engine: str, ray_address: str | None, print_config: bool, quiet: bool) -> None:
    """Clean INPUT files and folders (.txt, .jsonl[.gz|.zst], .parquet, .warc.gz) into sharded Parquet
    (or JSON Lines: --output-format).

    INPUT and OUTPUT may be local paths or object-storage URLs (s3://, gs://, az://, hf://).

    Rerunning the same command after a crash or kill finishes only what is left; the output
    is then exactly that of an uninterrupted run. Once it succeeded, the staging is removed
    (--keep-staging keeps it) and a rerun of the same command redoes nothing. Every input document ends up kept, in
    rejected/ (with the reason and stage), or in errors.jsonl (unreadable input).
    Exit codes: 0 done, 1 the run failed (or read no document at all), 2 wrong usage or config
    (an OUTPUT holding another run included).
    """
    import yaml

    from tokpipe import pipeline
    from tokpipe.pipeline.config import load_config
    from tokpipe.pipeline.writers import OUTPUT_FORMATS

    if output_format not in OUTPUT_FORMATS:
        raise UsageError(f"--output-format must be one of {', '.join(OUTPUT_FORMATS)}, not {output_format[:100]!r}")
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
    if ray_address is not None and engine != "ray":
        raise UsageError("--ray-address needs --engine ray")
    if engine == "ray":
        from tokpipe.pipeline.engines.ray import RAY_INSTALL_HINT, ray_available

        if not ray_available():
            raise UsageError(RAY_INSTALL_HINT)
    progress = Progress(enabled=not quiet and sys.stderr.isatty())
    started = time.perf_counter()
    try:
        result = pipeline.run(inputs, output, config, progress=progress, engine=engine, ray_address=ray_address,
                              workers=workers or os.cpu_count() or 1, shard_size=shard_size,
                              strict=strict, overwrite=overwrite, text_field=text_field, id_field=id_field,
                              split=split, task_bytes=task_size, output_format=output_format,
                              rejected_by_stage=rejected_by_stage, staging_dir=staging_dir, keep_staging=keep_staging)
    except (CorpusError, ConfigError) as e:
        # Usage, exit 2: a missing input, no input files, a config or an output folder that
        # does not fit (OutputConflictError: another run there). Checked before any work.
        progress.close()
        raise UsageError(str(e)) from None
    except PipelineError as e:  # the run failed, exit 1 (NoDocumentsError: nothing could be read)
        progress.close()
        fail(e)
    progress.close()
    if not quiet:
        click.echo(stats_table({name: s.as_dict() for name, s in result.stats.items()},
                               wall_seconds=time.perf_counter() - started, run_wall_seconds=result.run_wall_seconds),
                   err=True)
        click.echo(f"\n{result.kept:,} documents kept in {len(result.shards)} shard(s), "
                   f"{result.rejected_rows:,} rejected, {result.errors:,} unreadable (errors.jsonl) -> {output}", err=True)
