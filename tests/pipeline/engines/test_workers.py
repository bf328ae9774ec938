"""Worker processes (``engines.workers``): a killed worker fails the run with one line naming
its task, and a rerun resumes; workers do not outlive a killed run; a full disk is one line
naming the output folder, and the run resumes once there is space. (Linux: the tests read
/proc and mount a tmpfs in a mount namespace of their own.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from concurrent.futures.process import BrokenProcessPool

from tokpipe.pipeline.engines.workers import WorkerPool

CLEAN = [sys.executable, "-c", "from tokpipe.cli import main; main()", "clean"]


def _die_after(seconds: float) -> None:
    time.sleep(seconds)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_named_with_its_unit() -> None:
    pool = WorkerPool(2)
    try:
        future = pool.submit(_die_after, (0.2,), "task 7 (in/x.jsonl)", "out")
        with pytest.raises(BrokenProcessPool) as raised:
            future.result()
        message = str(pool.failure(raised.value))
    finally:
        pool.shutdown()
    assert message.startswith("worker process ")
    assert "was killed by signal 9 (SIGKILL), most likely by the system for lack of memory" in message
    assert message.endswith("while running task 7 (in/x.jsonl); rerun the same command to resume where the run stopped")


def write_corpus(root: Path, documents: list[tuple[str, str]], files: int = 8, copies: int = 6) -> Path:
    """Real documents, varied so none is an exact duplicate, in ``files`` files: enough work
    that a run of several tasks takes a few seconds."""
    root.mkdir(parents=True, exist_ok=True)
    texts = [t for _, t in documents if len(t) > 200]
    for f in range(files):
        with open(root / f"part{f}.jsonl", "w", encoding="utf-8") as out:
            for c in range(copies):
                for n, text in enumerate(texts[f::files]):
                    out.write(json.dumps({"id": f"{f}-{c}-{n}", "text": f"copy {c}: {text}"}) + "\n")
    return root


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def busy_workers(main: subprocess.Popen[str], out: Path) -> list[int]:
    """The run's worker processes once they are working through tasks: a few tasks are done
    (their markers exist) and hundreds remain. (Whether a worker is inside a task or between
    two at a given moment is left to chance: a test that needs it mid-task holds one.)
    Fails if the run ends first."""
    state = out / ".tokpipe" / "seg0"
    while main.poll() is None:
        workers = [pid for pid in children(main.pid) if cpu_seconds(pid) > 0.5]
        if len(workers) >= 2 and state.is_dir() and len(list(state.glob("*.json"))) >= 4:
            return workers
        time.sleep(0.02)
    raise AssertionError(f"the run ended before its workers got busy: {main.communicate()}")


# A stage that holds one task: while the file named by TOKPIPE_TEST_HOLD exists, the worker that
# meets the document HELD writes its pid to that file's ".pid" sibling and waits (to be
# killed), so the test kills a worker that is certainly mid-task. Picking a busy worker from
# the outside and killing it sometimes met it between two tasks (in CI): the message then
# rightly named no task.
HOLD_STAGE = '''
import os, time
import pyarrow as pa
from tokpipe.pipeline import Filter

class HoldOne(Filter):
    def keep(self, batch):
        hold = os.environ["TOKPIPE_TEST_HOLD"]
        if os.path.exists(hold) and "%s" in batch["id"].to_pylist():
            with open(hold + ".pid", "w") as out:
                out.write(str(os.getpid()))
            time.sleep(300)
        return pa.array([True] * batch.num_rows), "held"
'''
HELD = "5-20-3"  # file part5.jsonl, near its end: hundreds of tasks come before it


def test_a_worker_killed_mid_task_fails_the_run_in_one_line_and_a_rerun_resumes(
        tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    inputs = write_corpus(tmp_path / "in", documents, copies=24)  # about 380 tasks
    (tmp_path / "hold_stages.py").write_text(HOLD_STAGE % HELD, encoding="utf-8")
    config = tmp_path / "p.yaml"
    config.write_text("stages:\n  - type: hold_stages:HoldOne\n  - type: gopher_quality\n  - type: exact_dedup\n",
                      encoding="utf-8")
    hold = tmp_path / "hold"
    hold.touch()
    env = {**os.environ, "TOKPIPE_TEST_HOLD": str(hold),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}

    def clean(out: Path) -> list[str]:
        return [*CLEAN, str(inputs), "-o", str(out), "-c", str(config), "-w", "2", "--task-size", "300KB", "-q"]

    out = tmp_path / "out"
    main = subprocess.Popen(clean(out), stderr=subprocess.PIPE, text=True, env=env)
    held = tmp_path / "hold.pid"
    deadline = time.monotonic() + 300
    while not held.exists() or not held.read_text():
        assert main.poll() is None, f"the run ended before it met the held document: {main.communicate()}"
        assert time.monotonic() < deadline, "no worker met the held document"
        time.sleep(0.02)
    victim = int(held.read_text())
    assert victim in children(main.pid)
    os.kill(victim, signal.SIGKILL)
    _, stderr = main.communicate(timeout=300)
    assert main.returncode == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith(f"tokpipe: error: worker process {victim} was killed by signal 9 (SIGKILL)"), lines[0]
    assert " while running task " in lines[0] and str(inputs / "part5.jsonl") in lines[0], lines[0]
    assert lines[0].endswith("rerun the same command to resume where the run stopped")
    # The rerun resumes, to the output of a run that was never interrupted.
    hold.unlink()
    assert subprocess.run(clean(out), capture_output=True, env=env).returncode == 0
    whole = tmp_path / "whole"
    assert subprocess.run(clean(whole), capture_output=True, env=env).returncode == 0
    assert _rows(out) == _rows(whole)


def _rows(out: Path) -> list[tuple[str, str]]:
    import pyarrow.parquet as pq

    rows: list[tuple[str, str]] = []
    for shard in sorted(out.glob("data/part-*.parquet")):
        table = pq.read_table(shard, columns=["id", "text"])
        rows += zip(table.column("id").to_pylist(), table.column("text").to_pylist())
    return sorted(rows)


def test_workers_exit_when_the_run_is_killed(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    inputs = write_corpus(tmp_path / "in", documents, copies=24)
    main = subprocess.Popen([*CLEAN, str(inputs), "-o", str(tmp_path / "out"), "-w", "2", "--task-size", "300KB",
                             "-q"], stderr=subprocess.PIPE, text=True)
    workers = busy_workers(main, tmp_path / "out")
    os.kill(main.pid, signal.SIGKILL)
    main.communicate()
    # A generous wait: only workers that go on without their run reach it (they ran on for
    # most of an hour before).
    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if alive(pid)]


def _isolated_mount() -> list[str]:
    """A prefix that runs a shell in a mount namespace of its own, where it may mount a small
    tmpfs (as root, or as the root of a new user namespace)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise FileNotFoundError("the disk-full test needs util-linux's unshare")
    return [unshare, "-m"] if os.geteuid() == 0 else [unshare, "-rm"]


