#!/usr/bin/env python3
"""WordPiece training scores (issue 23): characters per token on held-out English, Japanese
and Chinese text for tokpipe's three scores and HF ``tokenizers``' WordPieceTrainer, and the
training time of each.

Inputs are the shared text files (../shared/corpora/text). Two setups:

  held-out  each language loses a slice to evaluation, and every trainer trains on the rest:
            English the first 200 KB of tinyshakespeare.txt (training keeps its remainder and
            botchan.txt), Japanese the last 10% of the lines of wagahaiwa_nekodearu.txt,
            Chinese zh_notes/003_*.txt (000 and 002 are near-duplicates of each other, so one
            of them would leak; 003 has no twin);
  issue     the issue's measurement: train on every shared text file, encode the same slices
            (English as the issue did; the slices are then part of the training text).

Every trainer gets the same files, vocab_size (default 8000), special tokens
([PAD] [UNK] [CLS] [SEP] [MASK]), min_frequency 2, limit_alphabet 1000 and the BERT uncased
normalizer and pre-tokenizer, and runs in a fresh subprocess pinned to one CPU (HF's rayon
pool and ours then have one core each). chars/token = characters of the slice / tokens of
its encoding (no special tokens); "unk %" is the share of [UNK] tokens.

``--speed FILE`` instead times the training on one big file (e.g. the bench corpus's
docs.jsonl, built by ../shared/bench/build_corpus.py) at ``--vocab-size`` (use 30000), for each
score and HF (which reads the documents from a Python iterator: ``train_from_iterator``),
split into counting and merging for tokpipe. ``--tokpipe-path DIR`` adds another tokpipe build
(a folder holding the ``tokpipe`` package) as "old", to compare builds.

    PYTHONPATH=python python3 benches/python/bench_wordpiece_scores.py                  # ~1 min
    PYTHONPATH=python python3 benches/python/bench_wordpiece_scores.py --speed /tmp/benchcorpus/docs.jsonl \\
        --vocab-size 30000 --max-mb 50
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEXT = REPO.parent / "shared" / "corpora" / "text"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SCORES = ("likelihood", "frequency", "pmi")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(args: argparse.Namespace) -> None:
    """Train one tokenizer on one CPU, save it, print the timings as JSON."""
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    files = args.files
    started, cpu = time.perf_counter(), cpu_seconds()
    timings: dict[str, float] = {}
    if args.trainer == "hf":
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=args.vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                            limit_alphabet=1000, continuing_subword_prefix="##",
                                            show_progress=False)
        if files[0].endswith(".jsonl"):
            def documents():
                for f in files:
                    with open(f, encoding="utf-8") as fh:
                        for line in fh:
                            yield json.loads(line)["text"]
            tok.train_from_iterator(documents(), trainer)
        else:
            tok.train(files, trainer)
        tok.save(args.out)
    else:
        if args.tokpipe_path:
            sys.path.insert(0, args.tokpipe_path)
        import tokpipe
        from tokpipe import _core
        from tokpipe.train import BERT_SPECIAL_TOKENS, feed_corpus

        assert list(BERT_SPECIAL_TOKENS) == SPECIALS
        # As train_wordpiece, with the counting and the merging timed apart.
        trainer = _core.WordPieceTrainer(
            vocab_size=args.vocab_size, min_frequency=2, special_tokens=SPECIALS, limit_alphabet=1000,
            initial_alphabet=[], continuing_subword_prefix="##", unk_token="[UNK]", score=args.trainer,
            lowercase=True, strip_accents=None, clean_text=True, handle_chinese_chars=True, show_progress=False)
        feed_corpus(trainer, files, None, strict=False, text_field="text", report=None)
        timings["count_s"] = time.perf_counter() - started
        merging = time.perf_counter()
        tok = tokpipe.Tokenizer(trainer.train())
        timings["merge_s"] = time.perf_counter() - merging
        tok.save(args.out)
    timings["wall_s"] = time.perf_counter() - started
    timings["cpu_s"] = cpu_seconds() - cpu
    timings["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(timings))


def train(name: str, trainer: str, files: list[Path], out: Path, vocab_size: int, tokpipe_path: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", trainer, "--out", str(out), "--vocab-size", str(vocab_size)]
    if tokpipe_path:
        cmd += ["--tokpipe-path", tokpipe_path]
    cmd += ["--files", *map(str, files)]
    env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="true")
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    timings = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"  trained {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()), file=sys.stderr)
    return timings


def slices(workdir: Path) -> tuple[dict[str, str], list[Path], list[Path]]:
    """The held-out text per language, the training files without it, and every file."""
    shakespeare = (TEXT / "tinyshakespeare.txt").read_bytes()
    english = shakespeare[:200_000].decode("utf-8", errors="ignore")
    cat_lines = (TEXT / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    cut = len(cat_lines) * 9 // 10
    zh_held = sorted((TEXT / "zh_notes").glob("003_*.txt"))
    assert len(zh_held) == 1
    held = {"English": english, "Japanese": "".join(cat_lines[cut:]), "Chinese": zh_held[0].read_text(encoding="utf-8")}
    (workdir / "shakespeare_rest.txt").write_bytes(shakespeare[len(english.encode("utf-8")):])
    (workdir / "cat_head.txt").write_text("".join(cat_lines[:cut]), encoding="utf-8")
    zh_train = [p for p in sorted((TEXT / "zh_notes").glob("*.txt")) if p != zh_held[0]]
    train_files = [workdir / "shakespeare_rest.txt", TEXT / "botchan.txt", workdir / "cat_head.txt", *zh_train]
    every = [TEXT / "tinyshakespeare.txt", TEXT / "botchan.txt", TEXT / "wagahaiwa_nekodearu.txt",
             *sorted((TEXT / "zh_notes").glob("*.txt"))]
    return held, train_files, every


def encode_stats(path: Path, trainer: str, text: str) -> tuple[float, float]:
    """(chars/token, share of [UNK] in %) of ``text`` under the saved tokenizer."""
    if trainer == "hf":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        ids = tok.encode(text, add_special_tokens=False).ids
        unk = tok.token_to_id("[UNK]")
    else:
        import tokpipe

        tok = tokpipe.Tokenizer.from_file(path)
        ids = tok.encode(text)
        unk = tok.token_to_id("[UNK]")
    return len(text) / len(ids), 100 * sum(i == unk for i in ids) / len(ids)


def quality(args: argparse.Namespace) -> None:
    trainers = [*SCORES, "hf"]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        held, train_files, every = slices(workdir)
        print("held-out slices (chars): " + ", ".join(f"{k} {len(v):,}" for k, v in held.items()))
        print(f"training text: held-out setup {sum(p.stat().st_size for p in train_files):,} bytes, "
              f"issue setup {sum(p.stat().st_size for p in every):,} bytes; vocab_size {args.vocab_size}")
        for setup, files in (("held-out", train_files), ("issue (slices in training)", every)):
            print(f"\n## {setup}\n")
            print("| trainer | " + " | ".join(f"{lang} chars/token (unk %)" for lang in held)
                  + " | train wall s | train CPU s |")
            print("|---|" + "---|" * (len(held) + 2))
            for trainer in trainers:
                out = workdir / f"{trainer}.json"
                timings = train(trainer, trainer, files, out, args.vocab_size, None)
                cells = []
                for text in held.values():
                    cpt, unk = encode_stats(out, trainer, text)
                    cells.append(f"{cpt:.3f} ({unk:.2f})")
                name = "HF WordPieceTrainer" if trainer == "hf" else f"tokpipe {trainer}"
                print(f"| {name} | " + " | ".join(cells) + f" | {timings['wall_s']:.2f} | {timings['cpu_s']:.2f} |",
                      flush=True)


def speed(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(args.speed)
        if args.max_mb:
            # The first --max-mb of whole lines (documents, for JSON lines).
            cut = Path(tmp) / f"head{source.suffix}"
            limit, size = args.max_mb * 1_000_000, 0
            with open(source, "rb") as src, open(cut, "wb") as dst:
                for line in src:
                    if size + len(line) > limit:
                        break
                    dst.write(line)
                    size += len(line)
            source = cut
        print(f"{args.speed}: {source.stat().st_size:,} bytes, vocab_size {args.vocab_size}, one CPU each")
        print("| trainer | wall s | CPU s | count s | merge s | peak RSS MB |")
        print("|---|---|---|---|---|---|")
        runs = [(f"tokpipe {s}", s, None) for s in SCORES]
        if args.tokpipe_path:
            runs += [("old tokpipe likelihood (= pmi)", "likelihood", args.tokpipe_path),
                     ("old tokpipe frequency", "frequency", args.tokpipe_path)]
        runs.append(("HF WordPieceTrainer", "hf", None))
        for name, trainer, path in runs:
            t = train(name, trainer, [source], Path(tmp) / "t.json", args.vocab_size, path)
            print(f"| {name} | {t['wall_s']:.1f} | {t['cpu_s']:.1f} | {t.get('count_s', float('nan')):.1f} | "
                  f"{t.get('merge_s', float('nan')):.1f} | {t['rss_mb']:.0f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--speed", metavar="FILE", help="time training on FILE instead of measuring chars/token")
    ap.add_argument("--max-mb", type=int, default=0, help="with --speed: use only the first MB of FILE")
    ap.add_argument("--tokpipe-path", help="with --speed: also time the tokpipe package found in this folder")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.trainer = args.child
        return child(args)
    speed(args) if args.speed else quality(args)


if __name__ == "__main__":
    main()
