"""Quality-classifier scoring: the ``quality_classifier`` stage's scoring (``keys`` on record
batches: one Rust call that prepares and scores every document) vs plain ``fasttext``
predicting on the same documents, same model.

    PYTHONPATH=python:. python3 benches/python/bench_quality_classifier.py [BENCH_CORPUS/docs.jsonl]
        [--mb 40] [--batch 1024] [--dim 16] [--bucket 100000] [--runs 3]

The model is trained first, quick, on the tests' data (the prose of ../shared/corpora/text
against degraded copies); ``--dim`` and ``--bucket`` set its size (the CLI's defaults are 32
and 1,000,000: a 128 MB input matrix, so the model's rows no longer fit in the caches). The
scored documents are the first --mb MB of the bench corpus. Plain fastText is given each
document with its newlines made spaces (fastText's predict refuses a newline), as
``model.predict(list, k=1)`` per batch, the way datatrove and the ``language`` stage call it.

The other rows take the work apart: fastText alone on our prepared lines (its model's cost on
the same features as ours); the road not taken, our Rust preparation handed to fastText's
predict as a Python list (``prepare`` then ``multilinePredict``); the previous implementation
(Arrow kernels for the preparation, then fastText); our scoring of whole documents (the stage
reads the first 10,000 characters of each by default); the preparation alone, to an Arrow
column and on to a Python list.

CPU seconds are ``time.process_time`` (user + system of every thread of this process), so
MB per CPU second is per core; wall seconds are printed too, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from tests.quality_corpus import corpus
from tests.quality_reference import arrow_prepare
from tokpipe import _core
from tokpipe.pipeline.kernels import arrow_strings
from tokpipe.pipeline.stages.quality_classifier import QualityClassifierFilter
from tokpipe.quality import QualityClassifier, load_quality_classifier, prepare, train_quality_classifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(_corpus.DEFAULT_DOCS))
    ap.add_argument("--mb", type=float, default=40.0)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--bucket", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    good, bad = [], []
    for g, b in corpus(size=500, per_source=300).values():
        good += g
        bad += b
    started = time.process_time()
    trained = train_quality_classifier(positive_texts=good, negative_texts=bad, epochs=10, dim=args.dim,
                                       bucket=args.bucket)
    print(f"training: {len(good) + len(bad)} documents, dim {args.dim}, {args.bucket:,} buckets, "
          f"{time.process_time() - started:.1f} CPU s")

    texts: list[str] = []
    total = 0
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            texts.append(text)
            total += len(text.encode())
            if total >= args.mb * 1e6:
                break
    mb = total / 1e6
    batches = [texts[i:i + args.batch] for i in range(0, len(texts), args.batch)]
    arrow = [pa.record_batch({"id": pa.array([str(i) for i in range(len(b))]), "text": pa.array(b, pa.string())})
             for b in batches]
    print(f"scoring: {len(texts):,} documents, {mb:.1f} MB, batches of {args.batch}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quality.bin"
        trained.save(path)
        stage = QualityClassifierFilter(model=str(path), threshold=0.5)
        classifier = load_quality_classifier(path)
        model = classifier.model
        whole = QualityClassifier(classifier.blob, {**classifier.meta, "max_chars": None})
        # Prepared once, outside the timings, for the model-only row.
        lines = [[line + "\n" for line in prepare(b)] for b in batches]

        def ours() -> None:
            for b in arrow:
                stage.keys(b)

        def plain() -> None:
            for b in batches:
                model.predict([x.replace("\n", " ") for x in b], k=1)

        def model_only() -> None:
            for b in lines:
                model.f.multilinePredict(b, 1, 0.0, "strict")

        def rust_prepare_fasttext() -> None:
            for b in arrow:
                model.f.multilinePredict([line + "\n" for line in prepare(b.column("text"))], 1, 0.0, "strict")

        def previous() -> None:
            for b in batches:
                model.f.multilinePredict([line + "\n" for line in arrow_prepare(b, 10_000)], 1, 0.0, "strict")

        def whole_documents() -> None:
            for b in arrow:
                whole.score(b.column("text"))

        def prepare_arrow() -> list[pa.Array]:
            out = []
            for b in arrow:
                strings, _, _ = arrow_strings(b.column("text"))
                o, d = _core.fasttext_prepare(strings, 10_000, "\n")
                out.append(pa.LargeStringArray.from_buffers(len(b), pa.py_buffer(o), pa.py_buffer(d)))
            return out

        prepared = prepare_arrow()

        def to_pylist() -> None:
            for column in prepared:
                column.to_pylist()

        rows: list[tuple[str, Callable[[], object]]] = [
            ("tokpipe quality_classifier (Rust prepare + predict)", ours),
            ("plain fasttext predict, raw text", plain),
            ("fasttext predict alone, on our prepared lines", model_only),
            ("Rust prepare -> list -> fasttext predict", rust_prepare_fasttext),
            ("previous: Arrow prepare -> fasttext predict", previous),
            ("tokpipe, whole documents (max_chars None)", whole_documents),
            ("Rust prepare alone, to an Arrow column", prepare_arrow),
            ("Arrow column of prepared lines -> to_pylist", to_pylist),
        ]
        cpu = {name: [] for name, _ in rows}
        wall = {name: [] for name, _ in rows}
        for _ in range(args.runs):
            for name, run in rows:
                w, c = time.perf_counter(), time.process_time()
                run()
                cpu[name].append(time.process_time() - c)
                wall[name].append(time.perf_counter() - w)
        print(f"load average after: {os.getloadavg()[0]:.1f}")

        check = np.concatenate([stage.keys(b).to_numpy() for b in arrow])
        print(f"documents kept at 0.5: {(check >= 0.5).mean():.3f}")

    print(f"{'path':<54} {'MB/CPU-s per run':>28} {'MB/s wall (best)':>17}")
    for name, _ in rows:
        per_cpu = " ".join(f"{mb / s:8.1f}" for s in cpu[name])
        print(f"{name:<54} {per_cpu:>28} {mb / min(wall[name]):17.1f}")
    ratios = " ".join(f"{p / o:.2f}x" for o, p in zip(cpu[rows[0][0]], cpu[rows[1][0]]))
    print(f"tokpipe / plain fasttext, per CPU second, run by run: {ratios}")


if __name__ == "__main__":
    main()
