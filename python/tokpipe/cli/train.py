"""``tokpipe train-bpe``, ``tokpipe train-wordpiece`` and ``tokpipe train-unigram``: train a
tokenizer and write ``tokenizer.json`` (or a sentencepiece ``.model``), and with ``--hf-dir`` the
folder transformers' ``AutoTokenizer`` loads; ``tokpipe train --model M`` is any of them with the
same options."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from tokpipe import storage
from tokpipe.cli.app import UsageError, cli, friendly_errors
from tokpipe.cli.display import print_summary, shown_path
from tokpipe.cli.options import LOCATION, OUTPUT_FILE, F, LocationType, corpus_options
from tokpipe.errors import InvalidArgumentError
from tokpipe.presegment import PRE_SEGMENTERS
from tokpipe.train import (
    BERT_SPECIAL_TOKENS,
    NORMALIZATION_RULES,
    CorpusReport,
    train_bpe,
    train_unigram,
    train_wordpiece,
)

if TYPE_CHECKING:
    from tokpipe.tokenizer import Tokenizer

def hf_dir_option(command: F) -> F:
    """``--hf-dir`` and ``--model-max-length``, the same on every train-* command (so ``tokpipe
    train`` shows them once)."""
    command = click.option(
        "--model-max-length", type=click.IntRange(min=1), default=None,
        help="With --hf-dir: the model's context length, written to tokenizer_config.json "
             "(default: 512 for WordPiece, 2048 otherwise; give your model's).")(command)
    return click.option(
        "--hf-dir", type=LocationType(file_okay=False), default=None,
        help="Also write a transformers folder here (a path or URL): tokenizer.json, tokenizer_config.json and "
             "special_tokens_map.json, which AutoTokenizer.from_pretrained(DIR) loads with the model family's "
             "special tokens and a pad token (see Tokenizer.save_pretrained).")(command)

#: ``--pre-segment``, the same on train-bpe and train-unigram (WordPiece's BERT pre-tokenizer
#: already cuts every Han character).
pre_segment_option = click.option(
    "--pre-segment", type=click.Choice(PRE_SEGMENTERS), default=None,
    help="Cut runs of Han characters into words with this segmenter before training, so no token crosses a word "
         "(Chinese; needs the chinese extra). The tokenizer encodes raw text without it.")


def _check_hf_dir(hf_dir: str | None, model_max_length: int | None) -> None:
    """Before any work: ``--model-max-length`` only means something for ``--hf-dir``."""
    if model_max_length is not None and hf_dir is None:
        raise UsageError("--model-max-length is written to the --hf-dir folder: give --hf-dir too")


def _save_hf_dir(tok: Tokenizer, hf_dir: str | None, model_max_length: int | None,
                 outputs: list[tuple[str, str]]) -> None:
    """Write ``--hf-dir`` when given, and list it among the summary's outputs."""
    if hf_dir is not None:
        tok.save_pretrained(hf_dir, model_max_length=model_max_length)
        outputs.append(("transformers folder", shown_path(hf_dir)))


@cli.command("train-bpe")
@click.argument("corpus", nargs=-1, required=True, type=LOCATION)
@click.option("-o", "--output", type=OUTPUT_FILE, default="tokenizer.json",
              show_default=True, help="Where to write the HF tokenizer.json (a path or URL).")
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
@pre_segment_option
@click.option("--tiktoken", "tiktoken_path", type=OUTPUT_FILE, default=None,
              help="Also write the ranks as a .tiktoken file here.")
@hf_dir_option
@corpus_options
@friendly_errors
def train_bpe_command(
    corpus: tuple[str, ...],
    output: str,
    vocab_size: int,
    pattern: str,
    special_tokens: tuple[str, ...],
    min_frequency: int,
    max_token_length: int | None,
    pre_segment: str | None,
    text_field: str,
    strict: bool,
    tiktoken_path: str | None,
    hf_dir: str | None,
    model_max_length: int | None,
    quiet: bool,
) -> None:
    """Train a byte-level BPE tokenizer on CORPUS (files or folders, walked recursively).

    Reads .txt (each line one sequence), .jsonl/.jsonl.gz/.jsonl.zst and .parquet (the
    --text-field of each record). Memory grows with the number of distinct pre-tokens, not
    with the corpus. The output is the same whatever the number of threads.
    """
    _check_hf_dir(hf_dir, model_max_length)
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
            pre_segment=pre_segment,
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
    outputs = [("output", shown_path(output))]
    _save_hf_dir(tok, hf_dir, model_max_length, outputs)
    if not quiet:
        _print_summary(report, tok.vocab_size, outputs, started)


