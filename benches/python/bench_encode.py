#!/usr/bin/env python3
"""Encode throughput of tokpipe and its peers, side by side, on the same input.

What is measured
----------------
One process loads the benchmark corpus (by default the sources linux-rst,
python-txt, gcide and fortunes-zh: about 77 MB in 137k documents, from
very short dictionary entries to 290 kB kernel documents) and, for every
vocabulary (cl100k, o200k, gpt2) and every encoder that supports it, times:

  doc    a Python loop over the documents calling the encoder's
         one-document encode (the same loop for every encoder),
         process pinned to 1 CPU.
  batch  one call of the encoder's own batch API over all documents,
         with 1 and with 2 threads (--threads): the library's thread
         knob is set where it has one, and the whole process is pinned
         to that many CPUs, so a library without a knob cannot use more.
         `tokpipe-arrow` is tokpipe's Arrow path (`encode_arrow`, what
         `tokpipe tokenize` calls), batch mode only; its string column is
         built from the list before the timing.

Each timed run gets a freshly built encoder (construction is not timed,
one tiny warm-up encode is not timed either), so encoders that cache
pre-token results in the encoder object start every run with a cold
cache (state a library keeps per process, like thread pools or lazily
built tables, survives); the figure reported is the best of --runs runs.
Thread pools are started once per vocabulary with the process allowed
the largest thread count, since some libraries size them at first use. MB/s counts UTF-8 input bytes. The timed call
returns each library's native id container (see "Calls measured"); the
conversion needed to compare ids happens outside the timing. gigatoken's
native container is a numpy array (a flat buffer: no Python object per id),
the others' a list of ints. Two rows compare like with like: `gigatoken-list`
is gigatoken returning lists (the container of tokpipe and tiktoken), and
`tokpipe-numpy` (doc mode only) is tokpipe returning a numpy array
(`encode_to_numpy`), the container of the `gigatoken` row.

Correctness: before the doc runs, one untimed pass compares every
encoder's ids with tiktoken's, document by document (tiktoken is the
reference: encode_ordinary, no special tokens); the first batch run of
each thread count is checked the same way. Mismatches are counted, never
fatal, and the first differing document is shown.

Vocabularies are loaded offline from ../shared/corpora/vocab
($TOKPIPE_SHARED/corpora/vocab; --vocab-dir): *.tiktoken.gz for
cl100k/o200k, encoder.json + vocab.bpe for gpt2. Files that some peers
need in another form (an uncompressed .tiktoken, a HuggingFace
tokenizer.json converted from the ranks) are derived once into
--cache-dir.

Reading the output
------------------
A markdown table, one row per (vocab, mode, threads, encoder):
"x tiktoken" is the encoder's MB/s divided by tiktoken's in the same
vocab, mode and thread count (>1 means faster than tiktoken);
"MB/CPU-s" divides by the CPU time (all threads) of the best run instead
of wall time: in doc mode it is the speed undisturbed by other processes
on a busy machine; in batch mode, MB/s over MB/CPU-s is the number of
cores kept busy. "ids = tiktoken" is "yes" when every document's ids
equal tiktoken's, else the number of differing documents. Machine facts and package
versions are printed first; --json writes the raw numbers too.

If `import tokpipe` fails the script says so and runs the peers anyway.
"""
from __future__ import annotations

import argparse
import base64
import gc
import gzip
import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

VOCAB_DIR = _corpus.VOCAB_DIR
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokpipe-bench"
PACKAGES = ("tokpipe", "tiktoken", "tokenizers", "gigatoken", "tokie", "bpe-openai", "numpy", "awkward")
ENCODER_NAMES = ("tiktoken", "tokpipe", "tokpipe-numpy", "tokpipe-arrow", "hf-tokenizers", "gigatoken", "gigatoken-list", "tokie",
                 "bpe-openai")
