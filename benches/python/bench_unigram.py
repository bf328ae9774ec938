#!/usr/bin/env python3
"""Unigram (sentencepiece) encode throughput of tokpipe, sentencepiece, HF ``tokenizers`` and
tokie, on the same documents; with ``--train-bpe N``, also of a sentencepiece BPE model.

What is measured: for every encoder and each sentencepiece model (by default the two shared
ones, ../shared/corpora/vocab/spm_botchan_unigram_1000.model and spm_ja_unigram_8000.model),
the benchmark corpus's documents (by default its sources linux-rst, python-txt, gcide and
fortunes-zh, cut to --max-mb with the same mix) encoded to ids, no special tokens.
``--train-bpe 32000`` first trains a sentencepiece BPE model of that size with Llama's options
(byte fallback, digits split, identity normalization, spaces kept, whitespace-only pieces) on
the same documents (cached in SCRATCH/cache) and measures it as well.

  sentencepiece  ``SentencePieceProcessor(model_file=...)``, ``encode``
  tokpipe        ``Tokenizer.from_sentencepiece(...)``, ``encode``
  hf-tokenizers  the tokenizer.json transformers' ``SpmConverter.build_tokenizer_from_spm_proto``
                 (legacy) writes for the model, the HF spelling closest to sentencepiece; with
                 ``--layouts legacy,t5`` also the one ``T5Converter`` writes (T5's layout)
  tokpipe-json   ``Tokenizer.from_file`` of that tokenizer.json (HF's rules; special tokens
                 matched in the text, as HF does)
  tokie          the same tokenizer.json

  doc    a Python loop of one-document encodes, the process pinned to one CPU;
  batch  one call of the library's batch API (sentencepiece: ``encode(list, num_threads=n)``),
         with RAYON_NUM_THREADS and the CPU affinity set to 1 and 2.

Each measurement runs in a fresh subprocess; the best of --runs is kept. MB/s counts UTF-8
input bytes over wall time; MB/CPU-s over the process's CPU time (user + system of all its
threads), the figure that stays put on a shared, busy machine. "ids = spm" and "ids = HF" say
whether every document's ids equal sentencepiece's and HF tokenizers' (doc mode).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402
import _encode_children  # noqa: E402

MODELS = ("spm_botchan_unigram_1000.model", "spm_ja_unigram_8000.model")
ENCODERS = ("sentencepiece", "tokpipe", "hf-tokenizers", "tokpipe-json", "tokie")


def make(name: str, model: str, hf_json: str):
    if name == "tokpipe":
        import tokpipe

        tok = tokpipe.Tokenizer.from_sentencepiece(model)
        return tok.encode, (lambda ts, n: tok.encode_batch(ts, num_threads=n))
    if name == "tokpipe-json":
        import tokpipe

        tok = tokpipe.Tokenizer.from_file(hf_json)
        return (lambda t: tok.encode(t, allowed_special="all")), \
            (lambda ts, n: tok.encode_batch(ts, num_threads=n, allowed_special="all"))
    if name == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=model)
        return sp.encode, (lambda ts, n: sp.encode(ts, num_threads=n))
    if name == "hf-tokenizers":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(hf_json)
        return (lambda t: tok.encode(t, add_special_tokens=False).ids), \
            (lambda ts, n: [e.ids for e in tok.encode_batch(ts, add_special_tokens=False)])
    if name == "tokie":
        import tokie

        tok = tokie.Tokenizer.from_json(hf_json)
        return (lambda t: list(tok.encode(t, add_special_tokens=False).ids)), \
            (lambda ts, n: [list(e.ids) for e in tok.encode_batch(ts, add_special_tokens=False)])
    raise SystemExit(f"unknown encoder {name}")


def hf_tokenizer_json(model: Path, out: Path) -> None:
    """transformers' converter output for the model (its newest, legacy spelling)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers.convert_slow_tokenizer import SpmConverter

        proto = pb.ModelProto()
        proto.ParseFromString(model.read_bytes())
        if proto.trainer_spec.model_type == pb.TrainerSpec.BPE:
            vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
        else:
            vocab = [(p.piece, p.score) for p in proto.pieces]
        SpmConverter.build_tokenizer_from_spm_proto(proto, vocab, legacy=True).save(str(out))


