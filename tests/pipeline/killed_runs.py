"""The command line run in a subprocess and killed mid-way (``kill -9`` of its whole process
group), for the resume tests of ``clean`` (``engines/test_local.py``) and ``tokenize``
(``tokenize/test_run.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def start_cli(*args: str) -> subprocess.Popen[str]:
    """``tokpipe ARGS`` in its own process group, so a kill reaches its workers too."""
    return subprocess.Popen([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen[str]) -> None:
    """Waits for the command, which must succeed."""
    _, stderr = proc.communicate()
    assert proc.returncode == 0, stderr


def kill_after_markers(proc: subprocess.Popen[str], markers: Path, at_least: int) -> int:
    """Kills the run once ``markers`` holds ``at_least`` task markers (it must still be
    running then), and returns how many it held when the run died."""
    while proc.poll() is None and len(list(markers.glob("*.json"))) < at_least:
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    return len(list(markers.glob("*.json")))