VOCAB_NAMES = ("cl100k", "o200k", "gpt2")
WARMUP = "Warm-up: hello world, 12345 tokens; 中文 ok.\n"

# sha256 of the files tiktoken_ext.openai_public downloads; checked against ours
EXPECTED_SHA256 = {
    "cl100k_base.tiktoken": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base.tiktoken": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
}


log = _corpus.log


# --------------------------------------------------------------------------
# vocabularies
# --------------------------------------------------------------------------



def _split_in_two(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """Run BPE on `token` using only merges ranked below `max_rank`; for a
    tiktoken vocab this leaves exactly the two parts the token was merged from."""
    parts = [bytes([b]) for b in token]
    while True:
        best = best_rank = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best_rank is None or best_rank >= max_rank:
            return parts
        parts[best : best + 2] = [parts[best] + parts[best + 1]]


class Vocab:
    """One vocabulary: ranks, split pattern and the files each encoder loads."""

    def __init__(self, name: str, vocab_dir: Path, cache_dir: Path):
        self.name = name
        self.cache_dir = cache_dir
        self.notes: list[str] = []
        cache_dir.mkdir(parents=True, exist_ok=True)
        if name == "gpt2":
            self.encoder_json = vocab_dir / "gpt2_encoder.json"
            self.vocab_bpe = vocab_dir / "gpt2_vocab.bpe"
            self._check_hash(self.encoder_json.read_bytes(), "encoder.json", self.encoder_json)
            self._check_hash(self.vocab_bpe.read_bytes(), "vocab.bpe", self.vocab_bpe)
            import tiktoken.load

            # tiktoken's own GPT-2 conversion, fed local files (its cache is bypassed)
            with mock.patch.object(tiktoken.load, "read_file_cached", lambda p, h=None: Path(p).read_bytes()):
                self.ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(self.vocab_bpe), str(self.encoder_json))
            self.tiktoken_name = "gpt2"
            self.gz_path = None
            self.key = hashlib.sha256(self.encoder_json.read_bytes() + self.vocab_bpe.read_bytes()).hexdigest()[:12]
        else:
            self.tiktoken_name = f"{name}_base"
            self.gz_path = vocab_dir / f"{self.tiktoken_name}.tiktoken.gz"
            raw = gzip.decompress(self.gz_path.read_bytes())
            self._check_hash(raw, f"{self.tiktoken_name}.tiktoken", self.gz_path)
            self.key = hashlib.sha256(raw).hexdigest()[:12]
            self.ranks = {}
            for line in raw.splitlines():
                if line:
                    tok, rank = line.split()
                    self.ranks[base64.b64decode(tok)] = int(rank)
            self._plain = raw
        spec = self._tiktoken_spec()
        self.pat_str = spec["pat_str"]
        self.special_tokens = spec["special_tokens"]

    def _check_hash(self, data: bytes, key: str, path: Path):
        ok = hashlib.sha256(data).hexdigest() == EXPECTED_SHA256[key]
        msg = f"{path.name}: sha256 {'matches' if ok else 'differs from'} the published {key}"
        if not ok and key == "encoder.json":
            msg += " (a different JSON serialization; its ids passed tiktoken's check against vocab.bpe)"
        self.notes.append(msg)

    def _tiktoken_spec(self) -> dict:
        """The encoding's definition (pattern, special tokens) from
        tiktoken_ext.openai_public, with its downloads replaced by our ranks."""
        from tiktoken_ext import openai_public as op

        fake = lambda *a, **k: self.ranks  # noqa: E731
        with mock.patch.object(op, "load_tiktoken_bpe", fake), mock.patch.object(op, "data_gym_to_mergeable_bpe_ranks", fake):
            return getattr(op, self.tiktoken_name)()

    # derived files --------------------------------------------------------
    def _cached(self, filename: str, build) -> Path:
        path = self.cache_dir / f"{self.key}-{filename}"
        if not path.exists():
            log(f"  deriving {path}")
            tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
            build(tmp)
            tmp.replace(path)
        return path

    def plain_tiktoken(self) -> Path:
        """An uncompressed .tiktoken file (gigatoken reads no .gz)."""

        def build(p: Path):
            if self.gz_path is not None:
                p.write_bytes(self._plain)
            else:
                with open(p, "wb") as f:
                    for tok, rank in sorted(self.ranks.items(), key=lambda x: x[1]):
                        f.write(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n")

        return self._cached(f"{self.tiktoken_name}.tiktoken", build)

    def hf_json(self) -> Path:
        """A HuggingFace tokenizer.json for this vocab, no special tokens.

        gpt2: the usual GPT-2 tokenizer (BPE from encoder.json + vocab.bpe,
        ByteLevel pre-tokenizer with its built-in GPT-2 regex).
        cl100k/o200k: the tiktoken ranks converted the way transformers does
        (vocab = ranks, merges recovered by splitting each token in two),
        tiktoken's split regex as a Split pre-tokenizer, then ByteLevel
        without regex, ignore_merges=True (tiktoken also looks a whole
        pre-token up in the vocab first)."""

        def build(p: Path):
            from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

            if self.name == "gpt2":
                tk = Tokenizer(models.BPE.from_file(str(self.encoder_json), str(self.vocab_bpe)))
                tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            else:
                b2u = _corpus.bytes_to_unicode()
                u = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
                merges = []
                for tok, rank in sorted(self.ranks.items(), key=lambda x: x[1]):
                    if len(tok) > 1:
                        parts = _split_in_two(self.ranks, tok, rank)
                        assert len(parts) == 2, (tok, parts)
                        merges.append((u(parts[0]), u(parts[1])))
                vocab = {u(tok): rank for tok, rank in self.ranks.items()}
                tk = Tokenizer(models.BPE(vocab, merges, ignore_merges=True))
                # Oniguruma reads `{1,3}+` as "one or more runs of 1-3 digits",
                # not as possessive; transformers' converters drop the `+` too.
                pattern = self.pat_str.replace("{1,3}+", "{1,3}")
                tk.pre_tokenizer = pre_tokenizers.Sequence([
                    pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ])
            tk.decoder = decoders.ByteLevel()
            tk.save(str(p))

        return self._cached(f"{self.name}-tokenizer.json", build)


# --------------------------------------------------------------------------
# encoders: make(vocab) -> instance; doc(inst) -> f(text); batch(inst, T) -> f(texts)
# --------------------------------------------------------------------------

def _ak_rows(a):
    import awkward as ak
    import numpy as np

    flat = ak.to_numpy(ak.flatten(a))
    ends = np.cumsum(ak.to_numpy(ak.num(a)))
    return np.split(flat, ends[:-1]) if len(ends) else []


def _flat_rows(out):
    import numpy as np

    ids, lengths = out
    ends = np.cumsum(lengths)
    return np.split(np.asarray(ids), ends[:-1]) if len(ends) else []


class Encoder:
    name = ""
    doc_api = ""
    batch_api = ""
    has_doc = True  # False: a batch-only entry, left out of doc mode
    has_batch = True  # False: a doc-only entry, left out of batch mode

    def prepare(self, texts):
        """The batch call's input, built from the list of texts outside the timing."""
        return texts

    def available(self) -> str | None:
        """None if usable, else why not."""
        return None

    def supports(self, vocab: Vocab) -> str | None:
        return None

    def make(self, vocab: Vocab):
        raise NotImplementedError

    def doc(self, inst):
        raise NotImplementedError

    def batch(self, inst, threads: int):
        raise NotImplementedError

    def batch_rows(self, out):
        """Batch output -> iterable of per-document id sequences."""
        return out


class Tiktoken(Encoder):
    name = "tiktoken"
    doc_api = "Encoding.encode_ordinary(text) -> list"
    batch_api = "Encoding.encode_ordinary_batch(texts, num_threads=T) -> list[list]"

    def make(self, v):
        import tiktoken

        return tiktoken.Encoding(v.tiktoken_name, pat_str=v.pat_str, mergeable_ranks=v.ranks,
                                 special_tokens=v.special_tokens)

    def doc(self, inst):
        return inst.encode_ordinary

    def batch(self, inst, threads):
        return lambda texts: inst.encode_ordinary_batch(texts, num_threads=threads)


class Tokpipe(Encoder):
    name = "tokpipe"
    doc_api = "Tokenizer.encode(text) -> list"
    batch_api = "Tokenizer.encode_batch(texts, num_threads=T) -> list[list]"

    def available(self):
        try:
            import tokpipe  # noqa: F401
        except Exception as e:  # ImportError, or a broken build
            return f"import tokpipe failed ({type(e).__name__}: {e})"
        return None

    def make(self, v):
        import tokpipe

        if v.name == "gpt2":
            return tokpipe.Tokenizer.from_gpt2(str(v.encoder_json), str(v.vocab_bpe))
        return tokpipe.Tokenizer.from_tiktoken(str(v.gz_path), pattern=v.name, special_tokens=None)

    def doc(self, inst):
        return inst.encode

    def batch(self, inst, threads):
        return lambda texts: inst.encode_batch(texts, num_threads=threads)


class TokpipeNumpy(Tokpipe):
    """tokpipe returning a numpy ``uint32`` array, the container gigatoken's `encode` returns,
    so that the one-document loop compares the same work with the `gigatoken` row."""

    name = "tokpipe-numpy"
    doc_api = "Tokenizer.encode_to_numpy(text) -> numpy uint32"
    batch_api = "(doc only)"
    has_batch = False

    def doc(self, inst):
        return inst.encode_to_numpy


class TokpipeArrow(Tokpipe):
    """tokpipe's Arrow path (what `tokpipe tokenize` calls): a string column in, one
    ``large_list<uint32>`` out, no Python object per document."""

    name = "tokpipe-arrow"
    doc_api = "(batch only)"
    batch_api = "Tokenizer.encode_arrow(pa.large_string column, num_threads=T) -> pa.LargeListArray"
    has_doc = False

    def prepare(self, texts):
        import pyarrow as pa

        return pa.array(texts, pa.large_string())

    def batch(self, inst, threads):
        return lambda column: inst.encode_arrow(column, num_threads=threads)

    def batch_rows(self, out):
        import numpy as np

        ids = out.values.to_numpy(zero_copy_only=False)
        offsets = np.frombuffer(out.buffers()[1], dtype=np.int64)[out.offset:out.offset + len(out) + 1]
        return (ids[offsets[i] - offsets[0]:offsets[i + 1] - offsets[0]] for i in range(len(out)))


class HFTokenizers(Encoder):
    name = "hf-tokenizers"
    doc_api = "Tokenizer.encode(text, add_special_tokens=False).ids -> list"
    batch_api = "Tokenizer.encode_batch_fast(texts, add_special_tokens=False), .ids of each -> list[list]"

    def make(self, v):
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(v.hf_json()))

    def doc(self, inst):
        return lambda t: inst.encode(t, add_special_tokens=False).ids

    def batch(self, inst, threads):
        fn = getattr(inst, "encode_batch_fast", inst.encode_batch)

        def run(texts):
            # read by the library at every call; false = sequential, no pool
            os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
            return [e.ids for e in fn(texts, add_special_tokens=False)]

        return run