def test_a_full_disk_is_one_line_naming_the_folder_and_the_run_resumes_with_space(
        tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    inputs = write_corpus(tmp_path / "in", documents, files=4, copies=3)
    mount = tmp_path / "disk"
    mount.mkdir()
    out = mount / "out"
    clean = " ".join(f"'{a}'" for a in [*CLEAN, str(inputs), "-o", str(out), "-w", "1", "-q"])
    script = f"""
        set -u
        mount -t tmpfs -o size=256k tmpfs '{mount}'
        {clean} 2> '{tmp_path}/first.err'; echo $? > '{tmp_path}/first.rc'
        mount -o remount,size=512m '{mount}'
        {clean} 2> '{tmp_path}/second.err'; echo $? > '{tmp_path}/second.rc'
        cp -r '{out}' '{tmp_path}/kept'
    """
    subprocess.run([*_isolated_mount(), "sh", "-c", script], check=True)
    first = (tmp_path / "first.err").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "1", first
    assert len(first.strip().splitlines()) == 1 and "Traceback" not in first, first
    assert first.startswith(f"tokpipe: error: no space left on the device of {out} while running "), first
    assert "rerun the same command" in first
    assert (tmp_path / "second.rc").read_text().strip() == "0", (tmp_path / "second.err").read_text()
    whole = tmp_path / "whole"
    subprocess.run([*CLEAN, str(inputs), "-o", str(whole), "-w", "1", "-q"], check=True)
    assert _rows(tmp_path / "kept") == _rows(whole)