def _print_summary(report: list[CorpusReport], vocab_size: int, outputs: list[tuple[str, str]], started: float) -> None:
    rows = [("vocabulary", f"{vocab_size:,}"), *outputs, ("seconds", f"{time.perf_counter() - started:.1f}")]
    print_summary(rows, report[0] if report else None)


@cli.command("train-wordpiece")
@click.argument("corpus", nargs=-1, required=True, type=LOCATION)
@click.option("-o", "--output", type=OUTPUT_FILE, default="tokenizer.json",
              show_default=True, help="Where to write the HF tokenizer.json (a path or URL).")
@click.option("--vocab-txt", "vocab_txt", type=OUTPUT_FILE, default=None,
              help="Also write BERT's vocab.txt here.")
@click.option("--vocab-size", type=click.IntRange(min=1), default=30000, show_default=True,
              help="Size of the vocabulary, special tokens and alphabet included.")
@click.option("--score", type=click.Choice(["frequency", "likelihood", "pmi"]), default="frequency",
              show_default=True,
              help="frequency: merge the most frequent pair (HF WordPieceTrainer's vocabulary; the most compact); "
                   "likelihood: the pair that raises the corpus likelihood under a unigram model the most, computed "
                   "exactly (original WordPiece); pmi: the pair maximising freq(ab)/(freq(a)*freq(b)) (the HF "
                   "course's formula).")
@click.option("--special-token", "special_tokens", multiple=True, default=BERT_SPECIAL_TOKENS, show_default=True,
              help="A special token, given the first ids; repeat the option for several.")
@click.option("--min-frequency", type=click.IntRange(min=0), default=2, show_default=True,
              help="Never merge a pair seen fewer times than this.")
