"""The ``tokpipe`` command: one click group (:mod:`tokpipe.cli.app`), one module per command.

Shared pieces live in modules of their own, so that no command module imports another:
:mod:`~tokpipe.cli.app` (the group, usage errors, one-line failures), :mod:`~tokpipe.cli.options`
(``-t/--tokenizer``, ``-w/--workers``, ``--threads``, sizes) and :mod:`~tokpipe.cli.display`
(progress line, tables, summaries). :func:`main` imports the command modules, which register
their commands on the group.

Exit codes: 0 success, 1 the work failed (bad tokenizer file, I/O error, a run that read no
document), 2 the command was used wrongly (bad option, missing or empty corpus, a bad config or
config value, an output folder holding another run). Errors print as one line; ``--verbose``
adds the traceback.
"""

from __future__ import annotations

import os

# Before numpy loads (the commands import it): its OpenBLAS would start a thread per core
# that spins for work for about 0.1 s of CPU, and tokpipe does no matrix work worth threads.
# That was 0.1 CPU-s of every command, taken from the cores the command itself needs. A
# value the user set is kept. Every module of this package runs this first, as its package.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tokpipe.cli.app import UsageError, cli, friendly_errors  # noqa: E402
from tokpipe.cli.options import corpus_options  # noqa: E402

__all__ = ["cli", "main", "UsageError", "friendly_errors", "corpus_options"]


def main() -> None:
    from tokpipe.cli import (clean, encode, eval_tokenizer, language_model, mix, report, stats, tokenize,  # noqa: F401
                             train, train_lm, train_quality)  # (registers the commands)
    from tokpipe.pipeline.allocator import keep_freed_memory

    keep_freed_memory()

    cli(prog_name="tokpipe")
