"""``tokpipe eval-tokenizer``: compare tokenizers on a corpus, or sweep a trainer's vocabulary
size. The work is :mod:`tokpipe.tokeval`'s; this module checks the options, prints the tables
and writes the page.

Two forms::

    tokpipe eval-tokenizer -t A [-t B ...] CORPUS... [--by language|source|script] [--report out.html]
    tokpipe eval-tokenizer --train bpe|wordpiece|unigram --vocab-sizes 8k,16k,32k TRAIN... --eval HELD_OUT...
                           [--report sweep.html]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path

import click

from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.display import fitted_table, terminal_width
from tokpipe.cli.options import EXISTING_FILE, LOCATION, SIZE, TOKENIZER_FILES, storage_options, threads_option

__all__ = ["eval_tokenizer_command"]

_GROUPINGS = ("language", "source", "script")
_MODELS = ("bpe", "wordpiece", "unigram")


@cli.command("eval-tokenizer")
@click.argument("corpus", nargs=-1, type=LOCATION)
@click.option("-t", "--tokenizer", "tokenizers", multiple=True, type=EXISTING_FILE,
              help=f"A tokenizer to evaluate; repeat for several (named by file name in the tables). "
                   f"{TOKENIZER_FILES} A path or URL.")
@click.option("--by", type=click.Choice(_GROUPINGS), default=None,
              help="Also break the numbers down by language (the input's language column, as a `tokpipe clean` "
                   "output has, else a guess from each document's dominant script), by source (a source column, "
                   "else the input file's name) or by dominant script. [default: none; language with --train]")
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the results as one self-contained HTML page (tables and charts, in the style of "
                   "`tokpipe report`); a local .html file.")
@click.option("--train", "train_model", type=click.Choice(_MODELS), default=None,
              help="Sweep mode: train this model at each --vocab-sizes size on CORPUS (the training corpus) and "
                   "evaluate each on the --eval documents.")
@click.option("--vocab-sizes", default=None, metavar="LIST",
              help="With --train: the vocabulary sizes, comma-separated; k is thousands (8k,16k,32k,64k).")
@click.option("--eval", "held_out", multiple=True, type=LOCATION, metavar="PATH",
              help="With --train: the held-out documents (file, folder, glob or URL); repeatable.")
@click.option("--max-documents", type=click.IntRange(min=1), default=None,
              help="Read only the first N documents, in input order (files in the order given, a folder's "
                   "files sorted): the same N reads the same documents.")
@click.option("--max-bytes", type=SIZE, default=None, metavar="SIZE",
              help="Read only the first documents, in input order, up to this much text (256MB, 1G).")
@click.option("--text-field", default="text", show_default=True, help="Field holding the text in JSONL and Parquet.")
@click.option("--language-field", default="language", show_default=True,
              help="The column --by language reads where the input has it.")
@click.option("--split", type=click.Choice(["none", "lines", "paragraphs"]), default="none", show_default=True,
              help="How a .txt file becomes documents: one per file, one per line, or one per paragraph.")
@click.option("--strict", is_flag=True, help="Fail on an unreadable record instead of setting it aside.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of tables.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@threads_option("Encoding threads.", default_help="all cores")
@storage_options
@friendly_errors
def eval_tokenizer_command(corpus: tuple[str, ...], tokenizers: tuple[str, ...], by: str | None, report: Path | None,
                           train_model: str | None, vocab_sizes: str | None, held_out: tuple[str, ...],
                           max_documents: int | None, max_bytes: int | None, text_field: str, language_field: str,
                           split: str, strict: bool, as_json: bool, quiet: bool, threads: int | None) -> None:
    """Compare tokenizers (-t, repeatable) on the documents of CORPUS: characters, bytes and
    words per token, fallback to unknown or byte tokens, vocabulary use, the longest token and
    round-trip exactness, overall and --by language, source or script. With --train, sweep the
    vocabulary size instead: CORPUS is the training corpus and --eval the held-out one."""
    sizes = _check(corpus, tokenizers, report, train_model, vocab_sizes, held_out)
    from tokpipe import tokeval

    common = dict(text_field=text_field, language_field=language_field, split=split, max_documents=max_documents,
                  max_bytes=max_bytes, strict=strict, num_threads=threads)
    if train_model is None:
        evaluation = tokeval.evaluate_tokenizers(list(tokenizers), list(corpus), by=by,  # type: ignore[arg-type]
                                                 **common)  # type: ignore[arg-type]
        if as_json:
            click.echo(json.dumps(dataclasses.asdict(evaluation), indent=2, ensure_ascii=False))
        else:
            _print_evaluation(evaluation)
        if report is not None:
            report.write_text(tokeval.evaluation_page(evaluation), encoding="utf-8")
            _say(f"report written to {report}", quiet=False)
        return

    def trained(point: tokeval.SweepPoint) -> None:
        what = point.error if point.error else f"vocabulary {point.vocab_size:,}"
        _say(f"trained {train_model} {point.asked:,}: {what} ({point.train_seconds:,.1f} s)", quiet)

    sweep = tokeval.sweep_vocab_sizes(train_model, sizes, list(corpus), list(held_out),  # type: ignore[arg-type]
                                      by=by or "language", on_trained=trained, **common)  # type: ignore[arg-type]
    if as_json:
        data = dataclasses.asdict(dataclasses.replace(sweep, tokenizers={}))  # the tokenizers are no JSON
        del data["tokenizers"]
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        _print_sweep(sweep)
    if report is not None:
        report.write_text(tokeval.sweep_page(sweep), encoding="utf-8")
        _say(f"report written to {report}", quiet=False)
    if sweep.evaluation is None:
        click.echo("tokpipe: error: no vocabulary size could be trained on this corpus", err=True)
        sys.exit(1)


def _check(corpus: tuple[str, ...], tokenizers: tuple[str, ...], report: Path | None, train_model: str | None,
           vocab_sizes: str | None, held_out: tuple[str, ...]) -> list[int]:
    """The usage errors, before any work: one line each, exit 2. Returns the sweep's sizes."""
    from tokpipe.errors import InvalidArgumentError
    from tokpipe.tokeval.sweep import parse_vocab_sizes

    if report is not None and report.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--report must name an .html file, not {report.name}")
    if report is not None and not report.absolute().parent.is_dir():
        # Said now, not after the whole evaluation (or every training of a sweep) is done.
        raise UsageError(f"--report: no folder {report.parent} to write {report.name} into")
    if not corpus:
        raise UsageError("give the corpus: one or more files, folders, globs or URLs"
                         + (" (the training corpus with --train)" if train_model else ""))
    if train_model is None:
        if not tokenizers:
            raise UsageError("give at least one tokenizer with -t (or --train MODEL to sweep vocabulary sizes)")
        if vocab_sizes is not None or held_out:
            raise UsageError("--vocab-sizes and --eval go with --train")
        return []
    if tokenizers:
        raise UsageError("-t and --train do not go together: --train trains the tokenizers it evaluates")
    if vocab_sizes is None or not held_out:
        raise UsageError("--train needs --vocab-sizes LIST and --eval HELD_OUT")
    try:
        return parse_vocab_sizes(vocab_sizes)
    except InvalidArgumentError as error:
        raise UsageError(f"--vocab-sizes: {error}") from None


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        click.echo(text, err=True)


