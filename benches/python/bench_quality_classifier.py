"""Quality-classifier scoring: the ``quality_classifier`` stage's scoring (``keys`` on record
batches: Arrow text preparation plus one batch predict call) vs plain ``fasttext`` predicting
on the same documents, same model.

    PYTHONPATH=python:. python3 benches/python/bench_quality_classifier.py [/work/bench_corpus/docs.jsonl]
        [--mb 40] [--batch 1024]

The model is trained first, small and quick, on the tests' data (the prose of
../shared/corpora/text against degraded copies). The scored documents are the first --mb MB
of the bench corpus. Plain fastText is given each document with its newlines made spaces
(fastText's predict refuses a newline), as ``model.predict(list, k=1)`` per batch, the way
datatrove and the ``language`` stage call it. A third row is fastText alone on our prepared
lines (the model's own cost, without our preparation), and a fourth our scoring of whole
documents (the stage reads the first 10,000 characters of each by default). CPU seconds are ``time.process_time``
(all threads of this process), so the MB/s are per core.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from tests.quality_corpus import corpus
from tokpipe.pipeline.stages.quality_classifier import QualityClassifierFilter
from tokpipe.quality import load_quality_classifier, prepare, train_quality_classifier


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/work/bench_corpus/docs.jsonl")
    ap.add_argument("--mb", type=float, default=40.0)
    ap.add_argument("--batch", type=int, default=1024)
    args = ap.parse_args()

    good, bad = [], []
    for g, b in corpus(size=500, per_source=300).values():
        good += g
        bad += b
    started = time.process_time()
    trained = train_quality_classifier(positive_texts=good, negative_texts=bad, epochs=10, dim=16, bucket=100_000)
    print(f"training: {len(good) + len(bad)} documents, {time.process_time() - started:.1f} CPU s")

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
    print(f"scoring: {len(texts):,} documents, {mb:.1f} MB, batches of {args.batch}")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quality.bin"
        trained.save(path)
        stage = QualityClassifierFilter(model=str(path), threshold=0.5)
        model = load_quality_classifier(path).model

        t = time.process_time()
        ours = np.concatenate([stage.keys(b).to_numpy() for b in arrow])
        ours_s = time.process_time() - t

        t = time.process_time()
        plain = []
        for b in batches:
            labels, probs = model.predict([x.replace("\n", " ") for x in b], k=1)
            plain.append([p[0] for p in probs])
        plain_s = time.process_time() - t

        # The same without the 10,000-character cut (every character of every document).
        classifier = load_quality_classifier(path)
        classifier.max_chars = None
        t = time.process_time()
        for b in arrow:
            classifier.score(b.column("text"))
        whole_s = time.process_time() - t
        classifier.max_chars = trained.classifier.max_chars

        lines = [prepare(b) for b in batches]
        t = time.process_time()
        for b in lines:
            model.predict(b, k=1)
        model_s = time.process_time() - t

    rows = [("tokpipe quality_classifier (prepare + predict)", ours_s),
            ("tokpipe, whole documents (max_chars None)", whole_s),
            ("fasttext predict, raw text (newlines as spaces)", plain_s),
            ("fasttext predict, our prepared lines (model only)", model_s)]
    for name, seconds in rows:
        print(f"{name:<52} {seconds:7.2f} CPU s  {mb / seconds:7.2f} MB/s per core")
    print(f"ratio tokpipe / plain fasttext: {plain_s / ours_s:.2f}x the throughput")
    print(f"documents kept at 0.5: {(ours >= 0.5).mean():.3f}")


if __name__ == "__main__":
    main()
