"""A run's state on disk: the one module that knows the layout of an output folder's
``.tokpipe`` state and of the files the run merges from it.

    OUT/.tokpipe/lock.json            the run's lock (``engines.lock``)
    OUT/.tokpipe/run.json             what this folder is for (config, inputs, reader options) and
                                      the output folder it was begun for
    OUT/.tokpipe/tasks.json           the planned tasks, fixed at the first run
    OUT/.tokpipe/inputs.json          each input file's size and mtime when the run began
    OUT/.tokpipe/wall.json            the wall time of the run's earlier calls (a resume adds its own)
    OUT/.tokpipe/seg{k}/kept/part-{t}-*      task t's documents after segment k (plus the next
                                             global stage's key column), or, for ``tokpipe
                                             tokenize``, its ids and lengths (``writers.ids_staging``)
    OUT/.tokpipe/seg{k}/rejected/part-{t}-*  what segment k dropped from task t
    OUT/.tokpipe/seg{k}/{t}.errors.jsonl     task t's read errors (segment 0)
    OUT/.tokpipe/seg{k}/{t}.json             task t's marker: stats and files (written last)
    OUT/.tokpipe/global{k}/{t}.parquet       global stage k's verdict per document of task t
    OUT/.tokpipe/global{k}/done.json         its stats (written last); scratch/ while it decides
    OUT/.tokpipe/pack/{w}.json        worker group w's final shards (written last), params.json
    OUT/.tokpipe/shuffle/             ``tokpipe tokenize``'s spilled key-range buckets
    OUT/data/part-{w:05d}-*.parquet   the kept shards (or .jsonl[.gz|.zst]); OUT/rejected/...,
                                      OUT/errors.jsonl (merged here)
    OUT/rejected/{stage}/part-{w:05d}-*  with ``rejected_by_stage``: each stage's drops in a
                                      folder of its own (:func:`stage_folders` names them)

(``{t}`` is the task's number in six digits.) The state folder may live elsewhere than
``OUT/.tokpipe`` (``--staging-dir``: on local disk for an output in a bucket, by default), and
either may be in object storage; the lock stays at ``OUT/.tokpipe/lock.json``, so two runs
into one output exclude each other wherever their staging is. Every unit of work writes its files first and
its marker last; :meth:`RunState.committed` says whether a marker and the files it lists
are whole, so a killed run redoes exactly the units without one. :class:`RunState` holds
only paths, so it travels to worker processes with the units. Files are touched through
``pipeline.fs``.

Once a run has finished (its manifest written, last), its staging is removed
(:meth:`RunState.remove_staging`; ``--keep-staging`` keeps it): ``run.json`` first, then the
rest of what tokpipe wrote there (the entries listed above), and the folder itself only when
it is tokpipe's own (``OUT/.tokpipe`` once the lock is given back, or the default local
staging of an output in a bucket): a folder named with ``--staging-dir`` stays, and so does
anything else in it. What a later command needs is
in the manifest: ``run`` holds the digest of the run's identity (:func:`identity_digest`) and
``input_files`` what ``inputs.json`` held, so a rerun of the same command finds the run
finished (:meth:`RunState.finished_manifest`) and redoes nothing unless an input changed
since (:meth:`RunState.check_inputs`), and a removal cut short by a crash is completed by that
rerun.

Why one module of over 500 lines: the layout above belongs to one module (the guide's rule),
and the commit markers, the resume checks and the staging removal all read it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokpipe import storage
from tokpipe.errors import PipelineError
from tokpipe.pipeline import fs
from tokpipe.storage import Location, RemotePath, location
from tokpipe.pipeline.base import StageStats, numbered
from tokpipe.pipeline.engines.lock import RunLock
from tokpipe.pipeline.readers import Task
from tokpipe.pipeline.writers import OUTPUT_FORMATS, hash_path, shard_suffix
from tokpipe.pipeline.writers.manifest import DATA_DIR, ERRORS_NAME, MANIFEST_NAME, REJECTED_DIR

__all__ = ["RunState", "STATE_DIR", "READ_STATS", "RUN_KEY", "Accept", "local_staging", "identity_digest",
           "stage_folders"]

#: The state folder in an output folder.
STATE_DIR = ".tokpipe"
#: Stats key of the readers: documents read and input set aside, per reason.
READ_STATS = "read"
#: The manifest's key for the digest of the identity of the run that wrote it.
RUN_KEY = "run"
_LOCK = "lock.json"
_INPUTS = "inputs.json"
_RUN = "run.json"
_TASKS = "tasks.json"
_DONE = "done.json"
_WALL = "wall.json"
_PACK_PARAMS = "params.json"
#: run.json's key for the output folder the run writes (beside its identity, which stays
#: what the manifest's digest is taken of): a staging folder is only reused or replaced for
#: the output it was begun for.
_OUTPUT_KEY = "output"
#: What tokpipe writes in a state folder (the layout above, ``output/``: ``tokpipe
#: tokenize``'s splits on their way to a bucket), and those files' temporary names
#: (``fs.temp_name``). Only these are ever removed from it: a ``--staging-dir`` may be a
#: folder of the user's.
_STAGING_ENTRY = re.compile(r"(seg\d+|global\d+|pack|shuffle|output|\.?(tasks|inputs|run|wall)\.json(\.tmp)?)")
# Magic bytes at both ends of a staging file, by suffix.
_MAGIC = {".arrow": b"ARROW1", ".parquet": b"PAR1"}

#: A staging's own test of a task's marker (``state``, segment, marker): False redoes the task.
Accept = Callable[["RunState", int, dict[str, Any]], bool]


def identity_digest(identity: dict[str, Any]) -> str:
    """The sha256 of a run's identity (config, inputs, reader options...), as a finished
    run's manifest records it under :data:`RUN_KEY`: a rerun compares it with its own."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def stage_folders(types: Sequence[str]) -> list[str]:
    """The folder under ``OUT/rejected`` of each stage of a config (``types``: their
    ``type``, in order) with ``rejected_by_stage``: its type, with anything but letters, digits, ``.``, ``_`` and ``-``
    made ``_`` (the ``:`` of a class named by its import path); a type met again gets ``-2``,
    ``-3``... so two stages of one kind keep their drops apart."""
    return numbered([re.sub(r"[^A-Za-z0-9._-]", "_", kind) for kind in types])


