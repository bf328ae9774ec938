"""``tokpipe report``: one self-contained HTML page showing what a run did to a corpus.

:func:`build_report` reads one or several output folders (``tokpipe clean`` or ``tokpipe
tokenize``, local or in a bucket) through their manifests, streaming their shards
(:mod:`tokpipe.report.collect`; a tokenize output through :mod:`tokpipe.report.tokens`), and
renders the page (:mod:`tokpipe.report.render`, with charts from
:mod:`tokpipe.report.charts`): scale (the funnel of documents, bytes and tokens, inputs,
unreadable records), quality (every drop reason with samples, histograms with the config's
thresholds) and diversity (languages, sources, domains, duplicate clusters, n-gram ratios,
PII, tokens). The page needs no network: inline CSS and SVG, no script.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokpipe import storage
from tokpipe.errors import NotAnOutputError
from tokpipe.report.collect import RunData, read_output
from tokpipe.report.render import render
from tokpipe.report.tokens import collect_tokenized

__all__ = ["build_report", "collect", "render", "RunData", "NotAnOutputError"]


def collect(output: str, name: str | None = None) -> RunData:
    """Everything the page shows about the output folder ``output`` (a path or URL), shown
    under ``name`` (default: ``output``). Raises :class:`~tokpipe.errors.NotAnOutputError` (a
    ``ConfigError``) for a folder with no tokpipe manifest."""
    run = read_output(output, name)
    if run.kind == "tokenize":
        collect_tokenized(run, storage.location(output))
    return run


def build_report(outputs: Sequence[str]) -> str:
    """The HTML page for ``outputs`` (paths or URLs of finished output folders), side by side
    in the order given. Raises :class:`~tokpipe.errors.NotAnOutputError` (a
    ``ConfigError``) for a folder with no tokpipe manifest."""
    names = [str(o).rstrip("/") or str(o) for o in outputs]
    return render([collect(output, name) for output, name in zip(outputs, names)])
