#!/usr/bin/env python3
"""Unigram from an HF ``tokenizer.json`` against the same vocabulary's ``.model``, interleaved.

``bench_unigram.py`` times each encoder in its own subprocess, one after the other; on a busy
shared machine the load moves between those runs by more than the gap being measured. This
script loads every encoder into one process and alternates them: each round encodes all the
documents once with each encoder in turn (one document per call, one thread, the process
pinned to one CPU), timing the thread's CPU time; the best round of each is kept, and the ratios are read within one run.

  spm            sentencepiece's ``SentencePieceProcessor.encode``
  tokpipe        ``Tokenizer.from_sentencepiece(model)``
  tokpipe-json   ``Tokenizer.from_file`` of the tokenizer.json (special tokens matched, as HF)
  tokie          ``tokie.Tokenizer.from_json`` of the same file
  hf             HF ``tokenizers`` on the same file (fewer rounds: it is many times slower)

The tokenizer.json layouts are ``bench_unigram.py``'s: ``legacy`` (what transformers'
``SpmConverter.build_tokenizer_from_spm_proto`` writes) and ``t5`` (``T5Converter``: T5's
layout). "ids = HF" counts the documents whose ids equal HF tokenizers' on the same file.
Measure one layout per run: two tokie tokenizers in one process slow each other down about
threefold (it looks like state they share), which would misstate tokie.

    python3 benches/python/bench_unigram_json.py --shared en --layouts t5
    python3 benches/python/bench_unigram_json.py --shared ja --model spm_ja_unigram_8000.model
    python3 benches/python/bench_unigram_json.py --max-mb 5 --rounds 5     # the bench corpus
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402
from bench_unigram import LAYOUTS  # noqa: E402


def shared_documents(lang: str) -> list[str]:
    """The shared corpora's texts as documents: 20 paragraphs of tinyshakespeare and botchan
    (``en``), or 3,000-character pieces of wagahaiwa_nekodearu (``ja``)."""
    text_dir = _corpus.SHARED_CORPORA / "text"
    if lang == "ja":
        text = (text_dir / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8")
        return [text[i:i + 3000] for i in range(0, len(text), 3000)]
    docs = []
    for name in ("tinyshakespeare.txt", "botchan.txt"):
        paras = [p for p in (text_dir / name).read_text(encoding="utf-8").split("\n\n") if p.strip()]
        docs += ["\n\n".join(paras[i:i + 20]) for i in range(0, len(paras), 20)]
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=_corpus.DEFAULT_CORPUS)
    ap.add_argument("--sources", default=",".join(_corpus.DEFAULT_SOURCES))
    ap.add_argument("--max-mb", type=float, default=5)
    ap.add_argument("--shared", choices=("en", "ja"),
                    help="documents from the shared corpora's texts instead of the bench corpus")
    ap.add_argument("--model", default="spm_botchan_unigram_1000.model")
    ap.add_argument("--layouts", default="legacy", help="legacy, t5, or both comma-separated (see above)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--hf-rounds", type=int, default=2)
    args = ap.parse_args()
    # One thread, on one CPU, for every library (a peer that parallelises one long document
    # would otherwise be timed waiting for its helpers).
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    import sentencepiece as spm
    import tokenizers
    import tokie

    import tokpipe

    _corpus.print_machine_facts(("tokpipe", "sentencepiece", "tokenizers", "tokie", "transformers"))
    model = _corpus.VOCAB_DIR / args.model if "/" not in args.model else Path(args.model)
    if args.shared:
        texts, args.sources = shared_documents(args.shared), f"shared {args.shared}"
    else:
        texts = [d.text for d in _corpus.load_docs(args.corpus, args.sources.split(","), args.max_mb)]
    nbytes = sum(len(t.encode()) for t in texts)
    tmp = Path(tempfile.mkdtemp(prefix="bench-unigram-json-"))

    sp = spm.SentencePieceProcessor(model_file=str(model))
    tp = tokpipe.Tokenizer.from_sentencepiece(str(model))
    encoders = {"spm": sp.encode, "tokpipe": tp.encode}
    hf = {}
    for layout in args.layouts.split(","):
        path = tmp / f"{layout}.json"
        LAYOUTS[layout](model, path)
        tj = tokpipe.Tokenizer.from_file(str(path))
        tk = tokie.Tokenizer.from_json(str(path))
        h = tokenizers.Tokenizer.from_file(str(path))
        encoders[f"tokpipe-json ({layout})"] = lambda t, tj=tj: tj.encode(t, allowed_special="all")
        encoders[f"tokie ({layout})"] = lambda t, tk=tk: list(tk.encode(t, add_special_tokens=False).ids)
        hf[layout] = lambda t, h=h: h.encode(t, add_special_tokens=False).ids
        encoders[f"hf ({layout})"] = hf[layout]

    best = dict.fromkeys(encoders, float("inf"))
    out = {}
    for r in range(args.rounds):
        for name, enc in encoders.items():
            if name.startswith("hf") and r >= args.hf_rounds:
                continue
            # The collector off while timing: the ids kept from other encoders would otherwise
            # make each one's collections cost in proportion to the others' output.
            out.pop(name, None)
            gc.collect()
            gc.disable()
            t0 = time.thread_time()
            ids = [list(enc(t)) for t in texts]
            best[name] = min(best[name], time.thread_time() - t0)
            gc.enable()
            out[name] = ids

    print(f"\n### {model.name}: {len(texts)} documents, {nbytes / 1e6:.1f} MB ({args.sources}), "
          f"best of {args.rounds} interleaved rounds (HF {args.hf_rounds})\n")
    print("| encoder | MB/CPU-s | x tokpipe .model | ids = spm | ids = HF (same layout) |")
    print("| --- | --- | --- | --- | --- |")
    for name in encoders:
        layout = name[name.find("(") + 1:-1] if "(" in name else None
        ref = out[f"hf ({layout})"] if layout else None
        same_hf = "" if ref is None else f"{sum(a == b for a, b in zip(out[name], ref))}/{len(texts)}"
        same_spm = f"{sum(a == b for a, b in zip(out[name], out['spm']))}/{len(texts)}"
        print(f"| {name} | {nbytes / 1e6 / best[name]:.2f} | {best['tokpipe'] / best[name]:.2f} | "
              f"{same_spm} | {same_hf} |")


if __name__ == "__main__":
    main()
