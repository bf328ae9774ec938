#!/usr/bin/env python3
"""The ``pii`` stage against presidio-analyzer's pattern recognizers (no NLP engine, no spaCy
model: ``EmailRecognizer``, ``IpRecognizer``, ``PhoneRecognizer``, ``CreditCardRecognizer``,
``UsSsnRecognizer``, ``IbanRecognizer``, ``MacAddressRecognizer`` called directly with
``nlp_artifacts=None``), side by side:

1. **Quality** on a labelled set with exact spans (``tests/pipeline/stages/pii_labels.py``):
   the ``Name <address>`` maintainer lines of the kernel documentation in the benchmark corpus
   (labelled by their angle brackets), and real paragraphs of ``../shared/corpora`` (books and
   Common Crawl) with values of every type inserted at known offsets plus unlabelled hard
   negatives (versions, dates, ISBNs, DOIs, UUIDs, digests, tables, prompts, SSH remotes).
   Precision and recall per type on exact (type, start, end) matches; presidio has no
   recognizer for secrets, URL credentials or China IDs ("-").
2. **Speed** on the benchmark corpus ``docs.jsonl``: MB per CPU second (``time.process_time``,
   all threads: what a core does, whatever else runs on the machine). tokpipe runs the whole
   stage kernel (detect, resolve, tag, metadata) on the first ``--mb`` MB; presidio, which is
   pure Python, only detects, on the first ``--peer-mb`` MB.

    python3 benches/python/bench_pii.py                 # 50 MB for tokpipe, 5 MB for presidio
    python3 benches/python/bench_pii.py --mb 0          # the whole corpus for tokpipe
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "python"))
from _corpus import DEFAULT_CORPUS, check_corpus, print_machine_facts  # noqa: E402
from tests.conftest import load_documents  # noqa: E402
from tests.pipeline.stages import pii_labels as labels  # noqa: E402
from tokpipe import _core  # noqa: E402
from tokpipe.pipeline.kernels import arrow_strings  # noqa: E402
from tokpipe.pipeline.stages.pii import PII_TYPES, pii_spans  # noqa: E402

PEER_ENTITIES = {"email": "EMAIL_ADDRESS", "ip_address": "IP_ADDRESS", "phone": "PHONE_NUMBER",
                 "credit_card": "CREDIT_CARD", "us_ssn": "US_SSN", "iban": "IBAN_CODE", "mac_address": "MAC_ADDRESS"}


def presidio():
    """(entity name, recognizer) pairs, offline."""
    import tldextract
    import tldextract.tldextract

    # The e-mail recognizer checks the TLD with tldextract, which would fetch the public
    # suffix list; use the snapshot it ships instead.
    tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    from presidio_analyzer.predefined_recognizers import (CreditCardRecognizer, EmailRecognizer, IbanRecognizer,
                                                          IpRecognizer, MacAddressRecognizer, PhoneRecognizer,
                                                          UsSsnRecognizer)
    regions = PhoneRecognizer.DEFAULT_SUPPORTED_REGIONS + ("CN",)
    return [("EMAIL_ADDRESS", EmailRecognizer()), ("IP_ADDRESS", IpRecognizer()),
            ("PHONE_NUMBER", PhoneRecognizer(supported_regions=regions)), ("CREDIT_CARD", CreditCardRecognizer()),
            ("US_SSN", UsSsnRecognizer()), ("IBAN_CODE", IbanRecognizer()), ("MAC_ADDRESS", MacAddressRecognizer())]


def peer_spans(recognizers, text: str) -> list[labels.Label]:
    back = {v: k for k, v in PEER_ENTITIES.items()}
    out = []
    for entity, rec in recognizers:
        for r in rec.analyze(text, [entity], None):
            out.append((back[r.entity_type], r.start, r.end))
    return out


def read_corpus(corpus: Path, mb: float, sources=None) -> list[str]:
    texts, total = [], 0
    with open(corpus / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if sources and d["source"] not in sources:
                continue
            texts.append(d["text"])
            total += len(d["text"].encode())
            if mb > 0 and total >= mb * 1e6:
                break
    return texts


def quality(corpus: Path, n_docs: int, recognizers) -> None:
    kernel_docs = read_corpus(corpus, 0, sources={"linux-rst", "linux-txt"})
    maintainers = labels.maintainer_lines(kernel_docs)
    inserted = labels.build([t for _, t in load_documents()], n_docs=n_docs, seed=2026)
    for name, data in (("kernel maintainer lines", maintainers), ("insertions into real paragraphs", inserted)):
        truth = [lab for _, lab in data]
        ours = labels.score(truth, [pii_spans(t) for t, _ in data], PII_TYPES)
        peer = labels.score(truth, [peer_spans(recognizers, t) for t, _ in data], PII_TYPES)
        print(f"\n{name}: {len(data)} documents, {sum(map(len, truth))} labelled spans")
        print(f"  {'type':<16} {'n':>5}   {'tokpipe P':>9} {'R':>6}   {'presidio P':>10} {'R':>6}")
        for t in PII_TYPES:
            p, r, tp, fp, fn = ours[t]
            n = tp + fn
            if n == 0 and fp == 0:
                continue
            if t in PEER_ENTITIES:
                pp, pr, *_ = peer[t]
                peer_cols = f"{pp:>10.4f} {pr:>6.4f}"
            else:
                peer_cols = f"{'-':>10} {'-':>6}"
            print(f"  {t:<16} {n:>5}   {p:>9.4f} {r:>6.4f}   {peer_cols}   (fp {fp}, fn {fn})")


def speed(corpus: Path, mb: float, peer_mb: float, recognizers) -> None:
    texts = read_corpus(corpus, mb)
    nbytes = sum(len(t.encode()) for t in texts)
    column = pa.array(texts, type=pa.large_string())
    strings, _, _ = arrow_strings(column)
    types = list(PII_TYPES)
    cpu, wall = time.process_time(), time.perf_counter()
    out = _core.pii_scrub(strings, types, ["tag"] * len(types), False, "bench", 0.0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ours = nbytes / 1e6 / cpu
    spans = sum(memoryview(out[4]).cast("Q"))
    print(f"\nspeed: tokpipe on {nbytes / 1e6:.1f} MB ({len(texts)} documents): {ours:.1f} MB/s per core "
          f"(CPU {cpu:.2f} s; wall {wall:.2f} s, {nbytes / 1e6 / wall:.1f} MB/s on all cores), {spans} spans")
    peer_texts = read_corpus(corpus, peer_mb)
    peer_bytes = sum(len(t.encode()) for t in peer_texts)
    cpu = time.process_time()
    found = sum(len(peer_spans(recognizers, t)) for t in peer_texts)
    cpu = time.process_time() - cpu
    theirs = peer_bytes / 1e6 / cpu
    print(f"speed: presidio on {peer_bytes / 1e6:.1f} MB ({len(peer_texts)} documents): {theirs:.2f} MB/s per core "
          f"(CPU {cpu:.2f} s), {found} spans")
    # tokpipe on presidio's slice too (the kernel documentation: denser in PII than the rest).
    strings, _, _ = arrow_strings(pa.array(peer_texts, type=pa.large_string()))
    cpu = time.process_time()
    _core.pii_scrub(strings, types, ["tag"] * len(types), False, "bench", 0.0)
    same = peer_bytes / 1e6 / (time.process_time() - cpu)
    print(f"speed: tokpipe on presidio's {peer_bytes / 1e6:.1f} MB: {same:.1f} MB/s per core")
    print(f"speed ratio: tokpipe / presidio = {same / theirs:.0f}x per core on the same slice")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--mb", type=float, default=50.0, help="MB of the corpus for tokpipe (0: all)")
    parser.add_argument("--peer-mb", type=float, default=5.0, help="MB of the corpus for presidio")
    parser.add_argument("--docs", type=int, default=5000, help="documents with insertions")
    args = parser.parse_args()
    corpus = check_corpus(args.corpus)
    print_machine_facts(("presidio-analyzer", "phonenumbers"))
    recognizers = presidio()
    quality(corpus, args.docs, recognizers)
    speed(corpus, args.mb, args.peer_mb, recognizers)


if __name__ == "__main__":
    main()
