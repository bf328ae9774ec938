#!/usr/bin/env python3
"""``url_filter`` against datatrove's ``URLFilter``, per core, on the same URLs and lists; and
the load time and memory of a 5M-entry domain list.

The URLs are those of the shared Common Crawl samples and the URLs their texts cite (see
``tests/pipeline/stages/test_url_filter.py``), repeated with a distinct path each up to
``--urls``. The lists: ``--domains`` generated domains plus a share of the samples' registered
domains and full hosts (so that some URLs are blocked), a few exact URLs, banned words,
subwords and soft-banned words. Both sides must give the same decision on every URL.

Throughput per core is URLs over CPU seconds (``time.process_time``), tokpipe on one Rayon
thread; its wall-clock rate on all cores is printed too. datatrove's ``URLFilter`` runs with
its own dependencies, pyahocorasick and tldextract (the test extra), tldextract reading only its
bundled public suffix list (the test's ``datatrove_offline``: no network). The decisions differ
only where the test documents it: a URL whose host has capitals is matched against the domain
list in lower case by tokpipe, as spelt by datatrove.

    RAYON_NUM_THREADS=1 python3 benches/python/bench_url_filter.py
    python3 benches/python/bench_url_filter.py --urls 1000000 --domains 1000000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import print_machine_facts  # noqa: E402


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


_LOAD_PROBE = """
import json, sys, time
from pathlib import Path
def rss(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
from tokpipe.pipeline.stages.url_filter import UrlFilter
before = rss("VmRSS")
started = time.perf_counter()
stage = UrlFilter(block_domains=sys.argv[1])
took = time.perf_counter() - started
print(json.dumps([took, before, rss("VmRSS"), rss("VmHWM"), stage.rules.domain_counts()[0]]))
"""


def write_domains(path: Path, n: int) -> None:
    with path.open("w", encoding="ascii") as f:
        for start in range(0, n, 500_000):
            f.write("".join(f"site{i}.example{i % 997}.com\n" for i in range(start, min(n, start + 500_000))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=200_000, help="URLs to judge (default 200,000)")
    parser.add_argument("--domains", type=int, default=1_000_000, help="generated block-list domains (default 1M)")
    parser.add_argument("--load-entries", type=int, default=5_000_000, help="entries of the load test (default 5M)")
    args = parser.parse_args()

    import pyarrow as pa

    from tests.pipeline.stages import test_url_filter as t
    from tokpipe.pipeline.stages.url_filter import UrlFilter

    print_machine_facts(("datatrove",))
    threads = os.environ.get("RAYON_NUM_THREADS", "all")
    with tempfile.TemporaryDirectory() as tmp:
        # -- loading a 5M-entry list: time and memory ------------------------------------------
        big = Path(tmp) / "big.txt"
        write_domains(big, args.load_entries)
        # In a fresh process, so that its peak is the load's alone.
        probe = subprocess.run([sys.executable, "-c", _LOAD_PROBE, str(big)], capture_output=True, text=True,
                               check=True, env={**os.environ, "PYTHONPATH": str(REPO / "python")})
        load_s, before, after, peak, count = json.loads(probe.stdout.strip().splitlines()[-1])
        print(f"## Loading {args.load_entries:,} domains ({big.stat().st_size / 1e6:.0f} MB file)\n")
        print(f"- tokpipe: {load_s:.2f} s; resident memory {before:.0f} MB before, {after:.0f} MB after "
              f"(+{after - before:.0f} MB), peak {peak:.0f} MB")
        assert count == args.load_entries, count
        big.unlink()

        # -- the comparison -------------------------------------------------------------------
        # The samples' URLs with capitals, ports and user info; not the test's cdn/poker/xxx
        # variants, which a banned-word list would drop wholesale.
        real = [u for u in t.real_urls() if not u.endswith("?ref=xxx")]
        urls = [f"{u.rstrip('/')}/p{i}" if i >= len(real) else u
                for i, u in ((i, real[i % len(real)]) for i in range(args.urls))]
        cache = str(Path(tmp) / "tldextract-cache")
        extract = t.offline_extractor(cache)
        hosts = [extract(u) for u in real]
        # Listed: a third of the sites that appear in one URL, so that a few per cent of URLs are
        # blocked, as with a real list (the texts cite a few sites hundreds of times).
        sites = Counter(h.top_domain_under_public_suffix.lower() for h in hosts if h.top_domain_under_public_suffix)
        listed = sorted(d for d, n in sites.items() if n <= 3)[::3]  # 3: a URL and its two variants
        domain_file = Path(tmp) / "domains.txt"
        write_domains(domain_file, args.domains)
        with domain_file.open("a", encoding="ascii") as f:
            f.write("".join(d + "\n" for d in listed))
        lists = dict(banned_words=["casino", "porn", "details"], banned_subwords=["xxx", "schola"],
                     soft_banned_words=["poker", "blog", "en", "2016", "people"], soft_word_threshold=2)
        exact = sorted(set(real[2::37]))

        ours = UrlFilter(block_domains=str(domain_file), block_urls=exact, **lists)
        column = pa.record_batch({"id": [str(i) for i in range(len(urls))], "text": [""] * len(urls),
                                  "url": pa.array(urls, type=pa.string())})
        best_cpu, best_wall, result = float("inf"), float("inf"), None
        for _ in range(3):
            cpu, wall = time.process_time(), time.perf_counter()
            result = ours.process(column)
            best_cpu = min(best_cpu, time.process_time() - cpu)
            best_wall = min(best_wall, time.perf_counter() - wall)
        ours_reasons = [""] * len(urls)
        if result.rejected is not None:
            for i, r in zip(result.rejected.column("id").to_pylist(), result.rejected.column("reason").to_pylist()):
                ours_reasons[int(i)] = r

        # datatrove reads tldextract's deprecated `registered_domain` (the same value).
        warnings.filterwarnings("ignore", "The 'registered_domain' property is deprecated", DeprecationWarning)
        offline = t.datatrove_offline(cache)
        URLFilter, Document = offline.__enter__()
        started = time.perf_counter()
        gc.collect()
        before = rss_mb()
        peer = URLFilter(extra_domains=domain_file.read_text(encoding="ascii").splitlines(), extra_urls=exact,
                         use_integrated_lists=False, **lists)
        peer_load_s, peer_mb = time.perf_counter() - started, rss_mb() - before
        docs = [Document(text="", id=str(i), metadata={"url": u}) for i, u in enumerate(urls)]
        cpu = time.process_time()
        verdicts = [peer.filter(d) for d in docs]
        peer_cpu = time.process_time() - cpu
        renamed = {"domain": "blocked_domain", "subdomain": "blocked_domain", "url": "blocked_url",
                   "hard_blacklisted": "banned_word", "soft_blacklisted": "soft_banned_words",
                   "blacklisted_subword": "banned_subword"}
        peer_reasons = ["" if v is True else renamed[v[1]] for v in verdicts]
        agree = sum(a == b for a, b in zip(ours_reasons, peer_reasons))
        # The documented difference: a host in capitals, blocked by its lower-case domain.
        capitals = sum(a != b and a == "blocked_domain" and u.split("/")[2] != u.split("/")[2].lower()
                       for u, a, b in zip(urls, ours_reasons, peer_reasons))
        assert agree + capitals == len(urls), "a decision differs beyond the documented difference"

        print(f"## Judging {len(urls):,} URLs against {args.domains + len(listed):,} domains\n")
        print(f"- tokpipe (Rayon threads: {threads}): {len(urls) / best_cpu / 1e6:.2f} M URLs per CPU second "
              f"({len(urls) / best_wall / 1e6:.2f} M URLs/s wall)")
        print(f"- datatrove URLFilter: {len(urls) / peer_cpu / 1e6:.3f} M URLs per CPU second; "
              f"list built in {peer_load_s:.2f} s, {peer_mb:.0f} MB")
        print(f"- ratio per core: {peer_cpu / best_cpu:.1f}x")
        print(f"- decisions agreeing: {agree:,} of {len(urls):,}; the other {capitals:,}: a host in capitals, "
              "blocked by its lower-case domain by tokpipe only; datatrove's drops: "
              + ", ".join(f"{r} {n:,}" for r, n in sorted(Counter(r for r in peer_reasons if r).items())))
        offline.__exit__(None, None, None)


if __name__ == "__main__":
    main()
