#!/usr/bin/env python3
"""WordPiece (BERT uncased) encode throughput of tokpipe, HF ``tokenizers`` and tokie, on the
same documents.

What is measured: for every encoder, the benchmark corpus's documents (by default its sources
linux-rst, python-txt, gcide and fortunes-zh, cut to --max-mb with the same mix) encoded with
the BERT uncased vocabulary (../shared/corpora/vocab/bert_base_uncased_vocab.txt): BERT
normalizer (lowercase, strip accents), BERT pre-tokenizer, WordPiece, no special tokens.

  doc    a Python loop of one-document encodes, the process pinned to one CPU;
  batch  one call of the library's batch API, with RAYON_NUM_THREADS and the CPU affinity
         set to 1 and 2.

Each measurement runs in a fresh subprocess (so each library's thread pool gets the thread
count asked for); the best of --runs is kept. MB/s counts UTF-8 input bytes over wall time;
MB/CPU-s over the process's CPU time (user + system), the figure that stays put on a shared,
busy machine. "ids = HF" says whether every document's ids equal HF's.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402
import _encode_children  # noqa: E402

VOCAB = _corpus.VOCAB_DIR / "bert_base_uncased_vocab.txt"
ENCODERS = ("hf-tokenizers", "tokpipe", "tokie")


def make(name: str, hf_json: str):
    if name == "tokpipe":
        import tokpipe

        tok = tokpipe.Tokenizer.from_wordpiece_vocab(VOCAB, lowercase=True)
        return (lambda t: tok.encode(t)), (lambda ts: tok.encode_batch(ts))
    if name == "hf-tokenizers":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(hf_json)
        return (lambda t: tok.encode(t, add_special_tokens=False).ids), \
            (lambda ts: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)])
    if name == "tokie":
        import tokie

        tok = tokie.Tokenizer.from_json(hf_json)
        return (lambda t: list(tok.encode(t, add_special_tokens=False).ids)), \
            (lambda ts: [list(e.ids) for e in tok.encode_batch(ts, add_special_tokens=False)])
    raise SystemExit(f"unknown encoder {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _encode_children.add_arguments(ap, ENCODERS)
    args = ap.parse_args()
    if args.child:
        return _encode_children.child(args, *make(args.encoder, args.hf_json))

    _corpus.print_machine_facts(("tokpipe", "tokenizers", "tokie"))
    from tokenizers.implementations import BertWordPieceTokenizer

    tmp = Path(tempfile.mkdtemp(prefix="bench-wordpiece-"))
    hf_json = tmp / "bert.json"
    BertWordPieceTokenizer(str(VOCAB), lowercase=True).save(str(hf_json))
    rows, ids, r = _encode_children.run_children(__file__, args, tmp, "bert", ["--hf-json", str(hf_json)])
    ref = ids.get("hf-tokenizers")
    hf_cpu = {(m, t): c for e, m, t, _, c in rows if e == "hf-tokenizers"}
    print(f"\n{r['docs']:,} documents, {r['bytes'] / 1e6:.1f} MB ({args.sources})\n")
    print("| encoder | mode | threads | MB/s | MB/CPU-s | x HF (CPU) | ids = HF |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for enc, mode, threads, speed, cpu in rows:
        same = _encode_children.same_ids(ids, enc, ref)
        ratio = cpu / hf_cpu[(mode, threads)] if (mode, threads) in hf_cpu else float("nan")
        print(f"| {enc} | {mode} | {threads} | {speed:.2f} | {cpu:.2f} | {ratio:.1f} | {same} |")


if __name__ == "__main__":
    main()
