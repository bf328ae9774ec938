"""Task planning, and byte-range tasks reading exactly what a whole-file read does."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tokpipe.errors import CorpusError
from tokpipe.pipeline.readers import ReadError, ReaderOptions, Task, plan_tasks, read_task

from .helpers import read_all


def _write_mixed_jsonl(path: Path) -> None:
    rng = random.Random(1)
    lines = []
    for n in range(400):
        kind = rng.random()
        if kind < 0.05:
            lines.append("")
        elif kind < 0.1:
            lines.append("{not json")
        else:
            lines.append(json.dumps({"text": "w" * rng.randint(0, 300) + f" {n}"}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _read_tasks(tasks: list[Task], options: ReaderOptions) -> tuple[list[tuple[str, str]], list[ReadError]]:
    errors: list[ReadError] = []
    rows = []
    for task in tasks:
        for batch in read_task(task, options, errors.append):
            rows.extend(zip(batch.column("id").to_pylist(), batch.column("text").to_pylist()))
    return rows, errors


def test_planned_ranges_read_like_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    _write_mixed_jsonl(path)
    whole = ReaderOptions()
    split = ReaderOptions(task_bytes=500)

    tasks = plan_tasks([path], split)

    assert len(tasks) > 20
    assert [task.index for task in tasks] == list(range(len(tasks)))
    assert tasks[0].start == 0 and tasks[-1].end is None
    data = path.read_bytes()
    for before, after in zip(tasks, tasks[1:]):
        assert before.end == after.start and data[after.start - 1 : after.start] == b"\n"
    assert _read_tasks(tasks, split) == _read_tasks(plan_tasks([path], whole), whole)


def test_arbitrary_unaligned_ranges_read_each_line_once(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    _write_mixed_jsonl(path)
    size = path.stat().st_size
    cuts = sorted(random.Random(2).sample(range(1, size), 60))
    bounds = list(zip([0] + cuts, cuts + [None]))
    tasks = [Task(index, str(path), start, end) for index, (start, end) in enumerate(bounds)]
    options = ReaderOptions()
    # Read the ranges in reverse too, so no range relies on its predecessor's checkpoint.
    assert _read_tasks(tasks, options) == _read_tasks([Task(0, str(path))], options)
    reversed_rows, reversed_errors = _read_tasks(tasks[::-1], options)
    whole_rows, whole_errors = _read_tasks([Task(0, str(path))], options)
    assert sorted(reversed_rows) == sorted(whole_rows) and len(reversed_errors) == len(whole_errors)


def test_text_lines_are_split_but_not_whole_files(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    lines = [f"line {n} " + "z" * (n % 37) for n in range(300)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    by_lines = ReaderOptions(split="lines", task_bytes=256)
    assert len(plan_tasks([path], by_lines)) > 10
    assert len(plan_tasks([path], ReaderOptions(split="none", task_bytes=256))) == 1
    rows, errors = _read_tasks(plan_tasks([path], by_lines), by_lines)
    assert errors == []
    assert rows == [(f"{path}:{n + 1}", line) for n, line in enumerate(lines)]


def test_compressed_files_are_never_split(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "x"}\n' * 10000))
    assert plan_tasks([path], ReaderOptions(task_bytes=100)) == [Task(0, str(path))]


def test_folders_globs_and_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    for name in ["b/2.jsonl", "b/1.txt", "a/deep/3.parquet", "a/0.jsonl.zst", "a/.secret.jsonl", ".hidden/x.jsonl", "b/notes.md"]:
        (tmp_path / name).write_bytes(b"x")
    tasks = plan_tasks([tmp_path], ReaderOptions())
    assert [task.path for task in tasks] == [str(tmp_path / name) for name in ["a/0.jsonl.zst", "a/deep/3.parquet", "b/1.txt", "b/2.jsonl"]]
    # A glob, then a file already named by the glob: read once, where it first appears.
    tasks = plan_tasks([str(tmp_path / "b" / "*"), tmp_path / "b" / "2.jsonl", tmp_path / "a" / "0.jsonl.zst"], ReaderOptions())
    assert [(task.index, task.path) for task in tasks] == [
        (0, str(tmp_path / "b" / "1.txt")),
        (1, str(tmp_path / "b" / "2.jsonl")),
        (2, str(tmp_path / "a" / "0.jsonl.zst")),
    ]
    assert [task.path for task in plan_tasks([str(tmp_path / "**" / "*.parquet")], ReaderOptions())] == [str(tmp_path / "a" / "deep" / "3.parquet")]


def test_missing_inputs_and_no_files_raise(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist: .*nowhere.jsonl"):
        plan_tasks([tmp_path / "nowhere.jsonl"], ReaderOptions())
    with pytest.raises(CorpusError, match="matches nothing"):
        plan_tasks([str(tmp_path / "*.jsonl")], ReaderOptions())
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no input files"):
        plan_tasks([tmp_path / "empty"], ReaderOptions())
    (tmp_path / "notes.md").write_text("x")
    with pytest.raises(CorpusError, match="unknown input format"):
        plan_tasks([tmp_path / "notes.md"], ReaderOptions())


def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "gone.jsonl"
    path.write_text('{"text": "x"}\n')
    tasks = plan_tasks([path], ReaderOptions())
    path.unlink()  # vanished between planning and reading
    rows, errors = [], []
    for batch in read_task(tasks[0], ReaderOptions(), errors.append):
        rows.extend(batch.to_pylist())
    assert rows == [] and [(error.location, error.reason) for error in errors] == [("", "unreadable_file")]


def test_read_all_helper_sees_every_format(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"text": "beta"}\n', encoding="utf-8")
    rows, errors = read_all([tmp_path])
    assert errors == [] and [row["text"] for row in rows] == ["alpha", "beta"]


# ---------------------------------------------------------------------------------------------
# Globs: glob.glob's matches, without its endless walk through looping links.


def _tree(root: Path) -> None:
    for rel in ("a.jsonl", "b.txt", "sub/c.jsonl", "sub/deeper/d.jsonl", "sub/deeper/e.parquet", ".hidden/f.jsonl",
                "sub/.g.jsonl", "x[1]/h.jsonl", "other/i.jsonl.gz", "other/j.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}\n", encoding="utf-8")


@pytest.mark.parametrize("pattern", ["**/*.jsonl", "**", "sub/**/*.jsonl", "**/deeper/*", "*/*.jsonl", "**/[a-d].jsonl",
                                     "**/[!a]*.jsonl", "**/?.jsonl", "**/.g.jsonl", "sub/**", "**/*.json*",
                                     "**/sub[!x]c.jsonl", "**/[^s]ub/*.jsonl", "[!o]*/*.jsonl", "*/*/*", "x[[]1]/*",
                                     "sub/*", "**/", "*/", "*.jsonl", "**/d*/*.parquet"])
def test_glob_matches_what_glob_matches(tmp_path: Path, pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import glob as stdlib_glob

    from tokpipe.pipeline.readers.tasks import _glob

    _tree(tmp_path)
    assert _glob(f"{tmp_path}/{pattern}") == sorted(stdlib_glob.glob(f"{tmp_path}/{pattern}", recursive=True))
    monkeypatch.chdir(tmp_path)
    assert _glob(pattern) == sorted(stdlib_glob.glob(pattern, recursive=True))


def test_a_glob_over_looping_links_visits_each_folder_once(tmp_path: Path) -> None:
    # Two links back up the tree: glob.glob lists 2**40 paths and never returns (issue 19).
    _tree(tmp_path)
    (tmp_path / "sub" / "up1").symlink_to("..")
    (tmp_path / "sub" / "up2").symlink_to("..")
    (tmp_path / "linked").symlink_to("sub/deeper")
    code = ("import sys; from tokpipe.pipeline.readers import plan_tasks, ReaderOptions; "
            "print('\\n'.join(t.path for t in plan_tasks([sys.argv[1]], ReaderOptions())))")
    # A generous limit: only a hang reaches it.
    result = subprocess.run([sys.executable, "-c", code, f"{tmp_path}/**/*.jsonl"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    paths = result.stdout.split()
    # Each file once, by the first way in, in sorted order ("linked" before "sub"), whatever
    # order the filesystem lists them in.
    assert paths == [str(tmp_path / rel) for rel in ("a.jsonl", "linked/d.jsonl", "sub/c.jsonl", "x[1]/h.jsonl")]


# ---------------------------------------------------------------------------------------------
# Unreadable folders: counted and recorded, never silently skipped.


def _without_root_privileges() -> list[str]:
    """A command prefix under which permissions apply: root reads any file, unless the
    capabilities that let it are dropped (setpriv, util-linux)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise FileNotFoundError("running as root, the unreadable-folder tests need util-linux's setpriv")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_a_glob_records_the_unreadable_folders_it_could_match_in(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    for rel in ("a/good.jsonl", "locked/x.jsonl", "other/x.txt"):
        (inputs / rel).parent.mkdir(parents=True, exist_ok=True)
        (inputs / rel).write_text('{"text": "t"}\n', encoding="utf-8")
    (inputs / "locked").chmod(0)
    (inputs / "other").chmod(0)
    code = ("import sys; from tokpipe.pipeline.readers import plan_tasks, ReaderOptions; "
            "print('\\n'.join(t.path for t in plan_tasks(sys.argv[1:], ReaderOptions())))")
    try:
        result = subprocess.run([*_without_root_privileges(), sys.executable, "-c", code, f"{inputs}/[!o]*/*.jsonl"],
                                capture_output=True, text=True)
    finally:
        (inputs / "locked").chmod(0o755)
        (inputs / "other").chmod(0o755)
    assert result.returncode == 0, result.stderr
    # "other" cannot hold a match of "[!o]*": it is not entered, and not reported.
    assert result.stdout.split() == [str(inputs / "a" / "good.jsonl"), str(inputs / "locked")]


def test_an_unreadable_folder_is_recorded_with_its_error(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    (inputs / "locked").mkdir(parents=True)
    text = "A readable document with enough words to pass the length filter of the default pipeline. " * 3
    (inputs / "good.jsonl").write_text(json.dumps({"id": "good", "text": text}) + "\n", encoding="utf-8")
    (inputs / "locked" / "hidden.jsonl").write_text(json.dumps({"id": "hidden", "text": text + "!"}) + "\n",
                                                    encoding="utf-8")
    (inputs / "locked").chmod(0)
    try:
        out = tmp_path / "out"
        given = inputs / "locked" / "hidden.jsonl"  # a file inside it, named directly
        result = subprocess.run([*_without_root_privileges(), sys.executable, "-c",
                                 "from tokpipe.cli import main; main()", "clean", str(inputs), str(given), "-o",
                                 str(out), "-w", "1", "-q"], capture_output=True, text=True)
    finally:
        (inputs / "locked").chmod(0o755)
    assert result.returncode == 0, result.stderr
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(e["path"], e["reason"]) for e in errors] == [(str(inputs / "locked"), "unreadable_folder"),
                                                         (str(given), "unreadable_file")]
    assert all("PermissionError" in e["detail"] for e in errors)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["stats"]["read"]["dropped_unreadable_folder"] == 1
    assert manifest["totals"]["rows"] == 1
