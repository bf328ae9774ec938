#!/usr/bin/env python3
"""BPE training time and peak memory of tokpipe and its peers, on the same text.

What is measured
----------------
Every trainer learns a byte-level BPE vocabulary of --vocab-size (32000)
entries, GPT-2 pre-tokenization, special token <|endoftext|>, from the
benchmark corpus's linux-rst, python-txt, gcide and fortunes-zh documents
(about 77 MB in 137k files under CORPUS/text/, one document a file).

"The same text" has two readings, and the trainers' file readers differ:
HF's (Tokenizer.train) and tokpipe's make every *line* of a file a
sequence; gigatoken's (TextFileSource without separator) makes every
file one sequence. Pre-tokens differ around newlines between the two, so
the runs come in two groups (--inputs), compared only within a group:

  lines  the files, through the trainer's own file reader:
           hf-tokenizers/lines  Tokenizer.train(files, BpeTrainer)
           tokpipe/lines        tokpipe.train_bpe(files, ...)
  docs   one sequence per document:
           hf-tokenizers/docs   Tokenizer.train_from_iterator(documents)
           tokpipe/docs         tokpipe.train_bpe(texts=documents, ...)
           gigatoken/docs       gigatoken.train_bpe(TextFileSource(files))
         where `documents` is a generator reading each file whole.

HF: Tokenizer(models.BPE()) with the ByteLevel(add_prefix_space=False)
pre-tokenizer, BpeTrainer(min_frequency=2, special_tokens=[...],
initial_alphabet=ByteLevel.alphabet()). tokpipe: train_bpe(...,
pattern="gpt2", special_tokens=("<|endoftext|>",), min_frequency=2,
show_progress=False). gigatoken: train_bpe(source, vocab_size,
["<|endoftext|>"]) (HF tie-breaking is its default; no min_frequency).

Each trainer runs in its own fresh Python subprocess, one after another, so
its peak RSS (ru_maxrss from os.wait4 on that child) is its own: the
interpreter, the library, whatever it holds of the corpus, and training.
"train s" is the time around the training call inside the child (reading
the files included, interpreter start and imports not); "wall s" is the
whole child process; "CPU s" is user+sys of the child (more than wall
means it trained on several cores; all trainers may use every core).
A "python baseline" row shows the RSS of a child that trains nothing.

Merges: each trainer's merge list is compared with HF's in the same
input group, rank by rank:
"same rank" counts positions where both learned the same pair, "first
diff" is the first rank where they differ (= length of the identical
prefix), "common" is the size of the intersection as sets. tokpipe's
saved tokenizer.json is read with tokenizers.Tokenizer.from_file.

Reading the output
------------------
A markdown table: trainer, train s, wall s, CPU s, peak RSS MB, the
ratios vs HF ("x HF time" > 1 means faster than HF; "x HF RSS" < 1 means
less memory than HF), and the merge comparison. Machine facts first.
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

PACKAGES = ("tokpipe", "tokenizers", "gigatoken")
TRAINERS = ("hf-tokenizers", "gigatoken", "tokpipe")
INPUTS = ("lines", "docs")
# which input modes each library's trainer is run in (see the module docstring)
SUPPORTED = {"hf-tokenizers": ("lines", "docs"), "tokpipe": ("lines", "docs"), "gigatoken": ("docs",)}
SPECIAL = "<|endoftext|>"


log = _corpus.log


# --------------------------------------------------------------------------
# children: one trainer each; print one JSON line on stdout
# --------------------------------------------------------------------------



def _documents(files):
    for p in files:
        with open(p, encoding="utf-8", newline="") as f:  # no newline translation
            yield f.read()


def child_hf(files, out: Path, a, inputs: str):
    from tokenizers import Tokenizer, decoders, models, trainers
    from tokenizers.pre_tokenizers import ByteLevel

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=a.vocab_size, min_frequency=2, special_tokens=[SPECIAL],
                                  initial_alphabet=ByteLevel.alphabet(), show_progress=False)
    t0 = time.perf_counter()
    if inputs == "lines":
        tk.train(files, trainer)  # HF's file reader: every line (with its newline) a sequence
    else:
        tk.train_from_iterator(_documents(files), trainer, length=len(files))
    dt = time.perf_counter() - t0
    tk.save(str(out / "tokenizer.json"))
    return dt, tk.get_vocab_size()


def child_gigatoken(files, out: Path, a, inputs: str):
    import gigatoken

    assert inputs == "docs"
    t0 = time.perf_counter()
    # its file reader without a separator: each file one document
    vocab, merges = gigatoken.train_bpe(gigatoken.TextFileSource(files), a.vocab_size, [SPECIAL])
    dt = time.perf_counter() - t0
    b2u = _corpus.bytes_to_unicode()
    u = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
    (out / "merges.json").write_text(json.dumps([[u(l), u(r)] for l, r in merges], ensure_ascii=False))
    return dt, len(vocab)


def child_tokpipe(files, out: Path, a, inputs: str):
    import tokpipe

    # files: its file reader (one sequence per line, like HF's);
    # texts: a generator of strings, each string one sequence
    source = {"files": files} if inputs == "lines" else {"texts": _documents(files)}
    t0 = time.perf_counter()
    tok = tokpipe.train_bpe(**source, vocab_size=a.vocab_size, pattern="gpt2", special_tokens=(SPECIAL,),
                            min_frequency=2, show_progress=False)
    dt = time.perf_counter() - t0
    tok.save(str(out / "tokenizer.json"))
    return dt, tok.vocab_size


CHILDREN = {"hf-tokenizers": child_hf, "gigatoken": child_gigatoken, "tokpipe": child_tokpipe}


def run_child(a):
    if a.child == "list":
        # runs in its own process so that the parent never holds the corpus: a child's
        # ru_maxrss starts from the parent's high-water mark (fork/vfork until exec)
        docs = _corpus.load_docs(a.corpus, [s for s in a.sources.split(",") if s], a.max_mb, keep_text=False)
        Path(a.files).write_text("".join(f"{d.path}\n" for d in docs))
        print(json.dumps({"describe": _corpus.describe_docs(docs), "n": len(docs)}), flush=True)
        return
    files = Path(a.files).read_text().splitlines()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.child == "baseline":
        dt, size = 0.0, None
    else:
        lib, inputs = a.child.split("/")
        dt, size = CHILDREN[lib](files, out, a, inputs)
    print(json.dumps({"train_s": dt, "vocab_size": size}), flush=True)


# --------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------

def measure(name: str, a, files_list: Path, out: Path) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--files", str(files_list),
           "--out", str(out), "--vocab-size", str(a.vocab_size)]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "stdout.log", "wb") as so, open(out / "stderr.log", "wb") as se:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    r = {"trainer": name, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
         "rss_mb": ru.ru_maxrss / 1024, "rc": p.returncode, "out": str(out)}
    if p.returncode != 0:
        tail = (out / "stderr.log").read_text(errors="replace").strip().splitlines()[-1:]
        r["error"] = (tail[0].strip() if tail else "") or f"exit code {p.returncode}"
        return r
    last = (out / "stdout.log").read_text().strip().splitlines()[-1]
    r.update(json.loads(last))
    return r


def read_merges(r: dict) -> list[tuple[str, str]] | None:
    out = Path(r["out"])
    if (out / "merges.json").exists():
        return [tuple(m) for m in json.loads((out / "merges.json").read_text())]
    if (out / "tokenizer.json").exists():
        from tokenizers import Tokenizer

        data = json.loads(Tokenizer.from_file(str(out / "tokenizer.json")).to_str())
        return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in data["model"]["merges"]]
    return None


def compare_merges(ref, got) -> dict:
    same = sum(1 for x, y in zip(ref, got) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(ref, got)) if x != y), min(len(ref), len(got)))
    return {"merges": len(got), "same_rank": same, "first_diff": first, "common": len(set(ref) & set(got)),
            "example": None if first >= min(len(ref), len(got)) else {"rank": first, "hf": ref[first], "got": got[first]}}


def run_all(a, names: list[str], files_list: Path, work: Path) -> list[dict]:
    results = []
    for name in ["baseline"] + names:
        best = None
        for run in range(a.runs if name != "baseline" else 1):
            log(f"training {name} (run {run + 1}) ...")
            r = measure(name, a, files_list, work / name.replace("/", "-"))
            log(f"   {r.get('train_s', float('nan')):.1f} s train, {r['wall_s']:.1f} s wall, "
                f"{r['rss_mb']:.0f} MB peak RSS" + (f"  ERROR {r['error']}" if "error" in r else ""))
            if "error" in r:
                best = r
                break
            if best is None or r["train_s"] < best["train_s"]:
                best = r
        results.append(best)
    return results


def compare_with_hf(results: list[dict]) -> dict[str, dict]:
    """Adds "vs_hf" to every result; returns HF's result per input mode."""
    hf = {r["trainer"].split("/")[1]: r for r in results
          if r["trainer"].startswith("hf-tokenizers/") and "error" not in r}
    refs = {mode: read_merges(r) for mode, r in hf.items()}
    for r in results:
        if r["trainer"] == "baseline" or "error" in r:
            continue
        ref, got = refs.get(r["trainer"].split("/")[1]), read_merges(r)
        if ref is not None and got is not None:
            r["vs_hf"] = compare_merges(ref, got)
    return hf


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="BPE training (32k vocab) wall time and peak RSS of tokpipe vs HF tokenizers and gigatoken, "
                    "each in its own subprocess, on the same documents; plus merge agreement with HF.",
        epilog="See the module docstring (or benches/README.md) for the method.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--corpus", type=Path, default=_corpus.DEFAULT_CORPUS,
                    help="benchmark corpus directory (built by ../shared/bench/build_corpus.py)")
    ap.add_argument("--sources", default=",".join(_corpus.DEFAULT_SOURCES), help="corpus sources to train on")
    ap.add_argument("--max-mb", type=float, default=0, help="use about this many MB (same mix of sources); 0: all")
    ap.add_argument("--trainers", default=",".join(TRAINERS), help=f"subset of {','.join(TRAINERS)}")
    ap.add_argument("--inputs", default=",".join(INPUTS),
                    help="lines: the files, one sequence per line (HF's and tokpipe's file readers); "
                         "docs: one sequence per document (file)")
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--runs", type=int, default=1, help="runs per trainer; the fastest is reported")
    ap.add_argument("--work-dir", type=Path, help="keep the trained files here (default: a temporary directory)")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return run_child(a)

    names = [t for t in a.trainers.split(",") if t]
    bad = set(names) - set(TRAINERS)
    if bad:
        ap.error(f"unknown trainer(s) {sorted(bad)}; choose from {', '.join(TRAINERS)}")
    inputs = [i for i in a.inputs.split(",") if i]
    if set(inputs) - set(INPUTS):
        ap.error(f"unknown input mode(s) {sorted(set(inputs) - set(INPUTS))}; choose from {', '.join(INPUTS)}")
    # HF first in each group: it is the reference for ratios and merges
    runs = [f"{lib}/{mode}" for mode in inputs for lib in sorted(names, key=lambda n: n != "hf-tokenizers")
            if mode in SUPPORTED[lib]]

    _corpus.check_corpus(a.corpus)
    notes = []
    with tempfile.TemporaryDirectory(prefix="tokpipe-bench-train-") as tmp:
        work = a.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        files_list = work / "files.txt"
        # the document list comes from a child, keeping this process (and so every child's RSS floor) small
        listing = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "list", "--files",
                                  str(files_list), "--corpus", str(a.corpus), "--sources", a.sources,
                                  "--max-mb", str(a.max_mb)], stdout=subprocess.PIPE, check=True, text=True)
        info = json.loads(listing.stdout.strip().splitlines()[-1])
        with open(files_list) as f:
            missing = [p for p, _ in zip(map(str.strip, f), range(1000)) if not os.path.exists(p)]
        if missing:
            sys.exit(f"corpus text files missing, e.g. {missing[0]}; rebuild the corpus")
        results = run_all(a, runs, files_list, work)
        hf = compare_with_hf(results)

    print("# Training benchmark\n")
    _corpus.print_machine_facts(PACKAGES)
    print(f"Input: {info['describe']}, one file per document under {a.corpus / 'text'}\n")
    print(f"Task: byte-level BPE, vocab {a.vocab_size}, GPT-2 pre-tokenization, special {SPECIAL}; "
          f"each trainer in a fresh subprocess, fastest of {a.runs} run(s).\n")

    # ---- report
    print("## Results\n")
    print("| trainer | train s | wall s | CPU s | peak RSS MB | x HF time | x HF RSS | vocab | merges same rank as HF "
          "| first diff | common |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        if r["trainer"] == "baseline":
            print(f"| python baseline | - | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} | | | | | | |")
            continue
        if "error" in r:
            print(f"| {r['trainer']} | failed | | | | | | | | | |")
            notes.append(f"{r['trainer']}: failed: {r['error']}")
            continue
        h = hf.get(r["trainer"].split("/")[1])
        tx = f"{h['train_s'] / r['train_s']:.2f}" if h else "n/a"
        mx = f"{r['rss_mb'] / h['rss_mb']:.2f}" if h else "n/a"
        v = r.get("vs_hf")
        m = (f"{v['same_rank']}/{v['merges']} | {v['first_diff']} | {v['common']}" if v else "n/a | n/a | n/a")
        print(f"| {r['trainer']} | {r['train_s']:.1f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} | "
              f"{tx} | {mx} | {r.get('vocab_size') or '?'} | {m} |")
        if v and v["example"]:
            e = v["example"]
            notes.append(f"{r['trainer']}: first merge differing from HF at rank {e['rank']}: "
                         f"HF {e['hf']!r} vs {e['got']!r} (byte-level symbols)")
    print()
    print("trainer/lines: the files, one sequence per line (with its newline); trainer/docs: one sequence "
          "per document. Ratios and merges compare with HF in the same input mode.\n")
    print(f"Load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    if notes:
        print("## Notes\n")
        for n in notes:
            print(f"- {n}")
        print()
    if a.json:
        a.json.write_text(json.dumps({"machine": dict(_corpus.machine_facts(PACKAGES)),
                                      "input": info["describe"], "results": results, "notes": notes},
                                     indent=1, default=str))


if __name__ == "__main__":
    main()
