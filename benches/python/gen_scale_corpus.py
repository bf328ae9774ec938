#!/usr/bin/env python3
"""A synthetic web-like corpus of any size for the 10-million-document proof (issue 25, item 5),
with known planted near-duplicates.

    python3 benches/python/gen_scale_corpus.py /work/scale/corpus --docs 10000000
    python3 benches/python/gen_scale_corpus.py /tmp/c100k --docs 100000 --shard-docs 50000

Documents are cut from a pool of paragraphs, each made one line as on a web page (wrapped lines
joined; tables, code and directives left out): the benchmark corpus's kernel .rst and Python
documentation and GCIDE dictionary entries (markup stripped), *Botchan* re-cut into paragraphs
of four sentences, the shared Common Crawl samples' lines (``corpora/web/*.jsonl.gz``). Only
prose paragraphs feed those sources (80% of the tokens with a letter, terminal punctuation: as
Gopher and C4 like them; about 13 MB); the rest feeds a ``raw`` source (10% of the documents)
and the Chinese poems another (3%), pages the filters should drop (``SOURCE_WEIGHTS``). A
document is a run of paragraphs from a random place, now and then jumping elsewhere in its
source, of a log-normal length (median ``--median-bytes``, at least ``--min-bytes``), then
mutated (adjacent words swapped, words deleted or replaced by other words of the pool, casing,
numbers, whitespace), 6 to 15% of its words, so that two documents cut from the same place are
far from near-duplicates (word 5-gram Jaccard about 0.2 to 0.4) although each paragraph is
reused hundreds of times in a 10M corpus. The web filters keep about two thirds of the
documents; shorter documents fail C4's five-sentence rule more often (a trade-off against the
corpus's size: about 850 bytes a JSON line, 8.5 GB for 10M).

Planted near-duplicates: about ``--dup-rate`` of the documents (from document 20,000 on) are a
copy of an earlier, non-copy document, drawn uniformly from all documents at least 20,000
places before, with a small edit: one to three spans of one to four words replaced, deleted or
inserted (up to about 5% of the words), retried with fewer edits until the word 5-gram Jaccard
(``minhash_dedup``'s shingles: lowercased, whitespace runs as one space) is at least 0.82, plus
casing and whitespace noise that the shingles ignore. A tenth of the plants are controls edited
much more (Jaccard 0.3 to 0.7): not duplicates at ``threshold: 0.8``. ``planted.tsv`` lists
every pair: ``copy_id  original_id  jaccard  kind`` (``near`` or ``control``).

Output, in OUT: ``docs/shard-NNNNN.jsonl.zst`` (or ``.jsonl.gz``), ``--shard-docs`` documents each,
one JSON object a line with ``id`` (``d`` and the 9-digit document number), ``text``, ``url``
and ``source``; ``planted.tsv``; ``MANIFEST.json`` (parameters, documents and bytes, written
last). Document ``i`` depends on ``--seed`` and ``i`` alone, so a corpus is the prefix of any
larger one with the same seed and shard size (the first 2 shards of 500k documents of the 10M
corpus are the 1M corpus), and the bytes are the same for any ``--workers``. Shards are written
in parallel (one process a shard) and streamed: only the paragraph pool (about 60 MB) is held.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing as mp
import os
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import DEFAULT_CORPUS, SHARED_CORPORA, check_corpus, log  # noqa: E402

# Share of documents cut from each source. The web samples are small (20 documents), so they
# are only a seasoning: each of their places is reused thousands of times in a 10M corpus.
SOURCE_WEIGHTS = {"linux-rst": 0.45, "gcide": 0.22, "python-txt": 0.10, "books": 0.05, "web": 0.05,
                  "raw": 0.10, "fortunes-zh": 0.03}
MIN_GAP = 20_000  # a planted copy sits at least this many documents after its original
NEAR_MIN_JACCARD = 0.82
CONTROL_SHARE = 0.1
MASK64 = (1 << 64) - 1
ENCODE_STRING = json.encoder.encode_basestring  # the C escaper json.dumps uses with ensure_ascii=False


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of an integer."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


# --- the pool -------------------------------------------------------------------------------

BORDER = re.compile(r"^\s*([=\-~^*#`+|_]{3,}|\+[-=+]+\+?)\s*$")  # rst underlines, table borders
BULLET = re.compile(r"^\s*([-*+]|#\.|\d+[.)])\s")
GCIDE_MARKUP = re.compile(r"\\[^\\\n]*\\|\[[^\]]*\]|\([^()]*[\"`][^()]*\)|[{}]")  # pronunciations, etymologies, braces


def _web_paragraph(p: str) -> str | None:
    """One paragraph as a web page's line (wrapped lines joined, list items a line each), or
    None for what a text extractor would not give: directives, tables, code, mostly symbols."""
    lines = [line for line in p.split("\n") if line.strip() and not BORDER.match(line)]
    if not lines or lines[0].lstrip().startswith(".."):
        return None
    if all(line[:1] in (" ", "\t") for line in lines) and not BULLET.match(lines[0]):
        return None  # an indented block: code or a literal
    out = []
    for line in lines:
        if out and not BULLET.match(line):
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    text = "\n".join(out)
    words = text.split()
    if len(words) < 3 or sum(any(c.isalpha() for c in w) for w in words) < 0.8 * len(words):
        return None
    return text


TOKEN = re.compile(r"\w+|[^\w\s]")


def _is_prose(p: str) -> bool:
    """Sentences as the Gopher and C4 rules like them: at least 80% of the tokens (words and
    punctuation marks, as their word splitter counts them) with a letter, and terminal
    punctuation at the end."""
    tokens = TOKEN.findall(p)
    return (len(tokens) >= 6 and p.endswith((".", "!", "?", '"', "'", ")", ":"))
            and sum(any(c.isalpha() for c in t) for t in tokens) >= 0.8 * len(tokens))


def load_pool(corpus: Path, shared: Path) -> dict:
    """Paragraphs per source, as a web page's lines, and the word list substitutions draw from.

    Deterministic: corpus order, sorted files. The documentation's wrapped lines are joined
    (a web page's paragraph is one line, and C4's rules judge lines); tables, code and
    directives are left out, and GCIDE entries lose their pronunciation and etymology markup:
    what is left is about 40 MB of English that the web filters mostly keep."""
    corpus = check_corpus(corpus)
    wanted = ("linux-rst", "python-txt", "gcide", "fortunes-zh")
    paragraphs: dict[str, list[str]] = {s: [] for s in SOURCE_WEIGHTS}
    blank = re.compile(r"\n[ \t]*\n+")
    with open(corpus / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            if not any(f'"source": "{s}"' in line for s in wanted):  # skip the HTML cheaply
                continue
            d = json.loads(line)
            source = d["source"]
            if source not in paragraphs:
                continue
            for p in blank.split(d["text"]):
                if source == "fortunes-zh":
                    p = p.strip()
                elif source == "gcide":
                    p = " ".join(GCIDE_MARKUP.sub("", p).split())
                    p = p if len(p.split()) >= 4 else ""
                else:
                    p = _web_paragraph(p) or ""
                if p:
                    paragraphs[source].append(p)
    for path in sorted((shared / "web").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                paragraphs["web"].extend(p for p in json.loads(line)["text"].split("\n") if p.strip())
    books = shared / "text" / "botchan.txt"
    if books.exists():
        # Wrapped at 70 columns with no blank lines: re-cut into paragraphs of 4 sentences.
        sentences = re.split(r"(?<=[.!?])\s+", " ".join(books.read_text("utf-8").split()))
        paragraphs["books"] = [" ".join(sentences[k:k + 4]) for k in range(0, len(sentences), 4)]
    # Prose for the English sources; the rest (short dictionary entries, headings, symbol-heavy
    # lines) becomes the `raw` source, pages the filters are expected to drop.
    for source in ("linux-rst", "python-txt", "gcide"):
        prose = []
        for p in paragraphs[source]:
            (prose if _is_prose(p) else paragraphs["raw"]).append(p)
        paragraphs[source] = prose
    empty = [s for s, ps in paragraphs.items() if not ps]
    if empty:
        sys.exit(f"no paragraphs for source(s) {empty} (corpus {corpus}, shared corpora {shared})")
    words = set()
    for s in ("gcide", "linux-rst", "python-txt", "web"):
        for p in paragraphs[s][:20000]:
            words.update(w for w in p.split() if w.isalpha() and w.islower() and 2 <= len(w) <= 10)
    return {"paragraphs": paragraphs, "words": sorted(words)}


POOL: dict = {}  # set in the parent before the workers fork, so they share it


# --- one document ---------------------------------------------------------------------------

def _base_document(seed: int, i: int) -> tuple[str, str, str]:
    """(text, source, url) of document ``i``: a mutated piece of the pool."""
    rng = random.Random(_mix(seed * 0x100000001B3 ^ i))
    r = rng.random()
    acc = 0.0
    for source, weight in SOURCE_WEIGHTS.items():
        acc += weight
        if r < acc:
            break
    paragraphs = POOL["paragraphs"][source]
    target = min(POOL["max_bytes"], max(POOL["min_bytes"], int(rng.lognormvariate(math.log(POOL["median_bytes"]), 0.5))))
    # Consecutive paragraphs, with a jump to a random one now and then: a page of one topic
    # whose paragraph sets rarely repeat, though each paragraph is reused across the corpus.
    rnd = rng.random
    count = len(paragraphs)
    start = k = int(rnd() * count)
    parts, size = [], 0
    while size < target:
        parts.append(paragraphs[k])
        size += len(paragraphs[k]) + 1
        k = k + 1 if k + 1 < count and rnd() < 0.7 else int(rnd() * count)
    sep = "\n\n" if source == "fortunes-zh" else "\n"
    text = _mutate(sep.join(parts), rng, 0.06 + 0.09 * rnd())
    url = f"https://{source}.example.org/{rng.getrandbits(40):010x}/{start}"
    return text, source, url


def _mutate(text: str, rng: random.Random, rate: float) -> str:
    """Edits about ``rate`` of the space-separated tokens; newlines stay where they are.

    Written for speed (10M documents must take minutes): ``random()`` draws only, and a deleted
    word leaves its two spaces (whitespace noise the filters and the shingles ignore)."""
    tokens = text.split(" ")
    n = len(tokens)
    if n < 2:
        return text
    words = POOL["words"]
    nwords = len(words)
    rnd = rng.random
    for _ in range(max(1, int(n * rate))):
        p = int(rnd() * n)
        tok = tokens[p]
        if "\n" in tok or not tok:
            continue
        op = rnd()
        if op < 0.35:  # swap with the next word
            q = p + 1 if p + 1 < n else p - 1
            if "\n" not in tokens[q]:
                tokens[p], tokens[q] = tokens[q], tok
        elif op < 0.55:
            tokens[p] = ""
        elif op < 0.80:
            tokens[p] = words[int(rnd() * nwords)]
        elif op < 0.90:
            tokens[p] = tok.upper() if op < 0.83 else tok.capitalize() if tok.islower() else tok.lower()
        else:
            tokens[p] = str(int(rnd() * 10 ** (1 + int(op * 50) % 5)))
    out = " ".join(tokens)
    if rnd() < 0.2:  # a trailing space
        out += " "
    return out


def _is_copy(seed: int, i: int, dup_rate: float) -> bool:
    return i >= MIN_GAP and _mix(_mix(seed ^ 0xD1B54A32D192ED03) ^ i) < dup_rate * 2.0**64


def _shingles(text: str) -> set:
    """minhash_dedup's word 5-grams: lowercased, split on whitespace."""
    w = text.lower().split()
    if len(w) <= 5:
        return {tuple(w)}
    return {tuple(w[k:k + 5]) for k in range(len(w) - 4)}


def jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / max(1, len(sa | sb))


def _edit_copy(text: str, rng: random.Random, spans: int, control: bool) -> str:
    tokens = text.split(" ")
    words = POOL["words"]
    n = len(tokens)
    if control:  # many scattered edits: a document that merely looks alike
        for p in rng.sample(range(n), max(1, int(n * rng.uniform(0.08, 0.2)))):
            tokens[p] = words[rng.randrange(len(words))]
    else:
        done = tries = 0
        while done < spans and tries < 50:
            tries += 1
            length = rng.randint(1, min(4, max(1, n // 25)))
            p = rng.randrange(max(1, n - length))
            # Within a line, sparing its last word: C4's rules (before minhash_dedup) judge and
            # drop whole lines, and a changed line end would change which lines are left.
            if any("\n" in t for t in tokens[p:p + length + 1]) or p + length >= len(tokens):
                continue
            done += 1
            op = rng.random()
            if op < 0.5:
                tokens[p:p + length] = [words[rng.randrange(len(words))] for _ in range(length)]
            elif op < 0.75:
                del tokens[p:p + length]
            else:
                tokens[p:p] = [words[rng.randrange(len(words))] for _ in range(length)]
    out = " ".join(tokens)
    if rng.random() < 0.5:  # noise the shingles ignore: casing and whitespace
        out = out.replace(". ", ".  ", 3) if rng.random() < 0.5 else out[:1].lower() + out[1:]
    return out


def document(seed: int, i: int, dup_rate: float) -> tuple[dict, tuple | None]:
    """Document ``i`` as a JSON-ready dict, and its planted pair (copy, original, jaccard, kind)
    when it is a copy."""
    if not _is_copy(seed, i, dup_rate):
        text, source, url = _base_document(seed, i)
        return {"id": f"d{i:09d}", "text": text, "url": url, "source": source}, None
    rng = random.Random(_mix(seed * 31 + 7) ^ _mix(i))
    # An original of at least 60 words (as a web pipeline keeps: Gopher wants 50), so that
    # a one-word edit still leaves a near-duplicate (Jaccard of 5-grams >= 0.84).
    for _ in range(20):
        original = rng.randrange(i - MIN_GAP + 1)
        if _is_copy(seed, original, dup_rate):
            continue
        text, source, url = _base_document(seed, original)
        if len(text.split()) >= 60:
            break
    control = rng.random() < CONTROL_SHARE
    if control:
        copy = _edit_copy(text, rng, 0, True)
        j = jaccard(text, copy)
    else:
        for spans in (3, 2, 1, 1, 1):
            copy = _edit_copy(text, rng, rng.randint(1, spans), False)
            j = jaccard(text, copy)
            if j >= NEAR_MIN_JACCARD:
                break
    doc = {"id": f"d{i:09d}", "text": copy, "url": url + "?copy", "source": source}
    return doc, (doc["id"], f"d{original:09d}", round(j, 4), "control" if control else "near")


# --- shards ---------------------------------------------------------------------------------

def _json_line(doc: dict) -> str:
    """``json.dumps(doc, ensure_ascii=False)`` for a dict of strings, without its per-call setup."""
    return "{" + ", ".join(f"{ENCODE_STRING(k)}: {ENCODE_STRING(v)}" for k, v in doc.items()) + "}"


def _write_shard(job: tuple) -> dict:
    seed, shard, lo, hi, dup_rate, out, ext = job
    final = Path(out) / "docs" / f"shard-{shard:05d}.jsonl.{ext}"
    tmp = final.with_name(f".{final.name}.tmp")
    planted, nbytes = [], 0
    if ext == "zst":
        import zstandard

        raw = open(tmp, "wb")
        f = zstandard.ZstdCompressor(level=3).stream_writer(raw)
    else:
        raw = open(tmp, "wb")
        f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0, filename="")
    buf = []
    for i in range(lo, hi):
        doc, pair = document(seed, i, dup_rate)
        if pair:
            planted.append(pair)
        buf.append(_json_line(doc))
        if len(buf) == 2000:
            data = ("\n".join(buf) + "\n").encode("utf-8")
            nbytes += len(data)
            f.write(data)
            buf = []
    if buf:
        data = ("\n".join(buf) + "\n").encode("utf-8")
        nbytes += len(data)
        f.write(data)
    f.close()
    raw.close()
    os.replace(tmp, final)
    return {"shard": final.name, "docs": hi - lo, "bytes": nbytes, "compressed_bytes": final.stat().st_size,
            "planted": planted}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="output folder (created; keep it outside the repository)")
    ap.add_argument("--docs", type=int, required=True, help="number of documents")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard-docs", type=int, default=500_000, help="documents per shard (default 500000)")
    ap.add_argument("--dup-rate", type=float, default=0.01, help="share of documents that are planted copies (0.01)")
    ap.add_argument("--median-bytes", type=int, default=600, help="median document length before mutation (600)")
    ap.add_argument("--min-bytes", type=int, default=350, help="shortest document before mutation (350: ~55 words)")
    ap.add_argument("--max-bytes", type=int, default=20_000)
    ap.add_argument("--compression", choices=("zst", "gz"), default="zst")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the benchmark corpus (default %(default)s)")
    ap.add_argument("--shared", type=Path, default=SHARED_CORPORA,
                    help="the shared corpora: web/*.jsonl.gz and text/botchan.txt (default %(default)s)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    POOL.update(load_pool(args.corpus, args.shared))
    POOL.update(median_bytes=args.median_bytes, min_bytes=args.min_bytes, max_bytes=args.max_bytes)
    log(f"pool: {sum(len(p) for p in POOL['paragraphs'].values())} paragraphs, {len(POOL['words'])} words "
        f"({time.perf_counter() - t0:.1f} s)")
    (args.out / "docs").mkdir(parents=True, exist_ok=True)
    for stale in ("MANIFEST.json", "planted.tsv"):
        (args.out / stale).unlink(missing_ok=True)
    jobs = [(args.seed, s, lo, min(args.docs, lo + args.shard_docs), args.dup_rate, str(args.out), args.compression)
            for s, lo in enumerate(range(0, args.docs, args.shard_docs))]
    shards = []
    ctx = mp.get_context("fork")  # the workers share the pool the parent loaded
    with ctx.Pool(max(1, min(args.workers, len(jobs)))) as pool:
        for done in pool.imap(_write_shard, jobs):
            shards.append(done)
            log(f"{done['shard']}: {done['docs']} docs, {done['bytes'] / 1e6:.0f} MB "
                f"({time.perf_counter() - t0:.0f} s)")
    with open(args.out / "planted.tsv", "w", encoding="utf-8") as f:
        f.write("copy_id\toriginal_id\tjaccard\tkind\n")
        for s in shards:
            f.writelines("\t".join(map(str, p)) + "\n" for p in s.pop("planted"))
    seconds = time.perf_counter() - t0
    manifest = {
        "docs": args.docs, "seed": args.seed, "shard_docs": args.shard_docs, "dup_rate": args.dup_rate,
        "median_bytes": args.median_bytes, "min_bytes": args.min_bytes, "max_bytes": args.max_bytes,
        "compression": args.compression, "source_weights": SOURCE_WEIGHTS, "min_gap": MIN_GAP,
        "bytes": sum(s["bytes"] for s in shards), "compressed_bytes": sum(s["compressed_bytes"] for s in shards),
        "seconds": round(seconds, 1), "workers": args.workers, "shards": shards,
    }
    (args.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    log(f"{args.docs} docs, {manifest['bytes'] / 1e9:.2f} GB of JSON Lines "
        f"({manifest['compressed_bytes'] / 1e9:.2f} GB compressed) in {seconds:.0f} s")


if __name__ == "__main__":
    main()