def local_staging(out: Location) -> Location | None:
    """Where the state of a run into ``out`` lives when no ``--staging-dir`` is given and the
    engine can keep it on local disk: ``OUT/.tokpipe`` for a local output (None), a folder of
    :func:`tokpipe.storage.cache_dir` named after the URL for one in a bucket, so the
    staged documents are written once, locally, and only the final shards are uploaded; a
    rerun on this machine resumes from it."""
    if not isinstance(out, RemotePath):
        return None
    return storage.cache_dir() / "runs" / hashlib.sha256(str(out).encode()).hexdigest()[:16]


class RunState:
    """The state of the run in ``out`` (see the module docstring), kept in ``staging``
    (default ``OUT/.tokpipe``). Either may be a path or a URL."""

    def __init__(self, out: str | os.PathLike[str] | Location, staging: str | os.PathLike[str] | Location | None = None) -> None:
        self.out: Location = location(out)
        self.root: Location = location(staging) if staging is not None else self.out / STATE_DIR

    def __repr__(self) -> str:
        return f"RunState({storage.redact(str(self.out))!r})"

    # -- The run: its lock, identity, tasks and inputs.

    def lock(self) -> RunLock:
        """The output folder's lock (not yet taken)."""
        return RunLock(self._lock_path(), storage.redact(str(self.out)))

    def _lock_path(self) -> Location:
        return self.out / STATE_DIR / _LOCK

    def exists(self) -> bool:
        return fs.exists(self.root)

    def identity(self) -> dict[str, Any] | None:
        """What the run in this folder was started for, or None when none was."""
        recorded = self._recorded_run()
        if recorded is None:
            return None
        recorded.pop(_OUTPUT_KEY, None)
        return recorded

    def begun_for_this_output(self) -> bool:
        """Whether the run in the state folder was begun for this output folder (its
        run.json records it; one begun by an older tokpipe records none)."""
        recorded = self._recorded_run()
        return recorded is not None and recorded.get(_OUTPUT_KEY) == _output_name(self.out)

    def _recorded_run(self) -> dict[str, Any] | None:
        path = self.root / _RUN
        if not fs.exists(path):
            return None
        recorded: dict[str, Any] = fs.read_json(path)
        return recorded

    def begin(self, identity: dict[str, Any], tasks: Sequence[Task], segments: int) -> None:
        """Starts a run: its folders, its planned tasks, its inputs' sizes and times, and
        (last, so a run cut short before it starts over) its identity."""
        for k in range(segments):
            fs.make_dirs(self._segment(k))
            fs.make_dirs(self._global(k))
        fs.make_dirs(self.root / "pack")
        fs.write_json(self.root / _TASKS, [asdict(t) for t in tasks])
        fs.write_json(self.root / _INPUTS, _input_stats(tasks))
        fs.write_json(self.root / _RUN, {**identity, _OUTPUT_KEY: _output_name(self.out)})

    def tasks(self) -> list[Task]:
        """The tasks planned when the run began."""
        return [Task(**t) for t in fs.read_json(self.root / _TASKS)]

    def input_sizes(self) -> dict[str, int]:
        """Each input file's size as the run recorded it when it began (none for a run begun
        by an older tokpipe, or a file unreadable then)."""
        recorded = self.root / _INPUTS
        if not fs.exists(recorded):
            return {}
        return {path: size for path, (size, _) in fs.read_json(recorded).items()}

    def recorded_inputs(self) -> dict[str, Any]:
        """Each input file's size and version as the run recorded them when it began (what
        a finished run's manifest keeps as ``input_files``, for :meth:`check_inputs` once
        the staging is gone)."""
        recorded = self.root / _INPUTS
        return dict(fs.read_json(recorded)) if fs.exists(recorded) else {}

    def wall_seconds(self) -> float:
        """The wall time of the run's calls that ended so far (0 for a new run)."""
        path = self.root / _WALL
        return float(fs.read_json(path)["seconds"]) if fs.exists(path) else 0.0

    def record_wall_seconds(self, seconds: float) -> None:
        """Records the wall time of the run's calls so far (each call, as it ends), so that
        the manifest gives the run's whole wall time however many calls it took."""
        fs.write_json(self.root / _WALL, {"seconds": round(seconds, 3)})

    def check_inputs(self, recorded: dict[str, Any] | None = None, finished: bool = False) -> None:
        """Refuses to resume over inputs that changed since the run began: the output would
        mix documents of the old and the new file. (A run begun by an older tokpipe recorded
        none.) ``recorded``: the record to check (by default, the staging's); ``finished``:
        the run is a finished one, found again by a rerun, which would otherwise call an
        output of other inputs done."""
        if recorded is None:
            recorded = self.recorded_inputs()
        what = "be rerun as done" if finished else "resume"
        for path, (size, version) in recorded.items():
            try:
                now_size, now_version = storage.version(path)
            except OSError as error:
                raise PipelineError(f"{self.out} cannot {what}: input {path} is gone or unreadable since the run "
                                    f"began ({error.strerror or error}); restore it, or start over with "
                                    "--overwrite") from None
            if (now_size, now_version) != (size, version):
                raise PipelineError(f"{self.out} cannot {what}: input {path} changed since the run began "
                                    f"(size {size:,} -> {now_size:,} bytes, or its modification time or ETag); "
                                    "restore it, or start over with --overwrite")

    def holds_anything(self) -> bool:
        """Whether the output folder holds anything besides the run lock."""
        return any(self._contents())

    def committed_anything(self) -> bool:
        """Whether the run here ever committed a unit of work: a task's marker in a segment,
        a global stage's decision, a worker group's shards. A run that did not (refused by a
        stage at its first task, interrupted at once) holds nothing a resume would reuse."""
        for folder in fs.listing(self.root):
            if folder.name.startswith("seg") or folder.name == "pack":
                if fs.listing(folder, "[0-9]*.json"):
                    return True
            elif folder.name.startswith("global") and fs.exists(folder / _DONE):
                return True
        return False

    def clear(self) -> None:
        """``--overwrite``: deletes what the output folder holds, and what tokpipe wrote in
        the state folder (and in ``OUT/.tokpipe``), but the lock this run holds. Anything
        else in a state folder is the user's, and stays."""
        folders = (self.out / STATE_DIR, self.root)
        if fs.is_dir(self.out):
            for entry in fs.listing(self.out):
                if not (entry in folders and fs.is_dir(entry)):
                    _remove_entry(entry)
        for folder in dict.fromkeys(folders):
            self._remove_staging_entries(folder)

    def discard_unfinished(self) -> None:
        """Removes a run that never committed a unit of work, begun for this output
        (:meth:`begun_for_this_output`), so that a corrected command starts over: what
        tokpipe wrote in the state folder, ``run.json`` last (a removal cut short is done
        again by the next rerun). Such a run wrote nothing in the output folder."""
        self._remove_staging_entries(self.root, last=self.root / _RUN)

    def discard_finished(self, manifest: dict[str, Any]) -> None:
        """Removes a finished run (``manifest``: its manifest, in this output folder) that
        read no document, so that a corrected command replaces it: the files its manifest
        lists, the card, the merged errors, the folders they were in once empty, the
        manifest last; and what a removal of its staging cut short left in a state folder of
        tokpipe's own. Nothing else: a file of the user's makes the output folder one that
        holds no run, which the command then refuses."""
        listed = [entry.get("path") for key in ("shards", "rejected", "files")
                  for entry in (manifest.get(key) if isinstance(manifest.get(key), list) else [])
                  if isinstance(entry, dict)]
        # Only paths inside the folder (a manifest is a file anyone can edit).
        names = [name for name in (*listed, ERRORS_NAME, "README.md") if isinstance(name, str) and name
                 and not name.startswith(("/", "\\")) and ".." not in name.replace("\\", "/").split("/")]
        # The kept and rejected shards' folders, and a tokenize output's split folders (made
        # empty when no document was read).
        splits = manifest.get("splits")
        folders: set[str] = {DATA_DIR, REJECTED_DIR, *(name for name in (splits if isinstance(splits, dict) else ())
                                                       if isinstance(name, str) and name not in ("", ".", "..")
                                                       and "/" not in name and "\\" not in name)}
        for name in names:
            path = self.out / name
            if fs.exists(path) and not fs.is_dir(path):
                fs.remove(path)
            parts = name.split("/")[:-1]
            folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        for folder in sorted(folders, key=lambda f: -f.count("/")):  # the deepest first
            fs.remove_empty_dir(self.out / folder)
        if self._own_folder():
            self._remove_staging_entries(self.root)
        fs.remove(self.out / MANIFEST_NAME)

    def finished_manifest(self) -> dict[str, Any] | None:
        """The manifest of a run that finished in this folder and whose staging was removed
        (one recording its identity's digest under :data:`RUN_KEY`), or None."""
        path = self.out / MANIFEST_NAME
        if self.identity() is not None or not fs.exists(path):
            return None
        try:
            manifest = fs.read_json(path)
        except (OSError, ValueError):
            return None
        return manifest if isinstance(manifest, dict) and isinstance(manifest.get(RUN_KEY), str) else None

    def remove_staging(self) -> None:
        """Removes a finished run's staging (call it once the manifest is written, with the
        lock held): ``run.json`` first, so a removal cut short leaves a folder that reads as
        finished (:meth:`finished_manifest`), not a run to resume from half its markers; then
        the rest of what tokpipe wrote there, but the lock. The folder itself goes only when
        it is tokpipe's own: ``OUT/.tokpipe`` (once the lock is given back,
        :meth:`discard_if_empty`) or the default local staging of an output in a bucket; a
        folder named with ``--staging-dir`` stays, with whatever else it holds. Files linked
        from the output (a Megatron ``.bin`` hard-linked to the staged ids) keep their data:
        only the staging's name of them goes."""
        fs.remove(self.root / _RUN)
        self._remove_staging_entries(self.root)
        if self.root != self.out / STATE_DIR and self._own_folder():
            fs.remove_empty_dir(self.root)

    def _own_folder(self) -> bool:
        """Whether the state folder is one tokpipe chose (not a ``--staging-dir``)."""
        return self.root in (self.out / STATE_DIR, local_staging(self.out))

    def _remove_staging_entries(self, folder: Location, last: Location | None = None) -> None:
        """Removes what tokpipe wrote in the state folder ``folder`` (``_STAGING_ENTRY``),
        ``last`` after the rest."""
        entries = [e for e in fs.listing(folder) if _STAGING_ENTRY.fullmatch(e.name) and e != self._lock_path()]
        entries.sort(key=lambda e: e == last)
        for entry in entries:
            _remove_entry(entry)

    def discard_if_empty(self) -> None:
        """Removes the state folder if nothing is in it (a run refused before it began)."""
        fs.remove_empty_dir(self.root)
        fs.remove_empty_dir(self.out / STATE_DIR)

    def _contents(self) -> Iterator[Location]:
        """What the output and the state folder hold, but the lock."""
        folders = [self.out / STATE_DIR, self.root]
        if fs.is_dir(self.out):
            for entry in fs.listing(self.out):
                if entry in folders and fs.is_dir(entry):
                    continue
                yield entry
        for folder in dict.fromkeys(folders):
            if fs.is_dir(folder):
                yield from (p for p in fs.listing(folder) if p != self._lock_path())

    # -- Segment k of a task: staged files, read errors, marker.

    def _segment(self, k: int) -> Location:
        return self.root / f"seg{k}"

    def staging_dir(self, k: int, kind: str) -> Location:
        """Where segment ``k`` stages its ``kind`` ("kept" or "rejected") documents."""
        return self._segment(k) / kind

    def staged_files(self, k: int, summary: dict[str, Any], kind: str) -> list[Location]:
        """The ``kind`` files a task's marker in segment ``k`` lists, in order."""
        return [self.staging_dir(k, kind) / name for name in summary[f"{kind}_files"]]

    def _marker(self, k: int, task: int) -> Location:
        return self._segment(k) / f"{task:06d}.json"

    def _errors(self, task: int) -> Location:
        return self._segment(0) / f"{task:06d}.errors.jsonl"

    def summary(self, k: int, task: int) -> dict[str, Any]:
        """Segment ``k``'s marker of ``task`` (``FileNotFoundError`` when it has none)."""
        result: dict[str, Any] = fs.read_json(self._marker(k, task))
        return result

    def write_summary(self, k: int, task: int, summary: dict[str, Any]) -> None:
        """Commits segment ``k`` of ``task``: its marker, written after its files."""
        fs.write_json(self._marker(k, task), summary)

    def has_marker(self, k: int, task: int) -> bool:
        return fs.exists(self._marker(k, task))

    def drop_marker(self, k: int, task: int) -> None:
        fs.remove(self._marker(k, task))

    def write_errors(self, task: int, lines: Iterable[str]) -> tuple[str, int]:
        """The task's read errors (one JSON line each) in segment 0; returns the file's name
        in its segment's folder (as a marker's ``sizes`` names it) and its size."""
        path = self._errors(task)
        with fs.atomic(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
        return path.name, fs.size(path)

    def committed(self, k: int, task: int, accept: Accept | None = None) -> bool:
        """Whether segment ``k`` of ``task`` is done: its marker can be read, ``accept``
        (the staging's own test) takes it, and every file it lists has the size it had then
        (and, for Arrow and Parquet files, the format's magic bytes at both ends).

        Staging files and markers are not fsynced (that would cost the run about as much as
        writing them): a killed process loses nothing the page cache holds, but after a
        power loss or an OS crash a marker may survive its files, which come back short,
        empty or zero-filled. Those are caught here, at the price of a ``stat`` and two small
        reads a file, and the task is redone. (A marker of an older version lists no sizes:
        it is trusted as it was.)"""
        try:
            summary = self.summary(k, task)
        except FileNotFoundError:
            return False
        except (OSError, ValueError):  # a marker the crash left empty or cut short
            return False
        if accept is not None and not accept(self, k, summary):
            return False
        for name, size in summary.get("sizes", {}).items():
            path = self._segment(k) / name
            try:
                if fs.size(path) != size:
                    return False
                magic = _MAGIC.get(path.suffix)
                if magic is not None and fs.read_ends(path, len(magic), size) != (magic, magic):
                    return False
            except OSError:
                return False
        return True

    def pending(self, k: int, tasks: Sequence[Task], accept: Accept | None = None) -> list[Task]:
        """The tasks whose segment ``k`` is not committed (see :meth:`committed`); the marker
        of one whose files are damaged is removed, so nothing reads them before it is redone."""
        todo = []
        for t in tasks:
            if not self.committed(k, t.index, accept):
                self.drop_marker(k, t.index)
                todo.append(t)
        return todo

    # -- Global stage k: its decision and its verdict on each task.

    def _global(self, k: int) -> Location:
        return self.root / f"global{k}"

    def decided(self, k: int) -> bool:
        return fs.exists(self._global(k) / _DONE)

    def decision_stats(self, k: int) -> dict[str, Any]:
        result: dict[str, Any] = fs.read_json(self._global(k) / _DONE)["stats"]
        return result

    def write_decision(self, k: int, stats: dict[str, Any]) -> None:
        """Commits global stage ``k``'s decision (after every task's verdict)."""
        fs.write_json(self._global(k) / _DONE, {"stats": stats})

    def decision_scratch(self, k: int) -> Path:
        """Scratch space of global stage ``k``'s decision (emptied before and after): local
        disk, on the machine that decides, when the state is in object storage."""
        if isinstance(self.root, RemotePath):
            digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:16]
            return Path(tempfile.gettempdir()) / f"tokpipe-scratch-{digest}" / f"global{k}"
        return self._global(k) / "scratch"

    def write_verdicts(self, k: int, task: int, verdicts: pa.RecordBatch) -> None:
        with fs.atomic(self._global(k) / f"{task:06d}.parquet") as tmp:
            pq.write_table(pa.Table.from_batches([verdicts]), tmp, compression="zstd")

    def verdicts(self, k: int, task: int) -> pa.Table:
        """Global stage ``k``'s verdict on each document of ``task``."""
        return fs.read_parquet(self._global(k) / f"{task:06d}.parquet").combine_chunks()

    # -- The pack step: worker group w's final shards.

    def begin_pack(self, params: dict[str, Any]) -> None:
        """Records the cut of the final shards; another cut than the one begun redoes the
        packed groups (cheaply: they are copies)."""
        pack = self.root / "pack"
        params_file = pack / _PACK_PARAMS
        if fs.exists(params_file) and fs.read_json(params_file) != params:
            for marker in fs.listing(pack, "*.json"):
                fs.remove(marker)
        fs.write_json(params_file, params)

    def packed(self, worker: int) -> bool:
        return fs.exists(self.root / "pack" / f"{worker}.json")

    def pack(self, worker: int) -> dict[str, Any]:
        result: dict[str, Any] = fs.read_json(self.root / "pack" / f"{worker}.json")
        return result

    def write_pack(self, worker: int, summary: dict[str, Any]) -> None:
        fs.write_json(self.root / "pack" / f"{worker}.json", summary)

    def rejected_dir(self, stage: str | None = None) -> Location:
        """Where the final rejected shards go: ``OUT/rejected``, or with ``rejected_by_stage``
        the folder of one stage (``stage``: one of :func:`stage_folders`) in it."""
        return self.out / REJECTED_DIR if stage is None else self.out / REJECTED_DIR / stage

    def remove_group_shards(self, worker: int) -> None:
        """The final shards a group that did not finish may have left (they are redone)."""
        for stale in self._final_shards(f"part-{worker:05d}-*"):
            fs.remove(stale)

    def remove_shards_past(self, workers: int) -> None:
        """The final shards of groups ``workers`` and up: left by an earlier cut into more."""
        for stale in self._final_shards("part-*"):
            if int(stale.name.split("-")[1]) >= workers:
                fs.remove(stale)

    def _final_shards(self, pattern: str) -> list[Location]:
        """The final shards in ``OUT/data``, ``OUT/rejected`` and its stage folders (and
        ``OUT``, where an older tokpipe put the kept ones) whose names match ``pattern``, in any
        output format (``.parquet``, ``.jsonl.gz``...)."""
        suffixes = tuple(shard_suffix(name) for name in OUTPUT_FORMATS)
        # The stage folders (a shard's name spares the check, a request in a bucket).
        stages = [entry for entry in fs.listing(self.rejected_dir())
                  if not entry.name.endswith(suffixes) and fs.is_dir(entry)]
        return [path for folder in (self.out, self.out / DATA_DIR, self.rejected_dir(), *stages)
                for path in fs.listing(folder, pattern) if path.name.endswith(suffixes)]

    # -- tokpipe tokenize's shuffle.

    def shuffle_scratch(self) -> Path:
        if not isinstance(self.root, Path):
            raise PipelineError("tokpipe tokenize stages on local disk: give --staging-dir a local folder")
        return self.root / "shuffle"

    # -- What the run merges from every task.

    def merged_stats(self, tasks: Sequence[Task], closing: Sequence[str | None]) -> dict[str, StageStats]:
        """Every stage's stats summed over the tasks' markers of each segment (``closing[k]``:
        the global stage that ends segment k, whose decision's stats are taken as they are),
        with the readers' under :data:`READ_STATS`."""
        stats: dict[str, StageStats] = {}
        for k, global_stage in enumerate(closing):
            for t in tasks:
                for name, data in self.summary(k, t.index)["stats"].items():
                    stats.setdefault(name, StageStats(name)).merge(StageStats.from_dict(name, data))
            if global_stage is not None:
                stats[global_stage] = StageStats.from_dict(global_stage, self.decision_stats(k))
        stats.setdefault(READ_STATS, StageStats(READ_STATS))
        return stats

    def merge_errors(self, tasks: Sequence[Task], digest: bool = False) -> tuple[int, tuple[int, str] | None]:
        """``OUT/errors.jsonl``: every task's read errors, in task order. Returns how many,
        and with ``digest`` the file's size and sha256."""
        errors = 0
        hashed = None
        with fs.atomic(self.out / ERRORS_NAME) as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                for t in tasks:
                    lines = fs.read_text(self._errors(t.index))
                    f.write(lines)
                    errors += lines.count("\n")
            if digest:
                hashed = hash_path(tmp)
        return errors, hashed


def _remove_entry(entry: Location) -> None:
    """Removes a file, a link (not what it points to) or a folder and all it holds."""
    if fs.is_dir(entry) and not fs.is_link(entry):
        fs.remove_tree(entry, ignore_errors=False)
    else:
        fs.remove(entry)


def _output_name(out: Location) -> str:
    """The output folder as run.json records it: a local one absolute, so that a command
    given it from another working folder is known to write the same one; a URL without the
    credentials it may carry."""
    return str(out.absolute()) if isinstance(out, Path) else storage.redact(str(out))


def _input_stats(tasks: Sequence[Task]) -> dict[str, list[int | str]]:
    """Each input file's size and modification time (ns), as the run first read them."""
    stats: dict[str, list[int | str]] = {}
    for t in tasks:
        if t.path not in stats:
            try:
                size, version = storage.version(t.path)
            except OSError:
                continue  # unreadable: its task reports it
            stats[t.path] = [size, version]
    return stats