class Gigatoken(Encoder):
    name = "gigatoken"
    doc_api = "Tokenizer.encode(text) -> numpy uint32"
    batch_api = "Tokenizer.encode_batch(texts, parallel=T>1) -> awkward Array"
    PRETOKENIZER = {"cl100k": "cl100k", "o200k": "o200k", "gpt2": "gpt2"}

    def make(self, v):
        import gigatoken

        return gigatoken.Tokenizer.from_tiktoken(str(v.plain_tiktoken()), pretokenizer=self.PRETOKENIZER[v.name],
                                                 special_tokens={})

    def doc(self, inst):
        return inst.encode

    def batch(self, inst, threads):
        return lambda texts: inst.encode_batch(texts, parallel=threads > 1)

    def batch_rows(self, out):
        return _ak_rows(out)


class GigatokenList(Gigatoken):
    """gigatoken returning ``list[int]``, the container tokpipe and tiktoken return, so that
    the one-document loop compares the same work (its `encode` returns a numpy array, cheaper
    to build than a list). `encode_batch_list` of one document on the calling thread is the
    fastest of its list-returning calls (faster than `encode(text).tolist()` and than
    `as_tiktoken().encode_ordinary`, which adds a special-token check)."""

    name = "gigatoken-list"
    doc_api = "Tokenizer.backend.encode_batch_list([text], parallel=False)[0] -> list"
    batch_api = "Tokenizer.backend.encode_batch_list(texts, parallel=T>1) -> list[list]"

    def doc(self, inst):
        f = inst.backend.encode_batch_list
        return lambda t: f([t], parallel=False)[0]

    def batch(self, inst, threads):
        f = inst.backend.encode_batch_list
        return lambda texts: f(texts, parallel=threads > 1)

    def batch_rows(self, out):
        return out


