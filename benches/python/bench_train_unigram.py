#!/usr/bin/env python3
"""Unigram training time, peak memory and model quality of tokpipe, sentencepiece and HF
tokenizers, on the same raw text.

What is measured
----------------
Input: the benchmark corpus's linux-rst, python-txt, gcide and fortunes-zh documents, --max-mb
(22.2) MB of them in the corpus's mix; every tenth document is held out, the rest (about
20 MB) is for training. The documents' non-empty lines are written as they are, one sentence a
line, to train.txt and held_out.txt: each trainer normalizes for itself.

Trainers, vocab --vocab-size (32000), each in its own fresh Python subprocess, one after
another, reading train.txt through its own file reader:
  sentencepiece  SentencePieceTrainer.train(model_type="unigram", character_coverage=0.9995,
                 num_threads=--threads): its default normalization, nmt_nfkc
  tokpipe        tokpipe.train_unigram("train.txt", vocab_size=..., character_coverage=0.9995),
                 the public API (nmt_nfkc too), then save_sentencepiece (rayon threads:
                 RAYON_NUM_THREADS=--threads)
  hf-tokenizers  Tokenizer(models.Unigram()) with the normalizer NFKC, runs of spaces made one,
                 ends stripped (sentencepiece's whitespace rules, as HF's own converters spell
                 them) and the Metaspace pre-tokenizer, UnigramTrainer(shrinking_factor=0.75,
                 max_piece_length=16, n_sub_iterations=2, special tokens <unk> <s> </s>); HF
                 has no character coverage: every character is kept.
"train s" is the time around the training call inside the child (reading the file
included, imports not); "wall s" is the whole child; "CPU s" is the child's user + sys time, all
threads; "peak RSS MB" is ru_maxrss of the child from os.wait4.

Quality, on held_out.txt (raw lines), each model normalizing and segmenting with its own
encoder (tokpipe's saved .model is loaded in sentencepiece's processor, as sentencepiece's is):
"tokens/byte" (lower is better) and "LL/sentence", the mean summed score of each sentence's
best segmentation (higher is better; an unknown piece scores the lowest score minus 10).
"vs spm" columns: the difference from sentencepiece's value over its magnitude, so below 0
is better for tokens/byte and above 0 is better for LL/sentence.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

PACKAGES = ("tokpipe", "sentencepiece", "tokenizers")
TRAINERS = ("sentencepiece", "tokpipe", "hf-tokenizers")
COVERAGE = 0.9995
SPECIALS = ["<unk>", "<s>", "</s>"]
log = _corpus.log


# ------------------------------------------------------------------ children


def child_sentencepiece(train: Path, out: Path, a) -> float:
    import sentencepiece as spm

    t0 = time.perf_counter()
    spm.SentencePieceTrainer.train(input=str(train), model_prefix=str(out / "spm"), model_type="unigram",
                                   vocab_size=a.vocab_size, character_coverage=COVERAGE,
                                   num_threads=a.threads, minloglevel=2)
    return time.perf_counter() - t0


def child_tokpipe(train: Path, out: Path, a) -> float:
    import tokpipe

    t0 = time.perf_counter()
    tok = tokpipe.train_unigram(train, vocab_size=a.vocab_size, character_coverage=COVERAGE, show_progress=False)
    tok.save_sentencepiece(out / "spm.model")
    return time.perf_counter() - t0


def child_hf(train: Path, out: Path, a) -> float:
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tk = Tokenizer(models.Unigram())
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " "),
                                          normalizers.Strip()])
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=a.vocab_size, special_tokens=SPECIALS, unk_token="<unk>",
                                      shrinking_factor=0.75, max_piece_length=16, n_sub_iterations=2,
                                      show_progress=False)
    t0 = time.perf_counter()
    tk.train([str(train)], trainer)
    dt = time.perf_counter() - t0
    tk.save(str(out / "tokenizer.json"))
    return dt


CHILDREN = {"sentencepiece": child_sentencepiece, "tokpipe": child_tokpipe, "hf-tokenizers": child_hf}


def run_child(a) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dt = 0.0 if a.child == "baseline" else CHILDREN[a.child](Path(a.train), out, a)
    print(json.dumps({"train_s": dt}), flush=True)


# ------------------------------------------------------------------ parent


def prepare(a, work: Path) -> dict:
    """train.txt and held_out.txt: the documents' non-empty lines as they are, one a line."""
    docs = _corpus.load_docs(a.corpus, [s for s in a.sources.split(",") if s], a.max_mb)
    sizes = {"train": 0, "held_out": 0}
    with open(work / "train.txt", "w", encoding="utf-8") as tr, open(work / "held_out.txt", "w", encoding="utf-8") as ho:
        for i, d in enumerate(docs):
            part, f = ("held_out", ho) if i % 10 == 0 else ("train", tr)
            for line in d.text.split("\n"):
                if line.strip():
                    f.write(line + "\n")
                    sizes[part] += len(line.encode("utf-8")) + 1
    raw_train = sum(d.nbytes for i, d in enumerate(docs) if i % 10)
    return {"describe": _corpus.describe_docs(docs), "raw_train_mb": raw_train / 1e6,
            "train_mb": sizes["train"] / 1e6, "held_out_mb": sizes["held_out"] / 1e6}


