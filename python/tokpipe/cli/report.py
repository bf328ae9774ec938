"""``tokpipe report``: one self-contained HTML page of what one or several runs did (see
:mod:`tokpipe.report`)."""

from __future__ import annotations

import time

import click

from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.options import LOCATION, OUTPUT_FILE, storage_options

__all__ = ["report_command"]


@cli.command("report")
@click.argument("runs", nargs=-1, required=True, type=LOCATION)
@click.option("-o", "--output", type=OUTPUT_FILE, default="report.html", show_default=True,
              help="The HTML file to write (a path or a URL such as s3://bucket/report.html); replaced if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@storage_options
@friendly_errors
def report_command(runs: tuple[str, ...], output: str, quiet: bool) -> None:
    """Write one HTML page showing what the RUNS did: each RUN is the output folder (a path or a
    URL) of a finished `tokpipe clean` or `tokpipe tokenize`. Several RUNS are shown side by
    side, in the order given (before/after a config change).

    The page needs no network (inline CSS and SVG, no script). Scale: the funnel of documents,
    text bytes and tokens through every stage, inputs, unreadable records by reason. Quality:
    every drop reason with its count, share and bytes and sample rejected documents;
    histograms, kept against rejected, of every numeric column the stages wrote and of lengths
    and word counts, with the config's thresholds drawn. Diversity: languages, sources, top
    domains, duplicate clusters, distinct n-gram ratios, PII counts; for a tokenize output,
    document lengths in tokens (seq_len marked) and tokens per language and source.

    Shards are read from the manifest's list, a batch at a time; word counts and n-grams are
    measured on a sample, and the page says so. Exit codes: 0 written, 1 a read or write
    failed, 2 a RUN is not a tokpipe output folder."""
    from tokpipe import storage
    from tokpipe.pipeline import fs
    from tokpipe.errors import NotAnOutputError
    from tokpipe.report import collect, render

    start = time.monotonic()
    try:
        data = [collect(run, storage.redact(run.rstrip("/") or run)) for run in runs]
    except NotAnOutputError as e:
        raise UsageError(str(e)) from None
    page = render(data)
    fs.write_text(storage.location(output), page)
    if not quiet:
        click.echo(f"report of {len(runs)} run(s) written to {storage.redact(output)} "
                   f"({len(page.encode('utf-8')) / 1e6:.1f} MB, {time.monotonic() - start:.1f} s)")