class Tokie(Encoder):
    name = "tokie"
    doc_api = "Tokenizer.encode(text, add_special_tokens=False).ids -> list"
    batch_api = "Tokenizer.encode_batch_flat(texts, add_special_tokens=False) -> numpy (ids, lengths)"

    def make(self, v):
        import tokie

        return tokie.Tokenizer.from_json(str(v.hf_json()))

    def doc(self, inst):
        return lambda t: inst.encode(t, add_special_tokens=False).ids

    def batch(self, inst, threads):
        # no thread knob: it sizes its pool from the CPUs it may run on (pinned)
        return lambda texts: inst.encode_batch_flat(texts, add_special_tokens=False)

    def batch_rows(self, out):
        return _flat_rows(out)


class BpeOpenai(Encoder):
    name = "bpe-openai"
    doc_api = "get_encoding(name).encode_ordinary(text) -> list"
    batch_api = "Encoding.encode_ordinary_batch(texts, num_threads=T) -> list[list]"
    SUPPORTED = {"cl100k": "cl100k_base", "o200k": "o200k_base"}

    def supports(self, v):
        if v.name not in self.SUPPORTED:
            return "its Rust backend bundles only cl100k_base, o200k_base and voyage3_base"
        return None

    def make(self, v):
        import bpe_openai

        enc = bpe_openai.get_encoding(self.SUPPORTED[v.name])  # vocab bundled in the wheel
        return enc

    def doc(self, inst):
        return inst.encode_ordinary

    def batch(self, inst, threads):
        return lambda texts: inst.encode_ordinary_batch(texts, num_threads=threads)


