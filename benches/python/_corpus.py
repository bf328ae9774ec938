"""Shared helpers for the Python benchmarks: locate and load the benchmark
corpus, and describe the machine the numbers came from.

This module alone owns the benchmarks' default folders; each can be moved by
an environment variable (a script's own option, where it has one, wins):

    BENCH_CORPUS  the benchmark corpus: $TOKPIPE_BENCH_CORPUS, else
                  ``bench_corpus`` beside the repository (``../bench_corpus``)
    SHARED        the shared data: $TOKPIPE_SHARED, else ``shared`` beside the
                  repository (``../shared``); its ``corpora/`` (the tests' corpora),
                  ``corpora/vocab/`` (the vocabularies) and ``bench/build_corpus.py``
    SCRATCH       files a bench writes and may reuse (derived models, outputs):
                  $TOKPIPE_BENCH_SCRATCH, else ``tokpipe-bench`` in the system's
                  temporary folder

The corpus is built once, outside the repository, by
``python3 ../shared/bench/build_corpus.py DIR`` (Debian documentation,
the GCIDE dictionary and classical Chinese poems; about 280 MB). Its layout:

    DIR/docs.jsonl   one JSON object a line: {"id", "source", "lang", "text"}
    DIR/text/        line n of docs.jsonl as the file {n:06d}.txt
    DIR/MANIFEST     documents and MB per source; written last, so its
                     presence means the build finished

The benchmarks use four of its sources by default (``DEFAULT_SOURCES``,
about 77 MB, 137k documents): kernel .rst files, Python's documentation
sources, dictionary entries (many tiny documents) and Chinese poems.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

DEFAULT_SOURCES = ("linux-rst", "python-txt", "gcide", "fortunes-zh")
REPO = Path(__file__).resolve().parents[2]
# An empty variable counts as unset (``or``), so ``VAR= cmd`` falls back to the default.
DEFAULT_CORPUS = Path(os.environ.get("TOKPIPE_BENCH_CORPUS") or REPO.parent / "bench_corpus")
DEFAULT_DOCS = DEFAULT_CORPUS / "docs.jsonl"  # for the scripts that take the JSON Lines file itself
SHARED = Path(os.environ.get("TOKPIPE_SHARED") or REPO.parent / "shared")
SHARED_CORPORA = SHARED / "corpora"
VOCAB_DIR = SHARED_CORPORA / "vocab"
BUILD_HINT = f"python3 {SHARED / 'bench' / 'build_corpus.py'} {{dir}}"
SCRATCH = Path(os.environ.get("TOKPIPE_BENCH_SCRATCH") or Path(tempfile.gettempdir()) / "tokpipe-bench")
CACHE = SCRATCH / "cache"  # derived files worth keeping between runs (trained models, vocab conversions)


@dataclass(frozen=True)
class Doc:
    index: int  # line number in docs.jsonl, also the name of its text/ file
    id: str
    source: str
    nbytes: int  # UTF-8 bytes of the text
    path: Path  # DIR/text/{index:06d}.txt, the same text as a file
    text: str = ""  # empty when loaded with keep_text=False


def check_corpus(corpus: Path) -> Path:
    """Return ``corpus`` if the build finished there, else exit with a hint."""
    corpus = Path(corpus)
    missing = [p for p in ("docs.jsonl", "text", "MANIFEST") if not (corpus / p).exists()]
    if missing:
        sys.exit(
            f"benchmark corpus not found or incomplete at {corpus} (missing: {', '.join(missing)}).\n"
            f"Build it once with:  {BUILD_HINT.format(dir=corpus)}\n"
            "or point --corpus / $TOKPIPE_BENCH_CORPUS at an existing build."
        )
    return corpus


def source_sizes(corpus: Path) -> dict[str, float]:
    """MB per source, as listed in MANIFEST."""
    sizes = {}
    for line in (Path(corpus) / "MANIFEST").read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] != "total":
            sizes[parts[0]] = float(parts[2].split()[0])
    return sizes


def load_docs(corpus: Path, sources=DEFAULT_SOURCES, max_mb: float = 0.0, keep_text: bool = True) -> list[Doc]:
    """The documents of ``sources``, in corpus order.

    With ``max_mb`` > 0, every source contributes its first documents up to
    its share of ``max_mb`` (shares proportional to the sources' sizes), so
    a smaller run keeps the same mix of document kinds. Deterministic.
    With ``keep_text=False`` only the metadata and file paths are kept.
    """
    corpus = check_corpus(corpus)
    wanted = set(sources)
    unknown = wanted - set(source_sizes(corpus))
    if unknown:
        sys.exit(f"unknown source(s) {sorted(unknown)}; the corpus has {sorted(source_sizes(corpus))}")
    budget = None
    if max_mb and max_mb > 0:
        sizes = source_sizes(corpus)
        total = sum(sizes[s] for s in wanted)
        budget = {s: max_mb * 1e6 * sizes[s] / total for s in wanted}
    used = dict.fromkeys(wanted, 0)
    docs = []
    with open(corpus / "docs.jsonl", encoding="utf-8") as f:
        for n, line in enumerate(f):
            # cheap prefilter before parsing: the source tag sits in every line
            if not any(f'"source": "{s}"' in line for s in wanted):
                continue
            d = json.loads(line)
            s = d["source"]
            if s not in wanted:
                continue
            if budget is not None and used[s] >= budget[s]:
                continue
            text = d["text"]
            doc = Doc(n, d["id"], s, len(text.encode("utf-8")), corpus / "text" / f"{n:06d}.txt",
                      text if keep_text else "")
            used[s] += doc.nbytes
            docs.append(doc)
    if not docs:
        sys.exit(f"no documents of sources {sorted(wanted)} in {corpus}")
    return docs


def describe_docs(docs: list[Doc]) -> str:
    per = {}
    for d in docs:
        c = per.setdefault(d.source, [0, 0])
        c[0] += 1
        c[1] += d.nbytes
    parts = [f"{s} {k} docs {b / 1e6:.1f} MB" for s, (k, b) in per.items()]
    total = sum(b for _, b in per.values())
    return f"{len(docs)} docs, {total / 1e6:.1f} MB ({'; '.join(parts)})"


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def package_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_facts(packages=()) -> list[tuple[str, str]]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    facts = [
        ("CPU", _cpu_model()),
        ("cores", f"{os.cpu_count()} logical, {usable} usable by this process"),
        ("RAM", f"{_ram_gb():.1f} GiB"),
        ("OS", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
    ]
    if hasattr(os, "getloadavg"):  # other work on the machine skews timings
        facts.append(("load average (1, 5, 15 min)", " ".join(f"{x:.2f}" for x in os.getloadavg())))
    facts += [(p, package_version(p)) for p in packages]
    return facts


def print_machine_facts(packages=()) -> None:
    print("## Machine\n")
    for k, v in machine_facts(packages):
        print(f"- {k}: {v}")
    print()


def log(*a) -> None:
    """Progress messages go to stderr so stdout stays the report."""
    print(*a, file=sys.stderr, flush=True)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (HF ByteLevel), for building peer vocab files."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))
