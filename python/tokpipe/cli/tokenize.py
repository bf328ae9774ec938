"""``tokpipe tokenize``: text (any reader format, or a ``tokpipe clean`` output folder) to
pretraining shards: Parquet token ids, packed rows, Megatron-LM ``.bin``/``.idx``."""

from __future__ import annotations

import os
import sys
import time

import click

from tokpipe.cli.app import UsageError, cli, fail, friendly_errors
from tokpipe.cli.display import Progress, splits_table, stats_table
from tokpipe.cli.options import (LOCATION, SIZE, keep_staging_option, staging_dir_option, storage_options,
                                 threads_option, tokenizer_option, workers_option)
from tokpipe.errors import ConfigError, CorpusError, PipelineError


@cli.command("tokenize")
@click.argument("inputs", nargs=-1, required=True, type=LOCATION)
@tokenizer_option()
@click.option("-o", "--output", required=True, type=LOCATION,
              help="Output folder or URL (s3://bucket/tokens, gs://...): train/ and val/ shards, megatron/, "
                   "documents/, manifest.json and a dataset card, README.md.")
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
@workers_option("half the cores", about="each reads its tasks and encodes them on --threads threads")
@threads_option("Encoding threads per worker", default_help="the cores divided by --workers")
@click.option("--shard-size", type=SIZE, default="256MB", show_default=True, help="Start a new Parquet shard after this many bytes.")
@click.option("--shuffle-buffer", type=SIZE, default="256MB", show_default=True,
              help="Memory the shuffle holds at once (its index of documents, about 80 bytes each, or, "
                   "for staging larger than half the memory, token ids); past it, it works key range by "
                   "key range.")
@click.option("--task-size", type=SIZE, default="16MB", show_default=True,
              help="Split big .jsonl (and line-split .txt) files into tasks of about this size (smaller than "
                   "clean's: the workers then read one task while encoding another).")
@click.option("--text-field", default="text", show_default=True, help="JSONL/Parquet field holding the text.")
@click.option("--id-field", default="id", show_default=True, help="JSONL/Parquet field holding the id.")
@click.option("--split", type=click.Choice(["none", "lines", "paragraphs"]), default="none", show_default=True,
              help="How .txt files become documents: one per file, per line, or per paragraph.")
@click.option("--strict", is_flag=True, help="Stop (exit 1) at the first unreadable input.")
@click.option("--overwrite", is_flag=True, help="Delete OUTPUT and start over (otherwise an interrupted run resumes).")
@staging_dir_option
@keep_staging_option("A rerun with other write options (--seq-len, --pack, --format, --val-fraction, "
                     "--shuffle-seed...) then rewrites the output from it without tokenizing again.")
@storage_options
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary.")
@friendly_errors
def tokenize_command(inputs: tuple[str, ...], tokenizer_path: str, output: str, fmt: str,
                     seq_len: int | None, pack: bool, truncate: bool, pad_tail: bool, append_eos: bool,
                     eos_token: str | None, shuffle_seed: int, no_shuffle: bool, val_fraction: float,
                     workers: int | None, threads: int | None, shard_size: int, shuffle_buffer: int, task_size: int,
                     text_field: str, id_field: str, split: str, strict: bool, overwrite: bool, staging_dir: str | None,
                     keep_staging: bool, quiet: bool) -> None:
    """Tokenize INPUT files and folders (.txt, .jsonl[.gz|.zst], .parquet, .warc.gz, or a
    `tokpipe clean` output folder) into pretraining shards in OUTPUT. INPUT and OUTPUT may be
    local paths or object-storage URLs (s3://, gs://, az://, hf://).

    Documents are shuffled globally (seeded; the same output for any --workers) and split
    into train/ and val/. Rerunning after a crash resumes the tokenizing where it stopped.
    Once it succeeded, the staging is removed (--keep-staging keeps it, for a cheap re-write
    with other write options) and a rerun of the same command redoes nothing.
    Exit codes: 0 done, 1 the run failed (or read no document at all), 2 wrong usage or config
    (an OUTPUT holding another run included).
    """
    from tokpipe.pipeline.engines import RunOptions
    from tokpipe.pipeline.readers import ReaderOptions
    from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus

    from tokpipe import storage

    if staging_dir is not None and storage.is_remote(staging_dir):
        raise UsageError("--staging-dir must be a local folder for tokenize (it writes its splits there before "
                         "uploading them)")
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
                                  val_fraction=val_fraction, shuffle_buffer=shuffle_buffer,
                                  threads=threads)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    # Bigger batches than clean's 1024 documents: each is one parallel encode call, and fewer
    # calls leave the encoding threads idle less often (the reader still closes a batch at
    # 64 MB of text).
    reader = ReaderOptions(text_field=text_field, id_field=id_field, split=split, strict=strict,
                           task_bytes=task_size, batch_rows=8192)
    run = RunOptions(workers=workers, shard_size=shard_size, strict=strict,
                     overwrite=overwrite, reader=reader, staging_dir=staging_dir, keep_staging=keep_staging)
    progress = Progress(enabled=not quiet and sys.stderr.isatty())
    started = time.perf_counter()
    try:
        result = tokenize_corpus([str(p) for p in inputs], output, options, run, progress=progress)
    except (CorpusError, ConfigError) as e:
        # Usage, exit 2: no input, or an output folder holding another run (OutputConflictError).
        progress.close()
        raise UsageError(str(e)) from None
    except PipelineError as e:  # the run failed, exit 1 (NoDocumentsError: nothing could be read)
        progress.close()
        fail(e)
    progress.close()
    if not quiet:
        manifest = result.manifest
        click.echo(stats_table(manifest["stats"], wall_seconds=time.perf_counter() - started,
                               run_wall_seconds=result.run_wall_seconds), err=True)
        click.echo("", err=True)
        click.echo(splits_table(manifest), err=True)
        totals = manifest["totals"]
        click.echo(f"\n{totals['tokens']:,} tokens in {totals['documents']:,} documents ({manifest['dtype']}), "
                   f"{manifest['errors']:,} unreadable (errors.jsonl) -> {output}", err=True)

