"""``pipeline.allocator``: with ``keep_freed_memory`` glibc keeps what a process frees (its
resident memory stays up), and ``release_memory`` hands it back. Measured in a fresh process
(the settings are process-wide) from the kernel's own count, ``RssAnon`` in
``/proc/self/status``."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import json
from tokpipe.pipeline.allocator import keep_freed_memory, release_memory

def anon_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024

keep_freed_memory()
before = anon_mib()
# 160 MiB in blocks of 1 MiB, each written to (so resident), then freed.
blocks = [bytearray(b"x" * (1 << 20)) for _ in range(160)]
held = anon_mib()
del blocks
kept = anon_mib()
release_memory()
print(json.dumps({"before": before, "held": held, "kept": kept, "released": anon_mib()}))
"""


def test_freed_memory_is_kept_until_released() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True, text=True).stdout
    mib = json.loads(out)
    assert mib["held"] - mib["before"] >= 150
    # Kept by glibc for the next allocations...
    assert mib["kept"] - mib["before"] >= 100
    # ...and handed back to the system.
    assert mib["released"] - mib["before"] < 20