def _print_evaluation(evaluation: object) -> None:
    from tokpipe.tokeval import ALL, Evaluation
    from tokpipe.tokeval.page import METRIC_COLUMNS, metric_cells, notes, token_cell

    assert isinstance(evaluation, Evaluation)
    columns = terminal_width()
    info = [("tokenizer", "model", "vocabulary", "fallback tokens", "encode MB/s")]
    for t in evaluation.tokenizers:
        seconds = evaluation.encode_seconds.get(t.name, 0.0)
        info.append((t.name, t.model, f"{t.vocab_size:,}", t.fallback,
                     f"{evaluation.bytes / seconds / 1e6:,.1f}" if seconds > 0 else "–"))
    click.echo(fitted_table(info, 1, columns))
    rows = [("group" if evaluation.by else "", "tokenizer", *(h for h, _ in METRIC_COLUMNS))]
    # Pairs, not names: a real group may be called "all" too.
    sections = [(ALL, evaluation.overall)]
    if evaluation.by:
        sections += [(g, evaluation.per_group[g]) for g in evaluation.groups]
    for g, by_name in sections:
        for t in evaluation.tokenizers:
            rows.append((g, t.name, *metric_cells(by_name[t.name])))
    click.echo()
    click.echo(fitted_table(rows, 2, columns))
    longest = [("tokenizer", "longest token used", "longest in the vocabulary")]
    longest += [(t.name, token_cell(evaluation.overall[t.name].longest_used), token_cell(t.longest_in_vocabulary))
                for t in evaluation.tokenizers]
    click.echo()
    click.echo(fitted_table(longest, 1, columns))
    click.echo()
    legend = "; ".join(f"{h}: {d}" for h, d in METRIC_COLUMNS)
    for line in [*notes(evaluation), legend]:
        click.echo(textwrap.fill(line, width=max(columns - 1, 20), break_on_hyphens=False))


def _print_sweep(sweep: object) -> None:
    from tokpipe.tokeval import Sweep

    assert isinstance(sweep, Sweep)
    columns = terminal_width()
    rows = [("asked", "trained", "training s")]
    problems = []
    for p in sweep.points:
        rows.append((f"{p.asked:,}", "–" if p.vocab_size is None else f"{p.vocab_size:,}", f"{p.train_seconds:,.1f}"))
        if p.note:
            problems.append(f"{p.asked:,}: {p.note}")
    click.echo(fitted_table(rows, 1, columns))
    for line in problems:
        click.echo(textwrap.fill(line, width=max(columns - 1, 20), subsequent_indent="    ", break_on_hyphens=False))
    if sweep.evaluation is not None:
        click.echo()
        _print_evaluation(sweep.evaluation)