def measure(name: str, a, work: Path) -> dict:
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--train", str(work / "train.txt"),
           "--out", str(out), "--vocab-size", str(a.vocab_size), "--threads", str(a.threads)]
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
    with open(out / "stdout.log", "wb") as so, open(out / "stderr.log", "wb") as se:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=so, stderr=se, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    r = {"trainer": name, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
         "load": os.getloadavg()[0], "out": str(out)}
    if rc != 0:
        tail = (out / "stderr.log").read_text(errors="replace").strip().splitlines()[-1:]
        r["error"] = (tail[0] if tail else "") or f"exit code {rc}"
        return r
    r.update(json.loads((out / "stdout.log").read_text().strip().splitlines()[-1]))
    return r


def quality_spm(model: Path, held_out: list[str]) -> dict:
    sys.path.insert(0, str(_corpus.REPO))
    from tests import unigram_eval as ev

    return ev.quality(ev.processor(model.read_bytes()), held_out)


def quality_hf(path: Path, held_out: list[str]) -> dict:
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(path))
    model = json.loads(tk.to_str())["model"]
    scores = [s for _, s in model["vocab"]]
    unk = model.get("unk_id")
    normal = [s for i, (p, s) in enumerate(model["vocab"]) if i != unk and p not in SPECIALS]
    unknown_score = min(normal) - 10.0
    tokens = nbytes = unknown = 0
    ll = 0.0
    for enc in tk.encode_batch(held_out, add_special_tokens=False):
        tokens += len(enc.ids)
        for i in enc.ids:
            if i == unk:
                unknown += 1
                ll += unknown_score
            else:
                ll += scores[i]
    nbytes = sum(len(s.encode("utf-8")) for s in held_out)
    return {"sentences": len(held_out), "tokens_per_byte": tokens / nbytes, "log_likelihood": ll / len(held_out),
            "unknown": unknown}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=_corpus.DEFAULT_CORPUS)
    ap.add_argument("--sources", default=",".join(_corpus.DEFAULT_SOURCES))
    ap.add_argument("--max-mb", type=float, default=22.2, help="MB of documents; a tenth is held out")
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trainers", default=",".join(TRAINERS))
    ap.add_argument("--runs", type=int, default=1, help="runs per trainer; the fastest is reported")
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--train", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return run_child(a)
    names = [t for t in a.trainers.split(",") if t]
    if set(names) - set(TRAINERS):
        ap.error(f"unknown trainer(s); choose from {', '.join(TRAINERS)}")

    with tempfile.TemporaryDirectory(prefix="tokpipe-bench-unigram-") as tmp:
        work = a.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        # The input is prepared in a child so that this process (every child's RSS floor) stays small.
        prep = subprocess.run([sys.executable, "-c", "import sys, json; sys.path.insert(0, sys.argv[1]); "
                               "import bench_train_unigram as b, argparse; "
                               "print(json.dumps(b.prepare(argparse.Namespace(**json.loads(sys.argv[2])), "
                               "b.Path(sys.argv[3]))))", str(Path(__file__).parent),
                               json.dumps({"corpus": str(a.corpus), "sources": a.sources, "max_mb": a.max_mb}),
                               str(work)], check=True, stdout=subprocess.PIPE, text=True)
        info = json.loads(prep.stdout.strip().splitlines()[-1])
        results = []
        for name in ["baseline"] + names:
            best = None
            for run in range(1 if name == "baseline" else a.runs):
                log(f"training {name} (run {run + 1}) ...")
                r = measure(name, a, work)
                log(f"   {r.get('train_s', float('nan')):.1f} s train, {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
                    f"{r['rss_mb']:.0f} MB, load {r['load']:.1f}" + (f"  ERROR {r['error']}" if "error" in r else ""))
                if "error" in r or best is None or r["wall_s"] < best["wall_s"]:
                    best = r
                if "error" in r:
                    break
            results.append(best)
        held_out = [s for s in (work / "held_out.txt").read_text(encoding="utf-8").split("\n") if s]
        for r in results:
            if r["trainer"] == "baseline" or "error" in r:
                continue
            out = Path(r["out"])
            log(f"evaluating {r['trainer']} ...")
            r["quality"] = (quality_hf(out / "tokenizer.json", held_out) if r["trainer"] == "hf-tokenizers"
                            else quality_spm(out / "spm.model", held_out))
            if (out / "stats.json").exists():
                r["stats"] = json.loads((out / "stats.json").read_text())

    print("# Unigram training benchmark\n")
    _corpus.print_machine_facts(PACKAGES)
    print(f"Input: {info['describe']}; training: {info['raw_train_mb']:.1f} MB of documents, "
          f"{info['train_mb']:.1f} MB of non-empty lines; held out: {info['held_out_mb']:.1f} MB.\n")
    print(f"Task: Unigram, vocab {a.vocab_size}, {a.threads} threads; fastest of {a.runs} run(s) per trainer.\n")
    ref = next((r for r in results if r["trainer"] == "sentencepiece" and "error" not in r), None)
    print("| trainer | train s | wall s | CPU s | peak RSS MB | load | wall / spm | RSS / spm | tokens/byte | "
          "vs spm | LL/sentence | vs spm |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        if r["trainer"] == "baseline":
            print(f"| python baseline | - | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} | "
                  f"{r['load']:.1f} | | | | | | |")
            continue
        if "error" in r:
            print(f"| {r['trainer']} | failed: {r['error']} | | | | | | | | | | |")
            continue
        q = r["quality"]
        # relative to sentencepiece: below 0 is better for tokens/byte, above 0 better for LL
        rel = lambda k: (f"{(q[k] - ref['quality'][k]) / abs(ref['quality'][k]) * 100:+.2f}%"  # noqa: E731
                         if ref else "n/a")
        print(f"| {r['trainer']} | {r['train_s']:.1f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} | "
              f"{r['load']:.1f} | {r['wall_s'] / ref['wall_s'] if ref else float('nan'):.2f} | "
              f"{r['rss_mb'] / ref['rss_mb'] if ref else float('nan'):.2f} | {q['tokens_per_byte']:.4f} | "
              f"{rel('tokens_per_byte')} | {q['log_likelihood']:.2f} | {rel('log_likelihood')} |")
    print(f"\nLoad average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json:
        a.json.write_text(json.dumps({"machine": dict(_corpus.machine_facts(PACKAGES)), "input": info,
                                      "results": results}, indent=1, default=str))


if __name__ == "__main__":
    main()
