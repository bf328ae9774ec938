"""The output folder's lock (``engines.lock``): a second run on a folder in use is refused in
one line naming the holder, a killed run's lock does not block the resume, and a lock whose
holder went silent is taken over."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tokpipe.pipeline as pipeline
from tokpipe.pipeline.engines import lock as lock_module
from tokpipe.pipeline.engines.lock import LockHeld

CLI = [sys.executable, "-c", "from tokpipe.cli import main; main()"]
TEXT = "A document long enough for the default length filter, with a few more words in it. "


def write_inputs(root: Path, files: int = 3, documents: int = 50) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        with open(root / f"part{f}.jsonl", "w", encoding="utf-8") as out:
            for n in range(documents):
                out.write(json.dumps({"id": f"{f}-{n}", "text": f"{TEXT * 3} {f} {n}"}) + "\n")
    return root


HOLDER = """
import sys, time
from pathlib import Path
from tokpipe.pipeline.engines.lock import RunLock
RunLock(Path(sys.argv[1]), sys.argv[2]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def hold(out: Path) -> subprocess.Popen[str]:
    """A live process that holds ``out``'s lock, as a run does while it works."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out / ".tokpipe" / "lock.json"), str(out)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_run_is_refused_naming_the_holder_and_a_killed_holder_does_not_block(tmp_path: Path) -> None:
    inputs, out = write_inputs(tmp_path / "in"), tmp_path / "out"
    holder = hold(out)
    try:
        for command in (["clean", str(inputs), "-o", str(out)],
                        ["clean", str(inputs), "-o", str(out), "--overwrite"]):
            result = subprocess.run([*CLI, *command, "-q"], capture_output=True, text=True)
            assert result.returncode == 1
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in result.stderr
            assert f"{out} is in use by another tokpipe run (pid {holder.pid} on host {socket.gethostname()}, since " \
                   in lines[0]
        # --overwrite was refused before it deleted anything of the holder's.
        assert (out / ".tokpipe" / "lock.json").exists()
    finally:
        holder.kill()
        holder.communicate()
    # The holder was killed (as kill -9 or the OOM killer would): its lock is stale.
    result = subprocess.run([*CLI, "clean", str(inputs), "-o", str(out), "-q"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert not (out / ".tokpipe" / "lock.json").exists(), "a finished run gives its lock back"


def test_two_runs_at_once_one_refused_and_the_output_whole(tmp_path: Path) -> None:
    inputs, out = write_inputs(tmp_path / "in", files=6, documents=2000), tmp_path / "out"
    first = subprocess.Popen([*CLI, "clean", str(inputs), "-o", str(out), "-w", "2", "-q"], stderr=subprocess.PIPE,
                             text=True)
    lock = out / ".tokpipe" / "lock.json"
    while not lock.exists() and first.poll() is None:
        time.sleep(0.01)
    # Paused while the second starts, so the two surely overlap however fast the first is.
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = subprocess.run([*CLI, "clean", str(inputs), "-o", str(out), "-w", "2", "-q"], capture_output=True,
                                text=True)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, first_err = first.communicate()
    assert first.returncode == 0, first_err
    assert second.returncode == 1 and "is in use by another tokpipe run" in second.stderr, second.stderr
    alone = tmp_path / "alone"
    pipeline.run([inputs], alone, workers=2)
    verify = subprocess.run([*CLI, "stats", str(out), "--verify"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    assert _rows(out) == _rows(alone)


def test_a_run_whose_lock_was_taken_over_stops(tmp_path: Path) -> None:
    held = lock_module.RunLock(tmp_path / "lock.json", "out")
    held.acquire()
    try:
        # Another run judged this one stale and took the lock (this run was silent too long).
        (tmp_path / "lock.json").write_text(json.dumps({"token": "theirs", "heartbeat": time.time()}),
                                            encoding="utf-8")
        held._stop.set()
        held._beating.join()  # type: ignore[union-attr]
        held._stop.clear()
        held._beat_once()
        with pytest.raises(LockHeld, match="another tokpipe run took over this run's lock"):
            held.check()
    finally:
        held.release()
    # It gave back nothing that was not its own.
    assert json.loads((tmp_path / "lock.json").read_text(encoding="utf-8"))["token"] == "theirs"


def test_a_lock_moved_aside_by_mistake_goes_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two runs found the same stale lock; the first took it over. The second moves the first's
    # fresh lock aside, sees it is not the one it judged stale, and puts it back.
    path = tmp_path / "lock.json"
    stale = {"pid": 4242, "place": "elsewhere", "token": "stale", "heartbeat": 0}
    fresh = {"pid": 1, "host": "h", "place": "elsewhere", "token": "fresh", "heartbeat": time.time(), "started": 0}
    path.write_text(json.dumps(fresh), encoding="utf-8")
    late = lock_module.RunLock(path, "out")
    seen = iter([stale, fresh])  # what it read: the stale lock, then (next pass) the fresh one
    monkeypatch.setattr(late, "_holder", lambda: next(seen))
    with pytest.raises(LockHeld, match="pid 1 on host h"):
        late.acquire()
    assert json.loads(path.read_text(encoding="utf-8"))["token"] == "fresh"


def _rows(out: Path) -> list[tuple[str, str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(sorted(out.glob("data/part-*.parquet")), columns=["id", "text"])
    return sorted(zip(table.column("id").to_pylist(), table.column("text").to_pylist()))


def _foreign_lock(out: Path, heartbeat_age: float) -> None:
    """A lock written by a run on another machine, its last heartbeat ``heartbeat_age`` ago."""
    path = out / ".tokpipe" / "lock.json"
    path.parent.mkdir(parents=True)
    now = time.time()
    path.write_text(json.dumps({"pid": 4242, "host": "elsewhere", "place": "elsewhere/boot/1", "token": "theirs",
                                "started": now - heartbeat_age - 60, "heartbeat": now - heartbeat_age}),
                    encoding="utf-8")


def test_a_lock_from_another_machine_holds_while_its_heartbeat_is_fresh(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    _foreign_lock(tmp_path / "fresh", heartbeat_age=5)
    with pytest.raises(LockHeld, match="pid 4242 on host elsewhere"):
        pipeline.run([inputs], tmp_path / "fresh")
    _foreign_lock(tmp_path / "silent", heartbeat_age=lock_module.STALE_AFTER + 60)
    result = pipeline.run([inputs], tmp_path / "silent")
    assert result.kept == 150


def test_the_heartbeat_keeps_a_long_run_s_lock_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_module, "HEARTBEAT", 0.05)
    held = lock_module.RunLock(tmp_path / "lock.json", "out")
    held.acquire()
    try:
        first = json.loads((tmp_path / "lock.json").read_text(encoding="utf-8"))["heartbeat"]
        deadline = time.monotonic() + 30
        while json.loads((tmp_path / "lock.json").read_text(encoding="utf-8"))["heartbeat"] == first:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.01)
    finally:
        held.release()
    assert not (tmp_path / "lock.json").exists()


def test_a_lock_left_by_this_host_s_dead_process_is_taken_over(tmp_path: Path) -> None:
    # A process that took the lock and died without giving it back, like a run killed by -9.
    out = tmp_path / "out"
    holder = hold(out)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate()
    data = json.loads((out / ".tokpipe" / "lock.json").read_text(encoding="utf-8"))
    assert data["pid"] == holder.pid and time.time() - data["heartbeat"] < lock_module.STALE_AFTER
    result = pipeline.run([write_inputs(tmp_path / "in")], out)
    assert result.kept == 150
