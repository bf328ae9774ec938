"""``tokpipe train-bpe``: train a byte-level BPE tokenizer and write ``tokenizer.json``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from tokpipe.cli import UsageError, cli, friendly_errors
from tokpipe.errors import InvalidArgumentError
from tokpipe.train import CorpusReport, train_bpe

# Set-aside examples printed after the summary (the report holds up to 20).
_SHOWN = 5


@cli.command("train-bpe")
@click.argument("corpus", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("tokenizer.json"),
              show_default=True, help="Where to write the HF tokenizer.json.")
@click.option("--vocab-size", type=click.IntRange(min=1), default=32000, show_default=True,
              help="Size of the vocabulary, special tokens and the 256 byte tokens included.")
@click.option("--pattern", default="gpt2", show_default=True,
              help="Pre-tokenizer: a preset (gpt2, cl100k, o200k) or any regex.")
@click.option("--special-token", "special_tokens", multiple=True, default=("<|endoftext|>",), show_default=True,
              help="A special token, given the first ids; repeat the option for several.")
@click.option("--min-frequency", type=click.IntRange(min=0), default=2, show_default=True,
              help="Stop merging once the most frequent pair occurs fewer times than this.")
@click.option("--max-token-length", type=click.IntRange(min=1), default=None,
              help="Never make a token longer than this many bytes.")
@click.option("--text-field", default="text", show_default=True, help="Field holding the text in JSONL and Parquet input.")
@click.option("--strict", is_flag=True, help="Fail on invalid UTF-8 or malformed records instead of replacing or setting them aside.")
@click.option("--tiktoken", "tiktoken_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the ranks as a .tiktoken file here.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars and no summary.")
@friendly_errors
def train_bpe_command(
    corpus: tuple[Path, ...],
    output: Path,
    vocab_size: int,
    pattern: str,
    special_tokens: tuple[str, ...],
    min_frequency: int,
    max_token_length: int | None,
    text_field: str,
    strict: bool,
    tiktoken_path: Path | None,
    quiet: bool,
) -> None:
    """Train a byte-level BPE tokenizer on CORPUS (files or folders, walked recursively).

    Reads .txt (each line one sequence), .jsonl/.jsonl.gz/.jsonl.zst and .parquet (the
    --text-field of each record). Memory grows with the number of distinct pre-tokens, not
    with the corpus. The output is the same whatever the number of threads.
    """
    started = time.perf_counter()
    report: list[CorpusReport] = []
    try:
        tok = train_bpe(
            list(corpus),
            vocab_size=vocab_size,
            pattern=pattern,
            special_tokens=special_tokens,
            min_frequency=min_frequency,
            max_token_length=max_token_length,
            show_progress=not quiet and sys.stderr.isatty(),
            strict=strict,
            text_field=text_field,
            report=report,
        )
    except InvalidArgumentError as e:
        # The trainer refuses its settings before reading anything: a usage error.
        raise UsageError(str(e)) from None
    tok.save(output)
    if tiktoken_path is not None:
        tok.save_tiktoken(tiktoken_path)
    if not quiet:
        summary = report[0] if report else None
        rows = [("vocabulary", f"{tok.vocab_size:,}"), ("output", str(output))]
        if summary is not None:
            rows = summary.rows() + rows
        rows.append(("seconds", f"{time.perf_counter() - started:.1f}"))
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            click.echo(f"{key:<{width}}  {value}", err=True)
        if summary is not None and summary.examples:
            click.echo(f"first set-aside input ({min(len(summary.examples), _SHOWN)} of {sum(summary.set_aside.values()):,}):", err=True)
            for path, line, why in summary.examples[:_SHOWN]:
                click.echo(f"  {path}:{line}: {why}", err=True)