class _T5SlowStandIn:
    """What ``T5Converter`` reads of a slow ``T5Tokenizer``: its model file, 100 extra ids,
    ``</s>``'s id and T5's default ``legacy=True``."""

    def __init__(self, model: Path):
        import sentencepiece as spm

        self.vocab_file = str(model)
        self._extra_ids = 100
        self.legacy = True
        self._sp = spm.SentencePieceProcessor(model_file=str(model))

    def convert_tokens_to_ids(self, token: str) -> int:
        return self._sp.piece_to_id(token)


def t5_tokenizer_json(model: Path, out: Path) -> None:
    """The tokenizer.json transformers' ``T5Converter`` writes for the model: T5's layout
    (Precompiled, Strip right, Replace of space runs, Metaspace, ``$A </s>`` post-processor,
    100 ``<extra_id_N>`` pieces added as special tokens, as ``T5TokenizerFast`` does)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers.convert_slow_tokenizer import T5Converter

        tok = T5Converter(_T5SlowStandIn(model)).converted()
    tok.add_special_tokens([f"<extra_id_{i}>" for i in range(100)])
    tok.save(str(out))


LAYOUTS = {"legacy": hf_tokenizer_json, "t5": t5_tokenizer_json}


def train_spm_bpe(args, vocab_size: int) -> Path:
    """A sentencepiece BPE model with Llama-1/2's trainer options, trained on the bench documents."""
    import hashlib

    import sentencepiece as spm

    key = hashlib.sha256(f"{args.corpus}|{args.sources}|{args.max_mb}|{vocab_size}".encode()).hexdigest()[:12]
    path = _corpus.CACHE / f"{key}-spm-bpe-{vocab_size}.model"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    docs = _corpus.load_docs(args.corpus, args.sources.split(","), args.max_mb)
    lines = (line for d in docs for line in d.text.splitlines() if line.strip())
    _corpus.log(f"training a sentencepiece BPE model, vocab {vocab_size} ...")
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines, model_prefix=str(path.with_suffix("")), model_type="bpe",
        vocab_size=vocab_size, byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, character_coverage=0.9995,
        input_sentence_size=2_000_000, shuffle_input_sentence=True, num_threads=os.cpu_count(), minloglevel=2)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _encode_children.add_arguments(ap, ENCODERS)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--train-bpe", type=int, default=0, metavar="VOCAB",
                    help="also a sentencepiece BPE model of this size trained on the documents")
    ap.add_argument("--layouts", default="legacy",
                    help="tokenizer.json layouts, comma-separated: legacy (SpmConverter's spelling of the "
                         "model's own settings) and t5 (T5Converter's, as T5's tokenizer.json)")
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        one, batch = make(args.encoder, args.model, args.hf_json)
        return _encode_children.child(args, one, lambda texts: batch(texts, int(args.threads)))

    _corpus.print_machine_facts(("tokpipe", "sentencepiece", "tokenizers", "tokie", "transformers"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-unigram-"))
    models = [_corpus.VOCAB_DIR / name for name in args.models.split(",") if name]
    if args.train_bpe:
        models.append(train_spm_bpe(args, args.train_bpe))
    for model, layout in [(m, lay) for m in models for lay in args.layouts.split(",")]:
        label = model.stem if layout == "legacy" else f"{model.stem}-{layout}"
        model_name = model.name if layout == "legacy" else f"{model.name}, tokenizer.json layout {layout}"
        hf_json = tmp / f"{label}.json"
        LAYOUTS[layout](model, hf_json)
        rows, ids, r = _encode_children.run_children(
            __file__, args, tmp, label, ["--model", str(model), "--hf-json", str(hf_json)])
        ref = ids.get("sentencepiece")
        hf_ref = ids.get("hf-tokenizers")
        spm_cpu = {(m, t): c for e, m, t, _, c in rows if e == "sentencepiece"}
        print(f"\n### {model_name}: {r['docs']:,} documents, {r['bytes'] / 1e6:.1f} MB ({args.sources})\n")
        print("| encoder | mode | threads | MB/s | MB/CPU-s | x spm (CPU) | ids = spm | ids = HF |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for enc, mode, threads, speed, cpu in rows:
            ratio = cpu / spm_cpu[(mode, threads)] if (mode, threads) in spm_cpu else float("nan")
            same_spm, same_hf = ((_encode_children.same_ids(ids, enc, ref), _encode_children.same_ids(ids, enc, hf_ref))
                                 if mode == "doc" else ("", ""))
            print(f"| {enc} | {mode} | {threads} | {speed:.2f} | {cpu:.2f} | {ratio:.2f} | {same_spm} | {same_hf} |")


if __name__ == "__main__":
    main()