@click.option("--limit-alphabet", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Keep only this many characters (the most frequent) in the alphabet.")
@click.option("--cased", is_flag=True, help="Keep case and accents (BERT cased); the default lowercases and strips accents.")
@hf_dir_option
@corpus_options
@friendly_errors
def train_wordpiece_command(
    corpus: tuple[str, ...],
    output: str,
    vocab_txt: str | None,
    vocab_size: int,
    score: str,
    special_tokens: tuple[str, ...],
    min_frequency: int,
    limit_alphabet: int,
    cased: bool,
    text_field: str,
    strict: bool,
    hf_dir: str | None,
    model_max_length: int | None,
    quiet: bool,
) -> None:
    """Train a BERT WordPiece tokenizer on CORPUS (files or folders, walked recursively).

    Words are cut by BERT's normalizer and pre-tokenizer, then merged pair by pair until the
    vocabulary is full. Reads the same inputs as train-bpe.
    """
    _check_hf_dir(hf_dir, model_max_length)
    started = time.perf_counter()
    report: list[CorpusReport] = []
    try:
        tok = train_wordpiece(
            list(corpus),
            vocab_size=vocab_size,
            score=score,
            special_tokens=special_tokens,
            min_frequency=min_frequency,
            limit_alphabet=limit_alphabet,
            lowercase=not cased,
            show_progress=not quiet and sys.stderr.isatty(),
            strict=strict,
            text_field=text_field,
            report=report,
        )
    except InvalidArgumentError as e:
        raise UsageError(str(e)) from None
    tok.save(output)
    outputs = [("output", shown_path(output))]
    if vocab_txt is not None:
        tok.save_vocab(vocab_txt)
        outputs.append(("vocab.txt", shown_path(vocab_txt)))
    _save_hf_dir(tok, hf_dir, model_max_length, outputs)
    if not quiet:
        _print_summary(report, tok.vocab_size, outputs, started)


@cli.command("train-unigram")
@click.argument("corpus", nargs=-1, required=True, type=LOCATION)
@click.option("-o", "--output", type=OUTPUT_FILE, default="tokenizer.json",
              show_default=True,
              help="Where to write the tokenizer: a sentencepiece .model when the name ends with .model, "
                   "else an HF tokenizer.json.")
@click.option("--model-file", type=OUTPUT_FILE, default=None,
              help="Also write the sentencepiece .model here.")
@click.option("--vocab-size", type=click.IntRange(min=1), default=8000, show_default=True,
              help="Pieces in the vocabulary, <unk>/<s>/</s>, symbols and byte pieces included.")
@click.option("--character-coverage", type=float, default=0.9995, show_default=True,
              help="Share of the corpus's characters the alphabet covers (0.98 to 1); rarer characters are "
                   "unknown (or bytes with --byte-fallback). 1.0 suits small alphabets, 0.9995 Chinese or Japanese.")
@click.option("--normalization", type=click.Choice(NORMALIZATION_RULES), default="nmt_nfkc", show_default=True,
              help="sentencepiece's normalization rule, applied before training and by the tokenizer: nmt_nfkc "
                   "(NFKC, control characters dropped, odd spaces made spaces), nfkc, the *_cf ones also "
                   "case-fold, identity leaves the text alone.")
@click.option("--max-piece-length", type=click.IntRange(min=1), default=16, show_default=True,
              help="Longest piece, in characters (sentencepiece's max_sentencepiece_length).")
@click.option("--byte-fallback", is_flag=True,
              help="Add the 256 <0xNN> byte pieces: unknown characters are spelled as their UTF-8 bytes.")
@click.option("--user-defined-symbol", "user_defined_symbols", multiple=True,
              help="A symbol always kept as one piece wherever it occurs in text; repeat for several.")
@click.option("--control-symbol", "control_symbols", multiple=True,
              help="A symbol that only has an id (never made from text, like <s>); repeat for several.")
@click.option("--unk-id", type=click.IntRange(min=0), default=0, show_default=True, help="Id of <unk>.")
@click.option("--bos-id", type=click.IntRange(min=-1), default=1, show_default=True, help="Id of <s>; -1 for none.")
@click.option("--eos-id", type=click.IntRange(min=-1), default=2, show_default=True, help="Id of </s>; -1 for none.")
@click.option("--pad-id", type=click.IntRange(min=-1), default=-1, show_default=True, help="Id of <pad>; -1 for none.")
@click.option("--split-by-whitespace/--no-split-by-whitespace", default=True, show_default=True,
              help="Pieces never cross a space (with --no-..., a piece may hold ▁ inside).")
@click.option("--split-by-unicode-script/--no-split-by-unicode-script", default=True, show_default=True,
              help="A piece holds one script (kana count as Han).")
@click.option("--split-by-number/--no-split-by-number", default=True, show_default=True,
              help="Digits are a script of their own: a piece never mixes digits and letters.")
@click.option("--split-digits", is_flag=True, help="Every digit is a piece of its own.")
@click.option("--add-dummy-prefix/--no-add-dummy-prefix", default=True, show_default=True,
              help="Put ▁ before each text, so a word is the same piece at the start of a text as after a space.")
@click.option("--remove-extra-whitespaces/--keep-extra-whitespaces", default=True, show_default=True,
              help="Drop leading, trailing and repeated spaces before training and encoding.")
@click.option("--shrinking-factor", type=float, default=0.75, show_default=True,
              help="Share of the pieces each pruning round keeps (between 0 and 1).")
@click.option("--num-sub-iterations", type=click.IntRange(min=1), default=2, show_default=True,
              help="EM steps between two pruning rounds.")
@click.option("--seed-size", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Frequent substrings kept as seed pieces (sentencepiece's seed_sentencepiece_size).")
@click.option("--max-sentence-length", type=click.IntRange(min=1), default=4192, show_default=True,
              help="Longer lines, in bytes, are skipped (and counted in the summary), as sentencepiece does.")
@pre_segment_option
@hf_dir_option
@corpus_options
@friendly_errors
def train_unigram_command(
    corpus: tuple[str, ...],
    output: str,
    model_file: str | None,
    hf_dir: str | None,
    model_max_length: int | None,
    quiet: bool,
    **options: object,
) -> None:
    """Train a sentencepiece Unigram tokenizer on CORPUS (files or folders, walked recursively).

    sentencepiece's trainer, its options and defaults: every line is a sentence, normalized by
    --normalization, and the pieces come from seeds pruned by EM until --vocab-size are left.
    Reads the same inputs as train-bpe. -o writes a .model (loads in sentencepiece) when it ends
    with .model, else an HF tokenizer.json; --model-file adds the .model beside it.
    """
    _check_hf_dir(hf_dir, model_max_length)
    started = time.perf_counter()
    report: list[CorpusReport] = []
    try:
        tok = train_unigram(list(corpus), show_progress=not quiet and sys.stderr.isatty(), report=report,
                            **options)  # type: ignore[arg-type]
    except InvalidArgumentError as e:
        raise UsageError(str(e)) from None
    outputs = []
    for path, is_model in ((output, storage.location(output).suffix == ".model"), (model_file, True)):
        if path is None:
            continue
        if is_model:
            tok.save_sentencepiece(path)
        else:
            tok.save(path)
        outputs.append(("output" if path is output else "sentencepiece model", shown_path(path)))
    _save_hf_dir(tok, hf_dir, model_max_length, outputs)
    if not quiet:
        _print_summary(report, tok.vocab_size, outputs, started)


# `tokpipe train --model M`: one entry point over the model-specific commands above. Its options
# are the union of theirs, so each option keeps one definition (help, type, default) where its
# model's command declares it; a command registered later only needs adding to this table.
_TRAINERS: dict[str, click.Command] = {
    "bpe": train_bpe_command,
    "wordpiece": train_wordpiece_command,
    "unigram": train_unigram_command,
}


def _union_of_options(commands: dict[str, click.Command]) -> list[click.Parameter]:
    """Each option once, its default left to the chosen model (vocab sizes differ by model), its
    help saying which models take it."""
    seen: dict[str, list[tuple[str, click.Option]]] = {}
    for model, command in commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and param.name is not None:
                seen.setdefault(param.name, []).append((model, param))
    options: list[click.Parameter] = []
    for takers in seen.values():
        param = takers[0][1]
        only = "" if len(takers) == len(commands) else f" [{', '.join(m for m, _ in takers)} only]"
        defaults = {repr(p.default) for _, p in takers}
        if param.is_flag or param.default in (None, ()):
            default = ""
        elif len(defaults) > 1:
            default = " Default: the model's own (tokpipe train-MODEL --help)."
        else:
            default = f" Default: {param.default}."
        # An on/off pair (--x/--no-x) keeps both spellings.
        opts = [f"{param.opts[0]}/{param.secondary_opts[0]}"] if param.secondary_opts else param.opts
        if param.secondary_opts and len(defaults) == 1:
            default = f" Default: {param.opts[0] if param.default else param.secondary_opts[0]}."
        # Models that describe the option differently each get their sentence.
        helps: dict[str, list[str]] = {}
        for model, p in takers:
            helps.setdefault(p.help or "", []).append(model)
        text = (param.help or "") if len(helps) == 1 else " ".join(
            f"{', '.join(models)}: {h}" for h, models in helps.items())
        # An option that acts as it is parsed (--storage-option) keeps its callback, and
        # stays out of the values handed on.
        options.append(click.Option(
            [param.name, *opts], type=param.type, multiple=param.multiple, is_flag=param.is_flag,
            default=() if param.multiple else None, help=f"{text}{default}{only}", metavar=param.metavar,
            callback=param.callback, expose_value=param.expose_value, is_eager=param.is_eager))
    return options


def _train_any(model: str, corpus: tuple[str, ...], **options: object) -> None:
    ctx = click.get_current_context()
    command = _TRAINERS[model]
    known = {p.name for p in command.params}
    given = {name: value for name, value in options.items()
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}
    foreign = sorted(name for name in given if name not in known)
    if foreign:
        flags = ", ".join(next(p.opts[-1] for p in ctx.command.params if p.name == name) for name in foreign)
        raise UsageError(f"{flags} {'is not an option' if len(foreign) == 1 else 'are not options'} of --model {model} "
                         f"(see tokpipe train-{model} --help)")
    ctx.invoke(command, corpus=corpus, **given)


train_any_command = click.Command(
    "train",
    callback=_train_any,
    params=[
        click.Option(["--model", "-m"], type=click.Choice(list(_TRAINERS)), required=True,
                     help="Which tokenizer to train; each takes the options of its own train-MODEL command."),
        click.Argument(["corpus"], nargs=-1, required=True, type=LOCATION),
        *_union_of_options(_TRAINERS),
    ],
    help="Train a tokenizer of any model on CORPUS: the same as tokpipe train-MODEL with the same options. "
         "An option that the chosen model does not take is a usage error (exit 2).",
    short_help="Train a tokenizer: --model " + "|".join(_TRAINERS) + ".",
)
cli.add_command(train_any_command)
