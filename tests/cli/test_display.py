"""What a person sees in the terminal (``cli.display``): a real ``tokpipe clean`` in a tmux
window, whose final screen holds each progress line once, whole, with no leftover characters
of a longer line drawn before it and no line wrapped past the window's width; the stats
table within the width, the time column labelled as summed over workers and the run's wall
time beside it; nothing but plain lines when stderr is not a terminal."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokpipe.cli.display import Progress, stats_table
from tokpipe.pipeline.engines import ProgressUpdate

# Only a hang should reach it.
HANG_S = 120
WIDTH = 80
CONFIG = ("stages:\n  - type: gopher_repetition\n  - type: gopher_quality\n  - type: c4_quality\n"
          "  - type: fineweb_quality\n  - type: exact_dedup\n")
# A progress line: the phase, then its bar.
PHASE = re.compile(r"^(\S.*?) +\[[#.]*\] ")


def write_inputs(root: Path) -> Path:
    """Four JSON Lines files (four tasks, so a phase goes through partial states), documents
    that the stages drop for several reasons each (a long list of reasons per stage)."""
    rng = random.Random(3)
    words = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have "
             "an they you were her she there").split()
    folder = root / "in"
    folder.mkdir()
    for f in range(4):
        with open(folder / f"part{f}.jsonl", "w", encoding="utf-8") as out:
            for n in range(60):
                kind = n % 6
                if kind == 0:
                    text = "too short"
                elif kind == 1:
                    text = "# $ % & * " * 40
                elif kind == 2:
                    text = "a shared duplicate document. " * 30
                elif kind == 3:
                    text = "\n".join(" ".join(rng.choices(words, k=4)) for _ in range(40))
                else:
                    text = "\n".join(" ".join(rng.choices(words, k=14)).capitalize() + "." for _ in range(12))
                out.write(json.dumps({"text": text}) + "\n")
    (root / "p.yaml").write_text(CONFIG, encoding="utf-8")
    return folder


def tokpipe(*args: str) -> list[str]:
    return [sys.executable, "-c", "from tokpipe.cli import main; main()", *args]


def in_tmux(tmp_path: Path, command: list[str], width: int = WIDTH) -> str:
    """Runs ``command`` in a detached tmux window ``width`` columns wide (a real terminal:
    ``\\r`` and escapes are interpreted) and returns its final screen, wrapped lines joined
    (``capture-pane -J``: a line too long for the window shows as one line longer than it)."""
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux must be installed (it is in CI)"
    socket = f"tokpipe-test-{os.getpid()}-{time.monotonic_ns()}"
    script = tmp_path / "window.sh"
    script.write_text(f"{shlex.join(command)}\necho \"__exit $?__\"\nsleep {HANG_S}\n", encoding="utf-8")
    base = [tmux, "-L", socket, "-f", os.devnull]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    subprocess.run([*base, "new-session", "-d", "-x", str(width), "-y", "60", f"sh {shlex.quote(str(script))}"],
                   check=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + HANG_S
        while True:
            screen = subprocess.run([*base, "capture-pane", "-p", "-J", "-t", "0"], capture_output=True, text=True,
                                    check=True).stdout
            if "__exit " in screen or time.monotonic() > deadline:
                return screen
            time.sleep(0.2)
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True)


def test_the_final_screen_of_a_clean_run_has_whole_lines_within_the_width(tmp_path: Path) -> None:
    # Relative paths: the summary's last line names the output folder, which must fit too.
    write_inputs(tmp_path)
    screen = in_tmux(tmp_path, tokpipe("clean", "in", "-c", "p.yaml", "-o", "out", "-w", "2", "--task-size", "1KB"))
    assert "__exit 0__" in screen, screen
    lines = [line.rstrip() for line in screen.rstrip("\n").splitlines()]
    assert all(len(line) <= WIDTH for line in lines), screen
    progress = [line for line in lines if PHASE.match(line)]
    # One line per phase, each as its last update drew it: a bar, then one "(time)" at its end.
    phases = [PHASE.match(line).group(1) for line in progress]  # type: ignore[union-attr]
    assert phases == ["segment 1/2", "exact_dedup: deciding", "segment 2/2", "writing shards"], screen
    for line in progress:
        assert line.count("(") == 1 and line.count(")") == 1 and line.endswith(")"), line
    header = next(line for line in lines if line.startswith("stage "))
    assert header.split() == ["stage", "in", "kept", "dropped", "worker", "s"]
    assert any("summed over the workers" in line for line in lines), screen
    assert re.search(r"wall time of the run: [\d.]+ s", " ".join(lines)), screen


def test_progress_and_tables_are_plain_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    for quiet in ([], ["--quiet"]):
        result = subprocess.run(tokpipe("clean", str(inputs), "-o", str(tmp_path / f"out{len(quiet)}"), "-w", "2",
                                        *quiet), capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "\r" not in result.stderr and "\x1b" not in result.stderr
        assert (result.stderr == "") == bool(quiet), result.stderr


def test_stats_fits_the_terminal_width(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    out = tmp_path / "out"
    ran = subprocess.run(tokpipe("clean", str(inputs), "-c", str(tmp_path / "p.yaml"), "-o", str(out), "-q"),
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    result = subprocess.run(tokpipe("stats", str(out)), capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80, result.stdout
    # Every drop reason is still there, with its count.
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    text = " ".join(result.stdout.split())
    for stage, stats in manifest["stats"].items():
        for key, count in stats.items():
            if key.startswith("dropped_"):
                assert f"{key.removeprefix('dropped_')} {count:,}" in text, (stage, key)
    assert re.search(r"wall time of the run: [\d.]+ s", text)


@pytest.mark.parametrize("columns", [30, 60, 80, 200])
def test_a_progress_line_never_reaches_the_last_column(columns: int) -> None:
    for update in (ProgressUpdate("segment 12/12", 123_456_789, 987_654_321, "bytes", 1_234_567),
                   ProgressUpdate("writing shards", 3, 16, "units"), ProgressUpdate("segment 1/1", 0, 0, "bytes")):
        for elapsed in (0.0, 3.5, 4000.0):
            line = Progress.line(update, elapsed, columns)
            assert 0 < len(line) < columns, line


def test_the_documents_count_shows_once_a_task_has_counted_some() -> None:
    # Documents are counted as tasks finish: while the first one reads, the bytes move and no
    # "0 docs" claims that nothing was read.
    reading = Progress.line(ProgressUpdate("segment 1/2", 50_000_000, 300_000_000, "bytes", 0), 2.0, 120)
    assert "50.0/300.0 MB" in reading and "docs" not in reading
    counted = Progress.line(ProgressUpdate("segment 1/2", 100_000_000, 300_000_000, "bytes", 12_345), 4.0, 120)
    assert "12,345 docs" in counted


def test_the_stats_table_wraps_long_details_below_it() -> None:
    reasons = {f"dropped_reason_number_{n}": n * 1000 for n in range(12)}
    stats = {"read": {"in": 10, "kept": 10, "seconds": 0.5},
             "a_stage_with_many_reasons": {"in": 10, "kept": 1, **reasons, "seconds": 101.25}}
    text = stats_table(stats, wall_seconds=62.0, columns=60)
    assert max(len(line) for line in text.splitlines()) < 60
    joined = " ".join(text.split())
    assert all(f"{k.removeprefix('dropped_')} {v:,}" in joined for k, v in reasons.items())
    assert "101.2" in text and "62.0 s" in text


def test_the_wall_time_says_whose_it_is() -> None:
    """A command that resumed a run (or reran a finished one) took less time than the run: the
    note names this command's time and the run's, over all its calls (issue 22: it called this
    command's time the run's)."""
    stats = {"read": {"in": 10, "kept": 10, "seconds": 0.5}}
    alone = " ".join(stats_table(stats, wall_seconds=62.0, columns=200).split())
    assert "wall time of the run: 62.0 s" in alone and "this command" not in alone
    resumed = " ".join(stats_table(stats, wall_seconds=2.0, columns=200, run_wall_seconds=1062.0).split())
    assert "wall time of this command: 2.0 s, of the run over all its calls: 1,062.0 s" in resumed
    assert "wall time of the run: 2.0" not in resumed


def test_fitted_table_splits_columns_and_cuts_a_cell_wider_than_the_terminal() -> None:
    from tokpipe.cli.display import fitted_table

    rows = [("name", "first", "second", "third"), ("a", "1" * 12, "2" * 12, "x" * 100)]
    text = fitted_table(rows, left=1, columns=34)
    assert all(len(line) < 34 for line in text.splitlines())
    blocks = text.split("\n\n")
    # Each block repeats the first column; every header and the start of every cell is kept.
    assert all(block.startswith("name") for block in blocks)
    for cell in ("first", "second", "third", "1" * 12, "2" * 12, "x" * 20):
        assert cell in text
    assert "…" in text and "x" * 100 not in text
    assert fitted_table(rows[:1] + [("a", "1", "2", "3")], left=1, columns=80).count("\n\n") == 0