ENCODERS = {e.name: e for e in (Tiktoken(), Tokpipe(), TokpipeNumpy(), TokpipeArrow(), HFTokenizers(), Gigatoken(), GigatokenList(), Tokie(),
                                        BpeOpenai())}


# --------------------------------------------------------------------------
# CPU pinning: applies to every thread of the process, present and future
# --------------------------------------------------------------------------

ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pin_cpus(n: int) -> bool:
    if not ALL_CPUS:
        return False
    cpus = set(ALL_CPUS[:n])
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # thread exited meanwhile
            pass
    return True


# --------------------------------------------------------------------------
# measurement
# --------------------------------------------------------------------------

class Checker:
    """Compares id sequences with tiktoken's, document by document."""

    def __init__(self, docs, ref, ref_enc):
        self.docs, self.ref, self.ref_enc = docs, ref, ref_enc

    def compare(self, rows) -> dict:
        import numpy as np

        bad, by_source, examples = 0, {}, {}
        n = 0
        for i, got in enumerate(rows):
            n += 1
            got = np.asarray(got, dtype=np.uint32)
            ref = self.ref[i]
            if got.shape == ref.shape and np.array_equal(got, ref):
                continue
            bad += 1
            src = self.docs[i].source
            by_source[src] = by_source.get(src, 0) + 1
            if src not in examples:  # the first differing document of each source
                examples[src] = self._example(i, got)
        if n != len(self.docs):
            bad += abs(len(self.docs) - n)
            examples["(all)"] = f"returned {n} sequences for {len(self.docs)} documents"
        return {"docs": len(self.docs), "mismatched": bad, "by_source": by_source, "examples": examples}

    def _example(self, i, got) -> str:
        ref = self.ref[i]
        k = next((j for j in range(min(len(ref), len(got))) if ref[j] != got[j]), min(len(ref), len(got)))
        lo = max(0, k - 2)
        def dec(ids):
            out = []
            for t in ids:
                try:
                    out.append(self.ref_enc.decode_single_token_bytes(int(t)))
                except (KeyError, ValueError):
                    out.append(f"<id {int(t)}>")
            return out

        d = self.docs[i]
        got_pieces = dec(got[lo : k + 4])
        return (f"doc {d.id!r} ({d.source}, {d.nbytes} B, {len(ref)} tokens in tiktoken, {len(got)} here): "
                f"first difference at token {k}: tiktoken {dec(ref[lo:k + 4])} vs {got_pieces}")


