"""``tokpipe train-lm``: train a KenLM-compatible n-gram language model and write it as ARPA."""

from __future__ import annotations

import re
import sys
import time

import click

from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.display import print_summary, shown_path
from tokpipe.cli.options import LOCATION, OUTPUT_FILE, corpus_options, tokenizer_option
from tokpipe.errors import InvalidArgumentError
from tokpipe.lm import train_lm
from tokpipe.train import CorpusReport

_LMPLZ_FALLBACK = "0.5 1 1.5"


def _numbers(value: str, option: str, kind: type) -> list:
    try:
        return [kind(v) for v in re.split(r"[\s,]+", value.strip()) if v]
    except ValueError:
        raise UsageError(f"{option} takes numbers separated by spaces or commas, not {value!r}") from None


@cli.command("train-lm")
@click.argument("corpus", nargs=-1, required=True, type=LOCATION)
@click.option("-o", "--output", type=OUTPUT_FILE, default="lm.arpa", show_default=True,
              help="Where to write the ARPA file (a path or URL).")
@click.option("--order", type=click.IntRange(2, 12), default=5, show_default=True,
              help="The n-gram order (kenlm's default build loads orders 2 to 6).")
@tokenizer_option(required=False, about="The model's words are its tokens (as its vocabulary writes them, Ġthe). "
                                     "Without it, words are the whitespace-separated words of each line.")
@click.option("--prune", default="", metavar="'T1 T2 ...'",
              help="lmplz --prune: count thresholds per order from unigrams, e.g. '0 1 1'; n-grams seen at most "
                   "that often are dropped. The first must be 0, they must not decrease, the last repeats.")
@click.option("--normalize", is_flag=True,
              help="Normalise each line as CCNet does (lowercase, strip accents, digits to 0, Unicode punctuation "
                   "to ASCII) before tokenizing; score with the same setting.")
@click.option("--discount-fallback", is_flag=False, flag_value=_LMPLZ_FALLBACK, default=None, metavar="['D1 D2 D3']",
              help=f"Discounts for an order whose own cannot be estimated (small or artificial data); alone, "
                   f"lmplz's '{_LMPLZ_FALLBACK}'. Without it such a corpus is an error.")
@corpus_options
@friendly_errors
def train_lm_command(
    corpus: tuple[str, ...],
    output: str,
    order: int,
    tokenizer_path: str | None,
    prune: str,
    normalize: bool,
    discount_fallback: str | None,
    text_field: str,
    strict: bool,
    quiet: bool,
) -> None:
    """Train an interpolated modified Kneser-Ney n-gram model (as KenLM's lmplz) on CORPUS
    (files or folders, walked recursively) and write it as an ARPA file that kenlm loads.

    Reads .txt, .jsonl/.jsonl.gz/.jsonl.zst and .parquet (the --text-field of each record).
    Every line is a sentence, scored as <s> line </s>. All n-grams are counted in memory.
    """
    started = time.perf_counter()
    thresholds = _numbers(prune, "--prune", int) if prune else []
    fallback = None
    if discount_fallback is not None:
        values = _numbers(discount_fallback, "--discount-fallback", float)
        if len(values) != 3:
            raise UsageError(f"--discount-fallback takes three discounts (D1 D2 D3+), not {discount_fallback!r}")
        fallback = (values[0], values[1], values[2])
    report: list[CorpusReport] = []
    try:
        lm = train_lm(list(corpus), order=order, tokenizer=tokenizer_path, prune=thresholds, normalize=normalize,
                      discount_fallback=fallback, show_progress=not quiet and sys.stderr.isatty(), strict=strict,
                      text_field=text_field, report=report)
    except InvalidArgumentError as e:
        # The trainer refuses its settings before reading anything: a usage error.
        raise UsageError(str(e)) from None
    lm.save(output)
    if quiet:
        return
    rows = [("sentences", f"{lm.sentences:,}"), ("tokens", f"{lm.tokens:,}")]
    for n, (kept, counted, d) in enumerate(zip(lm.kept, lm.counted, lm.discounts), start=1):
        pruned = f" (of {counted:,})" if kept != counted else ""
        rows.append((f"{n}-grams", f"{kept:,}{pruned}  D1={d[0]:.3f} D2={d[1]:.3f} D3+={d[2]:.3f}"))
    rows += [("output", shown_path(output)), ("seconds", f"{time.perf_counter() - started:.1f}")]
    print_summary(rows, report[0] if report else None)
