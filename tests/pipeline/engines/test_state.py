"""``engines.state``: a :class:`RunState` puts a run's files where its module docstring's
layout says, tells committed tasks from the ones to redo by their markers and the files they
list, merges the tasks' stats and read errors, clears an output folder but its lock, and
refuses to resume over inputs that changed.

Expected paths are the documented layout written out here, expected sums are added up by
hand, and files are looked at without the module under test (``os.walk``, ``json``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from tokpipe.errors import PipelineError
from tokpipe.pipeline.engines.state import READ_STATS, RunState, identity_digest, stage_folders
from tokpipe.pipeline.readers import Task


def tree(root: Path) -> list[str]:
    """Every path under ``root``, relative to it, folders with a trailing slash."""
    found = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root)
        found += [f"{(base / d).as_posix()}/" for d in dirs] + [(base / f).as_posix() for f in files]
    return sorted(found)


def arrow_file(path: Path, rows: int) -> int:
    """An Arrow IPC file (magic bytes at both ends) of ``rows`` rows; returns its size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": [f"doc{i}" for i in range(rows)]})
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
    return path.stat().st_size


def test_a_run_begins_with_the_documented_layout(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    out = tmp_path / "out"
    state = RunState(out)
    assert not state.exists() and state.identity() is None
    tasks = [Task(0, str(source), 0, 14), Task(1, str(source), 14, None)]
    identity = {"config": {"stages": []}, "inputs": [str(source)]}
    state.begin(identity, tasks, segments=2)
    assert state.exists()
    assert tree(out) == [".tokpipe/", ".tokpipe/global0/", ".tokpipe/global1/", ".tokpipe/inputs.json",
                         ".tokpipe/pack/", ".tokpipe/run.json", ".tokpipe/seg0/", ".tokpipe/seg1/",
                         ".tokpipe/tasks.json"]
    # run.json records the output folder beside the identity (a staging folder is reused or
    # replaced only for the output it was begun for).
    assert json.loads((out / ".tokpipe" / "run.json").read_text(encoding="utf-8")) == {**identity,
                                                                                      "output": str(out)}
    assert state.identity() == identity and state.begun_for_this_output()
    assert not RunState(tmp_path / "other", out / ".tokpipe").begun_for_this_output()
    assert state.tasks() == tasks
    # Each input file once, with its size and modification time in nanoseconds.
    info = os.stat(source)
    assert json.loads((out / ".tokpipe" / "inputs.json").read_text(encoding="utf-8")) == {
        str(source): [info.st_size, info.st_mtime_ns]}
    assert state.lock().path == out / ".tokpipe" / "lock.json"


def test_each_file_of_a_task_goes_where_the_layout_says(tmp_path: Path) -> None:
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({}, [], segments=3)
    before = set(tree(out))
    state.write_summary(2, 41, {"task": 41})
    assert state.write_errors(41, ['{"reason": "x"}\n']) == ("000041.errors.jsonl", 16)
    state.write_verdicts(1, 41, pa.record_batch({"keep": [True, False]}))
    state.write_decision(1, {"in": 2, "kept": 1})
    state.begin_pack({"shard_rows": 10})
    state.write_pack(3, {"shards": ["part-00003-00000.parquet"]})
    assert sorted(set(tree(out)) - before) == [".tokpipe/global1/000041.parquet", ".tokpipe/global1/done.json",
                                               ".tokpipe/pack/3.json", ".tokpipe/pack/params.json",
                                               ".tokpipe/seg0/000041.errors.jsonl", ".tokpipe/seg2/000041.json"]
    root = out / ".tokpipe"
    assert json.loads((root / "seg2" / "000041.json").read_text(encoding="utf-8")) == {"task": 41}
    assert (root / "seg0" / "000041.errors.jsonl").read_text(encoding="utf-8") == '{"reason": "x"}\n'
    assert state.summary(2, 41) == {"task": 41}
    assert state.has_marker(2, 41) and not state.has_marker(0, 41) and not state.has_marker(2, 40)
    assert state.decided(1) and not state.decided(0) and state.decision_stats(1) == {"in": 2, "kept": 1}
    assert state.verdicts(1, 41).column("keep").to_pylist() == [True, False]
    assert state.packed(3) and not state.packed(0) and state.pack(3) == {"shards": ["part-00003-00000.parquet"]}
    # The folders the run's steps write into.
    assert state.staging_dir(1, "kept") == root / "seg1" / "kept"
    assert state.staging_dir(0, "rejected") == root / "seg0" / "rejected"
    assert state.staged_files(1, {"kept_files": ["part-000041-0.arrow", "part-000041-1.arrow"]}, "kept") == [
        root / "seg1" / "kept" / "part-000041-0.arrow", root / "seg1" / "kept" / "part-000041-1.arrow"]
    assert state.decision_scratch(1) == root / "global1" / "scratch"
    assert state.shuffle_scratch() == root / "shuffle"
    state.drop_marker(2, 41)
    assert not (root / "seg2" / "000041.json").exists()


def test_committed_and_pending_follow_the_markers_and_the_files_they_list(tmp_path: Path) -> None:
    """A task is redone when its marker is missing or unreadable, or a file it lists has
    another size than it records or (Arrow, Parquet) lost its magic bytes; a marker that
    lists no sizes (an older tokpipe's) is trusted as it was."""
    state = RunState(tmp_path / "out")
    tasks = [Task(t, "in.jsonl") for t in range(7)]
    state.begin({}, [], segments=1)
    seg = tmp_path / "out" / ".tokpipe" / "seg0"
    for t in range(7):
        name = f"part-{t:06d}-0.arrow"
        sizes = {f"kept/{name}": arrow_file(seg / "kept" / name, 3 + t)}
        errors, size = state.write_errors(t, ['{"reason": "unreadable"}\n'] * t)
        sizes[errors] = size
        if t != 1:  # task 1 never finished: no marker
            state.write_summary(0, t, {"task": t, "kept_files": [name], "sizes": sizes})
    kept = seg / "kept"
    with open(kept / "part-000002-0.arrow", "r+b") as f:  # came back short
        f.truncate(os.path.getsize(kept / "part-000002-0.arrow") // 2)
    (kept / "part-000003-0.arrow").write_bytes(bytes(os.path.getsize(kept / "part-000003-0.arrow")))  # zero-filled
    (seg / "000004.json").write_bytes(b"")  # a marker cut to nothing
    state.write_summary(0, 5, {"task": 5, "kept_files": ["part-000005-0.arrow"]})  # an older marker: no sizes
    (kept / "part-000005-0.arrow").unlink()
    with open(seg / "000006.errors.jsonl", "ab") as f:  # a file longer than its marker says
        f.write(b'{"reason": "late"}\n')
    assert [t for t in range(7) if state.committed(0, t)] == [0, 5]

    seen = []

    def refuse(given: RunState, k: int, summary: dict[str, object]) -> bool:
        seen.append((given, k, summary["task"]))
        return False

    assert not state.committed(0, 0, refuse) and seen == [(state, 0, 0)]

    assert [t.index for t in state.pending(0, tasks)] == [1, 2, 3, 4, 6]
    # The markers of the damaged tasks are gone, so nothing reads their files before they are redone.
    assert sorted(p.name for p in seg.glob("*.json")) == ["000000.json", "000005.json"]


def test_merged_stats_sum_every_tasks_markers(tmp_path: Path) -> None:
    state = RunState(tmp_path / "out")
    state.begin({}, [], segments=2)
    tasks = [Task(0, "a.jsonl"), Task(1, "b.jsonl")]
    state.write_summary(0, 0, {"stats": {
        "read": {"in": 10, "kept": 9, "dropped_unreadable": 1, "seconds": 0.5},
        "length_filter": {"in": 9, "kept": 7, "dropped_too_short": 2, "bytes_removed": 30, "seconds": 0.25}}})
    state.write_summary(0, 1, {"stats": {
        "read": {"in": 5, "kept": 5, "seconds": 0.25},
        "length_filter": {"in": 5, "kept": 4, "dropped_too_short": 1, "bytes_removed": 12, "seconds": 0.125}}})
    state.write_summary(1, 0, {"stats": {"quality": {"in": 4, "kept": 3, "dropped_low": 1, "seconds": 1.0}}})
    state.write_summary(1, 1, {"stats": {"quality": {"in": 3, "kept": 3, "seconds": 0.5}}})
    # Segment 1 ends at a global stage: its decision's stats are taken as they are.
    state.write_decision(1, {"in": 6, "kept": 5, "dropped_duplicate": 1, "seconds": 2.0})
    merged = state.merged_stats(tasks, [None, "dedup"])
    assert {name: s.as_dict() for name, s in merged.items()} == {
        "read": {"in": 15, "kept": 14, "dropped_unreadable": 1, "seconds": 0.75},
        "length_filter": {"in": 14, "kept": 11, "dropped_too_short": 3, "bytes_removed": 42, "seconds": 0.375},
        "quality": {"in": 7, "kept": 6, "dropped_low": 1, "seconds": 1.5},
        "dedup": {"in": 6, "kept": 5, "dropped_duplicate": 1, "seconds": 2.0},
    }
    # Without a global stage closing segment 1, no decision is read.
    assert sorted(state.merged_stats(tasks, [None, None])) == ["length_filter", "quality", "read"]
    # The readers' stats are there even when no marker has any.
    state.write_summary(0, 0, {"stats": {}})
    state.write_summary(0, 1, {"stats": {}})
    assert {name: s.as_dict() for name, s in state.merged_stats(tasks, [None]).items()} == {
        READ_STATS: {"in": 0, "kept": 0, "seconds": 0.0}}


def test_merge_errors_writes_every_tasks_errors_in_task_order(tmp_path: Path) -> None:
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({}, [], segments=1)
    tasks = [Task(0, "a.jsonl"), Task(1, "b.jsonl"), Task(2, "c.jsonl")]
    # Written in another order than the tasks'.
    state.write_errors(2, ['{"task": 2}\n'])
    state.write_errors(0, ['{"task": 0, "line": 1}\n', '{"task": 0, "line": 9}\n'])
    state.write_errors(1, [])
    expected = b'{"task": 0, "line": 1}\n{"task": 0, "line": 9}\n{"task": 2}\n'
    assert state.merge_errors(tasks) == (3, None)
    assert (out / "errors.jsonl").read_bytes() == expected
    assert state.merge_errors(tasks, digest=True) == (3, (len(expected), hashlib.sha256(expected).hexdigest()))
    assert sorted(p.name for p in out.iterdir()) == [".tokpipe", "errors.jsonl"]


def test_clear_deletes_everything_but_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "out"
    root = out / ".tokpipe"
    root.mkdir(parents=True)
    (root / "lock.json").write_text("{}", encoding="utf-8")
    state = RunState(out)
    assert not state.holds_anything()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not the run's", encoding="utf-8")
    state.begin({}, [], segments=1)
    (root / "seg0" / "kept").mkdir()
    (root / "seg0" / "kept" / "part-000000-0.arrow").write_bytes(b"ARROW1")
    (out / "part-00000-00000.parquet").write_bytes(b"PAR1")
    (out / "rejected").mkdir()
    (out / "linked").symlink_to(elsewhere)  # a link to a folder: the link goes, not what it points to
    assert state.holds_anything()
    state.clear()
    assert tree(out) == [".tokpipe/", ".tokpipe/lock.json"]
    assert not state.holds_anything()
    assert (elsewhere / "keep.txt").read_text(encoding="utf-8") == "not the run's"
    state.discard_if_empty()  # the lock is still in it
    assert tree(out) == [".tokpipe/", ".tokpipe/lock.json"]
    (root / "lock.json").unlink()
    state.discard_if_empty()
    assert tree(out) == []


def test_stale_shards_and_a_changed_cut(tmp_path: Path) -> None:
    """A group's final shards are ``part-{w:05d}-*.parquet`` in the output folder and in
    ``rejected/``; another cut than the one begun redoes every packed group."""
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({}, [], segments=1)
    (out / "rejected").mkdir()
    for name in ("part-00000-00000.parquet", "part-00001-00000.parquet", "part-00001-00001.parquet",
                 "part-00002-00000.parquet", "part-00010-00000.parquet", "rejected/part-00001-00000.parquet",
                 "rejected/part-00002-00000.parquet", "errors.jsonl"):
        (out / name).write_bytes(b"x")
    state.remove_group_shards(1)
    state.remove_shards_past(2)
    assert [p for p in tree(out) if not p.startswith(".tokpipe")] == ["errors.jsonl", "part-00000-00000.parquet",
                                                                      "rejected/"]

    state.begin_pack({"shard_rows": 10})
    state.write_pack(0, {"shards": []})
    state.write_pack(1, {"shards": []})
    state.begin_pack({"shard_rows": 10})  # the same cut: the packed groups stand
    assert state.packed(0) and state.packed(1)
    state.begin_pack({"shard_rows": 20})
    assert not state.packed(0) and not state.packed(1)
    assert json.loads((out / ".tokpipe" / "pack" / "params.json").read_text(encoding="utf-8")) == {"shard_rows": 20}


def test_stale_shards_in_the_data_folder(tmp_path: Path) -> None:
    """The kept shards live in ``OUT/data``: a group's stale shards there go too, and so do
    those an older tokpipe left in ``OUT`` itself."""
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({}, [], segments=1)
    (out / "data").mkdir()
    (out / "rejected").mkdir()
    for name in ("data/part-00000-00000.parquet", "data/part-00001-00000.parquet", "data/part-00003-00000.jsonl.gz",
                 "part-00001-00000.parquet", "rejected/part-00001-00000.parquet", "data/notes.txt"):
        (out / name).write_bytes(b"x")
    state.remove_group_shards(1)
    state.remove_shards_past(2)
    assert [p for p in tree(out) if not p.startswith(".tokpipe")] == ["data/", "data/notes.txt",
                                                                      "data/part-00000-00000.parquet", "rejected/"]


def test_stale_shards_in_the_stage_folders_of_rejected(tmp_path: Path) -> None:
    """With ``rejected_by_stage`` a group's rejected shards are in ``rejected/STAGE/``: its
    stale ones there go too, and nothing else in those folders."""
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({}, [], segments=1)
    for folder in ("rejected/length_filter", "rejected/exact_dedup-2"):
        (out / folder).mkdir(parents=True)
    for name in ("rejected/length_filter/part-00000-00000.parquet", "rejected/length_filter/part-00001-00000.parquet",
                 "rejected/exact_dedup-2/part-00001-00003.jsonl", "rejected/exact_dedup-2/part-00002-00000.parquet",
                 "rejected/exact_dedup-2/notes.txt"):
        (out / name).write_bytes(b"x")
    state.remove_group_shards(1)
    state.remove_shards_past(2)
    assert [p for p in tree(out) if not p.startswith(".tokpipe")] == [
        "rejected/", "rejected/exact_dedup-2/", "rejected/exact_dedup-2/notes.txt", "rejected/length_filter/",
        "rejected/length_filter/part-00000-00000.parquet"]
    assert state.rejected_dir("gopher_quality") == out / "rejected" / "gopher_quality"


def test_stage_folders_are_the_types_made_unique_and_safe() -> None:
    assert stage_folders(["length_filter", "exact_dedup", "length_filter", "length_filter"]) == [
        "length_filter", "exact_dedup", "length_filter-2", "length_filter-3"]
    assert stage_folders(["my.stages:Short", "my.stages_Short", "pii"]) == ["my.stages_Short", "my.stages_Short-2",
                                                                            "pii"]


def test_remove_staging_leaves_the_lock_and_the_output(tmp_path: Path) -> None:
    """After a run: ``OUT/.tokpipe`` keeps only the lock (given back later), the output is
    untouched, and the folder then reads as finished when its manifest records a run."""
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({"config": 1}, [], segments=2)
    (out / ".tokpipe" / "lock.json").write_text("{}", encoding="utf-8")
    (out / ".tokpipe" / "seg0" / "kept").mkdir()
    (out / ".tokpipe" / "seg0" / "kept" / "part-000000-0.arrow").write_bytes(b"ARROW1")
    (out / "data").mkdir()
    (out / "data" / "part-00000-00000.parquet").write_bytes(b"PAR1")
    manifest = {"format": "tokpipe-dataset", "run": identity_digest({"config": 1})}
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert state.finished_manifest() is None  # its staging is still there: a run to resume
    state.remove_staging()
    assert tree(out) == [".tokpipe/", ".tokpipe/lock.json", "data/", "data/part-00000-00000.parquet",
                         "manifest.json"]
    assert state.identity() is None and state.finished_manifest() == manifest
    (out / ".tokpipe" / "lock.json").unlink()
    state.discard_if_empty()
    assert tree(out) == ["data/", "data/part-00000-00000.parquet", "manifest.json"]
    # A manifest that records no run (an older tokpipe's) is no finished run to rerun.
    (out / "manifest.json").write_text(json.dumps({"format": "tokpipe-dataset"}), encoding="utf-8")
    assert state.finished_manifest() is None


def test_remove_staging_elsewhere_keeps_the_folder_and_what_is_not_tokpipes(tmp_path: Path) -> None:
    """A ``--staging-dir`` away from the output loses what tokpipe wrote in it, but the
    folder the user named stays, and so does anything of theirs in it (issue 22: it used to
    go whole); the lock is in ``OUT/.tokpipe``."""
    out, staging = tmp_path / "out", tmp_path / "staging"
    staging.mkdir()
    (staging / "mine.txt").write_text("the user's", encoding="utf-8")
    (staging / "notes").mkdir()
    state = RunState(out, staging)
    state.begin({}, [], segments=1)
    (out / ".tokpipe").mkdir(parents=True)
    (out / ".tokpipe" / "lock.json").write_text("{}", encoding="utf-8")
    (staging / "seg0" / "000000.json").write_text("{}", encoding="utf-8")
    (staging / "shuffle").mkdir()
    (staging / "output").mkdir()
    (staging / ".run.json.tmp").write_text("{}", encoding="utf-8")
    state.remove_staging()
    assert tree(staging) == ["mine.txt", "notes/"]
    assert tree(out) == [".tokpipe/", ".tokpipe/lock.json"]
    state.remove_staging()  # again (a rerun finishing a removal cut short): nothing to do
    (staging / "mine.txt").unlink()
    (staging / "notes").rmdir()
    state.begin({}, [], segments=1)
    state.remove_staging()
    assert staging.is_dir() and tree(staging) == []  # an empty folder the user named stays too


def test_overwrite_clears_only_tokpipes_entries_of_a_staging_folder(tmp_path: Path) -> None:
    """``--overwrite`` empties the output folder, but in a ``--staging-dir`` it removes only
    what tokpipe wrote there (issue 22: it used to empty the folder)."""
    out, staging = tmp_path / "out", tmp_path / "staging"
    staging.mkdir()
    (staging / "mine.txt").write_text("the user's", encoding="utf-8")
    state = RunState(out, staging)
    state.begin({}, [], segments=1)
    (out / "data").mkdir(parents=True)
    (out / "notes.txt").write_text("x", encoding="utf-8")
    state.clear()
    assert tree(staging) == ["mine.txt"] and tree(out) == []


def test_remove_staging_of_the_default_local_staging_removes_its_folder(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The local staging tokpipe picks for an output in a bucket (``local_staging``) is its
    own: it goes whole once empty."""
    from tokpipe.pipeline.engines.state import local_staging
    from tokpipe.storage import location

    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    out = location("s3://bucket/out")
    staging = local_staging(out)
    assert staging is not None
    state = RunState(out, staging)
    for name in ("seg0", "pack"):
        (staging / name).mkdir(parents=True)
    (staging / "run.json").write_text("{}", encoding="utf-8")
    state.remove_staging()
    assert not staging.exists()


def test_stale_shards_of_every_output_format(tmp_path: Path) -> None:
    """JSON Lines final shards (``--output-format``) are stale shards too; a file that only
    starts like a shard is left alone."""
    out = tmp_path / "out"
    state = RunState(out)
    state.begin({}, [], segments=1)
    (out / "rejected").mkdir()
    for name in ("part-00000-00000.jsonl.gz", "part-00001-00000.jsonl.zst", "part-00002-00000.jsonl",
                 "rejected/part-00001-00000.jsonl.gz", "rejected/part-00003-00000.jsonl", "part-notes.txt"):
        (out / name).write_bytes(b"x")
    state.remove_group_shards(1)
    state.remove_shards_past(2)
    assert [p for p in tree(out) if not p.startswith(".tokpipe")] == ["part-00000-00000.jsonl.gz", "part-notes.txt",
                                                                      "rejected/"]


def test_check_inputs_refuses_inputs_changed_since_the_run_began(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"text": "one"}\n', encoding="utf-8")
    b.write_text('{"text": "two"}\n', encoding="utf-8")
    state = RunState(tmp_path / "out")
    state.begin({}, [Task(0, str(a)), Task(1, str(b))], segments=1)
    state.check_inputs()  # unchanged
    began = os.stat(a)

    # The same size, another modification time.
    os.utime(a, ns=(began.st_atime_ns, began.st_mtime_ns + 10**9))
    with pytest.raises(PipelineError, match="a.jsonl changed since the run began") as error:
        state.check_inputs()
    assert "\n" not in str(error.value)
    os.utime(a, ns=(began.st_atime_ns, began.st_mtime_ns))
    state.check_inputs()  # as it was when the run began

    # Another size, the same modification time.
    with open(a, "a", encoding="utf-8") as f:
        f.write('{"text": "three"}\n')
    os.utime(a, ns=(began.st_atime_ns, began.st_mtime_ns))
    with pytest.raises(PipelineError, match="a.jsonl changed since the run began"):
        state.check_inputs()
    a.write_text('{"text": "one"}\n', encoding="utf-8")
    os.utime(a, ns=(began.st_atime_ns, began.st_mtime_ns))
    state.check_inputs()

    b.unlink()
    with pytest.raises(PipelineError, match="b.jsonl is gone or unreadable"):
        state.check_inputs()
    # A run begun by an older tokpipe recorded no inputs: nothing to check.
    (tmp_path / "out" / ".tokpipe" / "inputs.json").unlink()
    state.check_inputs()


def test_work_units_count_the_input_sizes_recorded_at_the_start(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress weighs each task by its file's size as the run recorded it: no ``stat`` per
    task and segment (a request each, for a file in a bucket)."""
    from tokpipe import storage
    from tokpipe.pipeline.config import parse_config
    from tokpipe.pipeline.engines import LocalExecutor, RunOptions
    from tokpipe.pipeline.engines.units import ParquetStaging

    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    files[0].write_text('{"text": "one"}\n', encoding="utf-8")
    files[1].write_text('{"text": "two two"}\n{"text": "three"}\n', encoding="utf-8")
    executor = LocalExecutor(parse_config({"stages": [{"type": "normalize"}]}), [str(p) for p in files],
                             tmp_path / "out", RunOptions())
    tasks = executor.plan()
    try:
        assert executor.state.input_sizes() == {str(p): p.stat().st_size for p in files}

        def no_stat(path: object) -> None:
            raise AssertionError(f"{path} was looked up again")

        monkeypatch.setattr(storage, "version", no_stat)
        units = executor.segment_units(0, tasks, ParquetStaging())
        assert [u.size for u in units] == [p.stat().st_size for p in files]
    finally:
        executor.release()