def time_doc(enc: Encoder, vocab: Vocab, texts, runs: int):
    times, cpu = [], []
    for _ in range(runs):
        inst = enc.make(vocab)
        f = enc.doc(inst)
        f(WARMUP)
        gc.collect()
        gc.disable()
        c0, t0 = time.process_time(), time.perf_counter()
        for t in texts:
            f(t)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        gc.enable()
        times.append(dt)
        cpu.append(dc)
        del inst, f
    return times, cpu


def check_doc(enc: Encoder, vocab: Vocab, texts, checker: Checker) -> dict:
    inst = enc.make(vocab)
    f = enc.doc(inst)
    return checker.compare(f(t) for t in texts)


def time_batch(enc: Encoder, vocab: Vocab, texts, threads: int, runs: int, checker: Checker | None):
    times, cpu, check = [], [], None
    for r in range(runs):
        inst = enc.make(vocab)
        f = enc.batch(inst, threads)
        f(enc.prepare([WARMUP]))
        data = enc.prepare(texts)
        gc.collect()
        gc.disable()
        c0, t0 = time.process_time(), time.perf_counter()
        out = f(data)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        gc.enable()
        times.append(dt)
        cpu.append(dc)
        if r == 0 and checker is not None:
            check = checker.compare(enc.batch_rows(out))
        del out, inst, f, data
        gc.collect()
    return times, cpu, check


