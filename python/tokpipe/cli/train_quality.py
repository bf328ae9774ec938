"""``tokpipe train-quality-classifier`` (train a fastText quality classifier on good against
bad documents) and ``tokpipe inspect`` (a model's score of a text and the features that
weighed most). See ``tokpipe.quality``."""

from __future__ import annotations

import sys
import time

import click

from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.display import print_summary, shown_path
from tokpipe.cli.options import EXISTING_FILE, LOCATION, OUTPUT_FILE, storage_options, threads_option
from tokpipe.errors import InvalidArgumentError


@cli.command("train-quality-classifier")
@click.option("--positive", "positive", multiple=True, required=True, type=LOCATION,
              help="Reference (good) documents: a file, folder (walked) or glob, local or a URL, any format the "
                   "pipeline reads; repeat.")
@click.option("--negative", "negative", multiple=True, required=True, type=LOCATION,
              help="Other (bad) documents, the same way; repeat.")
@click.option("-o", "--output", type=OUTPUT_FILE, default="quality.bin", show_default=True,
              help="Where to write the model file (a path or URL).")
@click.option("--val-fraction", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.1, show_default=True,
              help="Fraction of the documents held out (by a hash of the seed and the text) to measure the model.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Seed of the split and the training.")
@click.option("--epochs", type=click.IntRange(1), default=10, show_default=True, help="Passes over the training set.")
@click.option("--dim", type=click.IntRange(1), default=32, show_default=True, help="Size of the feature vectors.")
@click.option("--lr", type=click.FloatRange(0.0, min_open=True), default=1.0, show_default=True, help="Learning rate.")
@click.option("--word-ngrams", type=click.IntRange(1), default=2, show_default=True,
              help="Longest word n-gram (for Chinese and Japanese, whose characters are words: character n-grams).")
@click.option("--char-ngrams", type=(click.IntRange(0), click.IntRange(0)), default=(0, 0), show_default=True,
              metavar="MIN MAX", help="Character n-grams inside words (fastText's minn maxn); 0 0: none.")
@click.option("--bucket", type=click.IntRange(1), default=1_000_000, show_default=True,
              help="Hash buckets of the word n-grams.")
@threads_option("Training threads (1 makes training reproducible for a seed).", default=1)
@click.option("--text-field", default="text", show_default=True, help="Field holding the text in JSONL and Parquet input.")
@click.option("--split", type=click.Choice(["none", "lines", "paragraphs"]), default="none", show_default=True,
              help=".txt input: one document per file, per line or per paragraph.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars and no summary.")
@storage_options
@friendly_errors
def train_quality_command(positive: tuple[str, ...], negative: tuple[str, ...], output: str, val_fraction: float,
                          seed: int, epochs: int, dim: int, lr: float, word_ngrams: int, char_ngrams: tuple[int, int],
                          bucket: int, threads: int, text_field: str, split: str, quiet: bool) -> None:
    """Train a fastText text-quality classifier: documents of --positive against documents of
    --negative. Prints precision, recall (of the positive label, at score 0.5) and AUC on the
    held-out documents. The model file is what the quality_classifier stage's ``model`` takes."""
    from tokpipe.quality import train_quality_classifier

    started = time.perf_counter()
    try:
        trained = train_quality_classifier(list(positive), list(negative), val_fraction=val_fraction, seed=seed,
                                           epochs=epochs, dim=dim, lr=lr, word_ngrams=word_ngrams,
                                           char_ngrams=char_ngrams, bucket=bucket, threads=threads,
                                           text_field=text_field, split=split,
                                           show_progress=not quiet and sys.stderr.isatty())
    except InvalidArgumentError as e:
        raise UsageError(str(e)) from None
    trained.save(output)
    if quiet:
        return
    rows = [("positive documents", f"{trained.positives:,}"), ("negative documents", f"{trained.negatives:,}"),
            ("trained on", f"{trained.train_documents:,}")]
    v = trained.validation
    if v is not None:
        rows += [("held out", f"{v.documents:,} ({v.positives:,} positive)"), ("precision", f"{v.precision:.4f}"),
                 ("recall", f"{v.recall:.4f}"), ("auc", f"{v.auc:.4f}")]
    rows += [("output", shown_path(output)), ("seconds", f"{time.perf_counter() - started:.1f}")]
    print_summary(rows)


@cli.command("inspect")
@click.argument("model", type=EXISTING_FILE)
@click.argument("text")
@click.option("--top", type=click.IntRange(1), default=10, show_default=True, help="How many features to show.")
@storage_options
@friendly_errors
def inspect_command(model: str, text: str, top: int) -> None:
    """Score TEXT with a quality MODEL and show the features (words, and character n-grams
    when the model has them) that pushed the score up (+) or down (-) most. TEXT '-' reads
    standard input."""
    from tokpipe.quality import load_quality_classifier

    if text == "-":
        text = sys.stdin.read()
    classifier = load_quality_classifier(model)
    score = float(classifier.score([text])[0])
    click.echo(f"quality_score  {score:.4f}")
    for name, weight in classifier.contributions(text, top):
        click.echo(f"  {weight:+.4f}  {name}")
