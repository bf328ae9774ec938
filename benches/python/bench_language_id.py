#!/usr/bin/env python3
"""Language identification: the ``language`` stage's fastText backend (tokpipe's Rust reader of
``lid.176.ftz``) against Lingua (the stage's other backend), fastText's own Python ``predict``
on the same model, CLD2 (``pycld2``) and whatlang (a Rust crate, ``benches/whatlang_peer``):
documents per CPU second and accuracy on language-labelled text.

Every detector reads the same documents cut to their first ``--max-chars`` characters (the
stage's default, 1,000). Text sets:

- ``multilingual``: the 24-language corpus of Debian's translated manual pages,
  ``python3 ../shared/bench/build_multilingual.py DIR`` (``--multilingual DIR/docs.jsonl``),
  labelled by the translation project's language;
- ``shared``: the shared corpora's English books, Japanese novel and Chinese notes;
- ``web``: the shared Common Crawl samples, labelled by CCNet (whose label is itself fastText
  lid.176's: an agreement check more than a truth).

Speed is documents over CPU seconds (``time.process_time``, every thread counted: per core),
best of ``--runs``; run it with ``RAYON_NUM_THREADS=1``. Agreement: tokpipe's labels and
probabilities must be fastText's (the script fails otherwise). Accuracy counts a document right
when the code equals its label after folding spellings of one language (``no`` and ``nb``,
``iw`` and ``he``, ``zh-Hant`` and ``zh``, whatlang's ISO 639-3 codes to 639-1).

    python3 ../shared/bench/build_multilingual.py /tmp/ml24
    tokpipe language-model          # lid.176.ftz into tokpipe's cache (or --model PATH)
    (cd benches/whatlang_peer && cargo build --release --target-dir /tmp/whatlang-target)
    RAYON_NUM_THREADS=1 python3 benches/python/bench_language_id.py --multilingual /tmp/ml24/docs.jsonl \\
        --whatlang /tmp/whatlang-target/release/whatlang_peer

``pycld2`` is used when importable (``pip install pycld2`` in a scratch venv); fastText's
``predict`` needs ``fasttext-wheel`` (the fasttext extra).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import SHARED, print_machine_facts  # noqa: E402

# whatlang's ISO 639-3 codes of the languages of the labelled sets -> ISO 639-1.
ISO3 = {"ces": "cs", "dan": "da", "deu": "de", "ell": "el", "spa": "es", "fin": "fi", "fra": "fr", "hun": "hu",
        "ind": "id", "ita": "it", "jpn": "ja", "mkd": "mk", "nob": "nb", "nld": "nl", "pol": "pl", "por": "pt",
        "ron": "ro", "rus": "ru", "srp": "sr", "swe": "sv", "ukr": "uk", "vie": "vi", "cmn": "zh", "eng": "en",
        "kor": "ko", "ara": "ar", "heb": "he", "tur": "tr", "cat": "ca", "hrv": "hr", "bul": "bg", "slk": "sk"}
SAME = {"no": "nb", "iw": "he", "zh-Hant": "zh", "sh": "sr"}


def fold(code: str) -> str:
    code = ISO3.get(code, code)
    return SAME.get(code, code)


def text_sets(multilingual: str | None, max_chars: int) -> dict[str, list[tuple[str, str]]]:
    corpora = SHARED / "corpora"
    books = ("botchan.txt", "tinyshakespeare.txt")
    shared = [("en", (corpora / "text" / n).read_text(encoding="utf-8")) for n in books]
    shared += [("ja", (corpora / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8"))]
    shared += [("zh", p.read_text(encoding="utf-8")) for p in sorted((corpora / "text" / "zh_notes").glob("*.txt"))]
    # The books cut into documents of 2,000 characters, so that they weigh as documents.
    shared = [(lang, text[i:i + 2000]) for lang, text in shared for i in range(0, len(text), 2000)]
    web = []
    for path in sorted((corpora / "web").glob("cc_*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            web += [(r["metadata"]["language"], r["text"]) for r in map(json.loads, f)]
    sets = {"shared": shared, "web": web}
    if multilingual:
        with open(multilingual, encoding="utf-8") as f:
            sets["multilingual"] = [(r["lang"], r["text"]) for r in map(json.loads, f)]
    return {name: [(lang, text[:max_chars]) for lang, text in docs] for name, docs in sets.items()}


def timed(detect, texts: list[str], runs: int) -> tuple[list[str], float]:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        codes = detect(texts)
        best = min(best, time.process_time() - started)
    return codes, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--multilingual", help="docs.jsonl of build_multilingual.py (24 labelled languages)")
    parser.add_argument("--model", help="the fastText model (default: lid.176.ftz as the stage finds it)")
    parser.add_argument("--whatlang", help="the built benches/whatlang_peer binary")
    parser.add_argument("--max-chars", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import numpy as np
    import pyarrow as pa

    from tokpipe.pipeline.kernels import fasttext_top_labels
    from tokpipe.pipeline.stages.language import LanguageFilter, default_model

    model_path = args.model or str(default_model() or "")
    if not model_path:
        sys.exit("no lid.176.ftz: run `tokpipe language-model` or give --model")
    print_machine_facts(("lingua-language-detector", "fasttext-wheel", "pycld2"))
    print(f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'all')}, model {Path(model_path).name}, "
          f"first {args.max_chars} characters, best of {args.runs}\n")
    sets = text_sets(args.multilingual, args.max_chars)
    ours = LanguageFilter(backend="fasttext", model_path=model_path, min_score=None, max_chars=None)
    lingua29 = LanguageFilter(backend="lingua", min_score=None, max_chars=None)
    lingua75 = LanguageFilter(backend="lingua", min_score=None, max_chars=None, candidate_languages=None)
    detectors = {
        "tokpipe fasttext (lid.176.ftz)": lambda texts: ours.detect(pa.array(texts))[0].tolist(),
        "Lingua, stage default (29 candidates)": lambda texts: lingua29.detect(pa.array(texts))[0].tolist(),
        "Lingua, all 75 languages": lambda texts: lingua75.detect(pa.array(texts))[0].tolist(),
    }
    import fasttext

    reference = fasttext.load_model(model_path)

    def fasttext_predict(texts):
        labels, _ = reference.predict([t.replace("\n", " ") for t in texts], k=1)
        return [lab[0].removeprefix("__label__") if lab else "und" for lab in labels]

    detectors["fastText's Python predict (same model)"] = fasttext_predict
    try:
        import pycld2

        def cld2(texts):
            out = []
            for t in texts:
                try:
                    _, _, found = pycld2.detect(t)
                    out.append(found[0][1] if found[0][1] != "un" else "und")
                except pycld2.error:
                    out.append("und")
            return out

        detectors["CLD2 (pycld2)"] = cld2
    except ImportError:
        print("(pycld2 not installed: no CLD2 row)\n")

    rows = {name: {"docs": 0, "cpu": 0.0, "right": {}} for name in detectors}
    if args.whatlang:
        rows["whatlang (Rust, one thread)"] = {"docs": 0, "cpu": 0.0, "right": {}}
    for set_name, docs in sets.items():
        texts = [t for _, t in docs]
        labels = [fold(lang) for lang, _ in docs]
        # Agreement with fastText's own predict: labels and probabilities, bit for bit.
        ft_labels, ft_probs = reference.predict([t.replace("\n", " ") for t in texts], k=1)
        label_ids, probs = fasttext_top_labels(ours._module, pa.array(texts), None)
        got = [ours._module.labels[i] if i >= 0 else None for i in label_ids]
        want = [lab[0] if len(lab) else None for lab in ft_labels]
        want_p = np.array([float(p[0]) if len(p) else 0.0 for p in ft_probs])
        same_labels = sum(g == w for g, w in zip(got, want))
        same_probs = int((probs.astype(np.float64) == want_p).sum())
        print(f"{set_name}: {len(texts)} documents; tokpipe = fastText on {same_labels} labels and {same_probs} "
              f"probabilities (max difference {np.abs(probs - want_p).max():.1e})")
        assert same_labels == len(texts) and same_probs == len(texts), set_name
        for name, detect in detectors.items():
            codes, cpu = timed(detect, texts, args.runs)
            rows[name]["docs"] += len(texts)
            rows[name]["cpu"] += cpu
            rows[name]["right"][set_name] = (sum(fold(c) == lab for c, lab in zip(codes, labels)), len(texts))
        if args.whatlang:
            with tempfile.TemporaryDirectory() as tmp:
                src, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.txt"
                src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
                best = float("inf")
                for _ in range(args.runs):
                    done = subprocess.run([args.whatlang, str(src), str(args.max_chars), str(out)], check=True,
                                          capture_output=True, text=True)
                    best = min(best, float(done.stderr.strip().splitlines()[-1]))
                codes = out.read_text().split()
            row = rows["whatlang (Rust, one thread)"]
            row["docs"] += len(texts)
            row["cpu"] += best
            row["right"][set_name] = (sum(fold(c) == lab for c, lab in zip(codes, labels)), len(texts))
    print()
    names = list(sets)
    base = rows["Lingua, stage default (29 candidates)"]
    base_rate = base["docs"] / base["cpu"]
    print("| detector | docs per CPU second | vs Lingua (stage default) | " +
          " | ".join(f"accuracy, {n}" for n in names) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in names) + " |")
    for name, row in rows.items():
        rate = row["docs"] / row["cpu"]
        acc = " | ".join(f"{row['right'][n][0] / row['right'][n][1]:.1%} ({row['right'][n][0]}/{row['right'][n][1]})"
                         for n in names)
        print(f"| {name} | {rate:,.0f} | {rate / base_rate:.1f}x | {acc} |")
    if "multilingual" in sets:
        print("\nPer language (multilingual), right of the documents:")
        docs = sets["multilingual"]
        langs = sorted({fold(lang) for lang, _ in docs})
        print("| language | docs | " + " | ".join(rows) + " |")
        print("| --- | ---: | " + " | ".join("---:" for _ in rows) + " |")
        per = {}
        for name, detect in detectors.items():
            per[name] = [fold(c) for c in detect([t for _, t in docs])]
        if args.whatlang:
            with tempfile.TemporaryDirectory() as tmp:
                src, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.txt"
                src.write_text("".join(json.dumps({"text": t}) + "\n" for _, t in docs), encoding="utf-8")
                subprocess.run([args.whatlang, str(src), str(args.max_chars), str(out)], check=True,
                               capture_output=True)
                per["whatlang (Rust, one thread)"] = [fold(c) for c in out.read_text().split()]
        for lang in langs:
            idx = [i for i, (l, _) in enumerate(docs) if fold(l) == lang]
            cells = " | ".join(f"{sum(per[n][i] == lang for i in idx)}" for n in rows)
            print(f"| {lang} | {len(idx)} | {cells} |")


if __name__ == "__main__":
    main()