def fmt_check(c: dict | None) -> str:
    if c is None:
        return "not checked"
    if c["mismatched"] == 0:
        return f"yes ({c['docs']} docs)"
    parts = ", ".join(f"{s} {k}" for s, k in sorted(c["by_source"].items()))
    return f"no: {c['mismatched']} of {c['docs']} docs differ" + (f" ({parts})" if parts else "")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Encode throughput (MB/s) of tokpipe vs tiktoken, HF tokenizers, gigatoken, tokie and "
                    "bpe-openai on the same documents, with an id-by-id check against tiktoken.",
        epilog="See the module docstring (or benches/README.md) for the method.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--corpus", type=Path, default=_corpus.DEFAULT_CORPUS,
                    help="benchmark corpus directory (built by ../shared/bench/build_corpus.py)")
    ap.add_argument("--sources", default=",".join(_corpus.DEFAULT_SOURCES), help="corpus sources to encode")
    ap.add_argument("--max-mb", type=float, default=0, help="use about this many MB (same mix of sources); 0: all")
    ap.add_argument("--vocabs", default=",".join(VOCAB_NAMES), help=f"subset of {','.join(VOCAB_NAMES)}")
    ap.add_argument("--encoders", default=",".join(ENCODER_NAMES), help=f"subset of {','.join(ENCODER_NAMES)}")
    ap.add_argument("--modes", default="doc,batch", help="doc (loop of one-document encodes), batch, or both")
    ap.add_argument("--threads", default="1,2", help="thread counts for batch mode")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per measurement; the best is reported")
    ap.add_argument("--no-check", action="store_true", help="skip the id comparison with tiktoken")
    ap.add_argument("--vocab-dir", type=Path, default=VOCAB_DIR, help="where the vocabulary files are")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where derived vocabulary files go")
    ap.add_argument("--json", type=Path, help="also write the results here as JSON")
    a = ap.parse_args(argv)

    vocabs = [v for v in a.vocabs.split(",") if v]
    names = [e for e in a.encoders.split(",") if e]
    modes = [m for m in a.modes.split(",") if m]
    threads = sorted({int(t) for t in a.threads.split(",") if t})
    for bad, allowed, what in ((set(vocabs) - set(VOCAB_NAMES), VOCAB_NAMES, "vocab"),
                               (set(names) - set(ENCODER_NAMES), ENCODER_NAMES, "encoder"),
                               (set(modes) - {"doc", "batch"}, ("doc", "batch"), "mode")):
        if bad:
            ap.error(f"unknown {what}(s) {sorted(bad)}; choose from {', '.join(allowed)}")
    usable = len(ALL_CPUS) or os.cpu_count() or 1
    skipped_threads = [t for t in threads if t > usable]
    threads = [t for t in threads if t <= usable]
    # size rayon pools (HF tokenizers, gigatoken) to the largest thread count before they start
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(threads or [1])))

    docs = _corpus.load_docs(a.corpus, [s for s in a.sources.split(",") if s], a.max_mb)
    texts = [d.text for d in docs]
    mb = sum(d.nbytes for d in docs) / 1e6

    print("# Encode benchmark\n")
    _corpus.print_machine_facts(PACKAGES)
    print(f"Input: {_corpus.describe_docs(docs)} from {a.corpus}\n")
    print(f"Method: best of {a.runs} runs, fresh encoder per run; doc mode pinned to 1 CPU; "
          f"batch mode pinned to T CPUs; RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}.\n")
    if skipped_threads:
        print(f"Skipped thread counts {skipped_threads}: only {usable} CPUs usable.\n")

    encoders, notes = [], []
    for n in names:
        why = ENCODERS[n].available()
        if why:
            notes.append(f"{n}: not run, {why}")
            log(f"{n}: {why}; running the peers anyway")
        else:
            encoders.append(ENCODERS[n])

    results = []  # dicts: encoder, vocab, mode, threads, mbps, times, check
    for vname in vocabs:
        log(f"== {vname}: loading vocabulary")
        vocab = Vocab(vname, a.vocab_dir, a.cache_dir)
        notes += [f"{vname}: {n}" for n in vocab.notes]
        import numpy as np

        ref_enc = Tiktoken().make(vocab)
        checker = None
        if not a.no_check:
            log(f"   reference ids (tiktoken) for {len(texts)} docs")
            ref = [np.asarray(ref_enc.encode_ordinary(t), dtype=np.uint32) for t in texts]
            ntok = sum(len(r) for r in ref)
            notes.append(f"{vname}: {ntok} tiktoken tokens, {mb * 1e6 / ntok:.2f} bytes/token")
            checker = Checker(docs, ref, ref_enc)

        active = []
        # Thread pools some libraries size once, from the CPUs they may use at their first
        # batch call (tokie does): start them here, pinned to the largest thread count, so
        # that later pinning to fewer CPUs cannot shrink them for the rest of the process.
        pin_cpus(max(threads or [1]))
        for enc in encoders:
            why = enc.supports(vocab)
            if why:
                notes.append(f"{enc.name} / {vname}: not run, {why}")
                continue
            try:
                inst = enc.make(vocab)
                enc.doc(inst)(WARMUP)
                if "batch" in modes and threads:
                    enc.batch(inst, max(threads))(enc.prepare([WARMUP] * 2 * max(threads)))
                del inst
            except Exception as e:
                notes.append(f"{enc.name} / {vname}: failed to load ({type(e).__name__}: {e})")
                log(traceback.format_exc())
                continue
            active.append(enc)

        plan = ([("doc", 1)] if "doc" in modes else []) + ([("batch", t) for t in threads] if "batch" in modes else [])
        for mode, t in plan:
            pin_cpus(t)
            for enc in active:
                if (mode == "doc" and not enc.has_doc) or (mode == "batch" and not enc.has_batch):
                    continue
                log(f"   {vname} {mode} T={t} {enc.name} ...")
                try:
                    if mode == "doc":
                        check = check_doc(enc, vocab, texts, checker) if checker else None
                        times, cpu = time_doc(enc, vocab, texts, a.runs)
                    else:
                        times, cpu, check = time_batch(enc, vocab, texts, t, a.runs, checker)
                except Exception as e:
                    notes.append(f"{enc.name} / {vname} / {mode} T={t}: failed ({type(e).__name__}: {e})")
                    log(traceback.format_exc())
                    continue
                best = min(times)
                results.append({"encoder": enc.name, "vocab": vname, "mode": mode, "threads": t,
                                "mb": mb, "times": times, "cpu_times": cpu, "mbps": mb / best,
                                "mb_per_cpu_s": mb / min(cpu), "check": check})
                log(f"      {mb / best:8.2f} MB/s  {mb / min(cpu):8.2f} MB/CPU-s  {fmt_check(check)}")
        pin_cpus(usable)
        del checker

    # ---- report
    base = {(r["vocab"], r["mode"], r["threads"]): r["mbps"] for r in results if r["encoder"] == "tiktoken"}
    print("## Results\n")
    print("| encoder | vocab | mode | threads | MB/s | x tiktoken | MB/CPU-s | ids = tiktoken |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for r in results:
        b = base.get((r["vocab"], r["mode"], r["threads"]))
        r["ratio"] = r["mbps"] / b if b else None
        ratio = f"{r['ratio']:.2f}" if b else "n/a"
        print(f"| {r['encoder']} | {r['vocab']} | {r['mode']} | {r['threads']} | {r['mbps']:.1f} | {ratio} | "
              f"{r['mb_per_cpu_s']:.1f} | {fmt_check(r['check'])} |")
    print()
    examples = [r for r in results if r["check"] and r["check"]["mismatched"]]
    if examples:
        print("## Id mismatches (first differing document of each source)\n")
        for r in examples:
            for ex in r["check"]["examples"].values():
                print(f"- {r['encoder']} / {r['vocab']} / {r['mode']} T={r['threads']}: {ex}")
        print()
    print("## Calls measured\n")
    for enc in encoders:
        print(f"- {enc.name}: doc `{enc.doc_api}`; batch `{enc.batch_api}`")
    print()
    print(f"Load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    if notes:
        print("## Notes\n")
        for n in notes:
            print(f"- {n}")
        print()
    if a.json:
        a.json.write_text(json.dumps({"machine": dict(_corpus.machine_facts(PACKAGES)),
                                      "input": _corpus.describe_docs(docs), "runs": a.runs,
                                      "results": results, "notes": notes}, indent=1))


if __name__ == "__main__":
    main()
