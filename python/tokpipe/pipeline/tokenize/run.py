"""The run of ``tokpipe tokenize``: phase 1 on the executor (``engines``) with the ids
staging, phase 2 (``shuffle``) into the sinks, and the manifest (see the package docstring).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tokpipe import __version__, storage
from tokpipe.errors import ConfigError, OutputConflictError, PipelineError
from tokpipe.pipeline import fs
from tokpipe.pipeline.base import StageStats
from tokpipe.pipeline.config import PipelineConfig, StageSpec
from tokpipe.pipeline.engines.base import Progress, RunOptions
from tokpipe.pipeline.engines.local import LocalExecutor
from tokpipe.pipeline.engines.outcome import check_documents_read
from tokpipe.pipeline.engines.state import READ_STATS, RUN_KEY, RunState
from tokpipe.pipeline.engines.workers import disk_full_in_one_line
from tokpipe.pipeline.readers import Task
from tokpipe.pipeline.stages.tokenize import file_sha256, find_eos, ids_dtype, load_tokenizer
from tokpipe.pipeline.tokenize.options import (DOCUMENTS_DIR, FORMAT, FORMAT_VERSION, MEGATRON_DIR, SPLITS,
                                               TokenizeOptions, TokenizeResult)
from tokpipe.pipeline.tokenize.shuffle import write_bins, write_in_order, write_shuffled
from tokpipe.pipeline.tokenize.sinks import BinLayout, Split
from tokpipe.pipeline.tokenize.staging import IdsStaging, StagedTask, staged_documents
from tokpipe.pipeline.writers import MANIFEST_NAME, read_manifest
from tokpipe.pipeline.writers.card import tokens_card
from tokpipe.pipeline.writers.ids_staging import close_ids_files
from tokpipe.pipeline.writers.manifest import ERRORS_NAME

__all__ = ["tokenize_corpus", "expand_inputs"]

# Documents a batch of phase 1 holds at least (or MAX_BATCH_TEXT_BYTES of text, whichever
# comes first).
_ENCODE_BATCH_ROWS = 8192


class _Streamer:
    """Phase 2 without a shuffle, run beside phase 1: a thread writes each task's staged
    documents as soon as that task and every one before it are done (their markers exist),
    so the final files are written while later tasks are still being encoded. The output is
    the same as writing them all afterwards: the same documents in the same order."""

    def __init__(self, tasks: list[Task], state: RunState, options: TokenizeOptions, splits: dict[str, Split],
                 itemsize: int, layout: BinLayout) -> None:
        self._tasks, self._state, self._options, self._splits = tasks, state, options, splits
        self._itemsize, self._layout = itemsize, layout
        self._wake = threading.Condition()
        self._stopped = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tokpipe-stream", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """A task finished: the thread looks again at the one it waits for. Raises what
        stopped the thread, so a failed write stops the run at the next task."""
        if self._error is not None:
            raise self._error
        with self._wake:
            self._wake.notify_all()

    def _done(self, task: Task) -> bool:
        return self._state.has_marker(0, task.index)

    def _run(self) -> None:
        try:
            position = 0
            for task in self._tasks:
                with self._wake:
                    # The timeout only guards against a missed wake-up; the marker decides.
                    while not self._stopped and not self._done(task):
                        self._wake.wait(timeout=0.5)
                    if self._stopped:
                        return
                staged = StagedTask.of(self._state, self._state.summary(0, task.index))
                position = write_in_order(staged_documents([staged], self._itemsize), position, self._options,
                                          self._splits, self._itemsize, self._layout)
        except BaseException as error:  # noqa: BLE001 - raised in the caller's thread by finish()
            self._error = error

    def finish(self) -> None:
        """Waits for the last task's documents to be handed over; raises what went wrong."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        self._thread.join()


def expand_inputs(inputs: list[str]) -> list[str]:
    """A ``tokpipe clean`` output folder stands for its kept shards (not rejected/ nor the
    staging files); ``tokpipe eval-tokenizer`` reads its inputs the same way."""
    expanded: list[str] = []
    for given in inputs:
        path = storage.location(given)
        if fs.is_dir(path) and fs.exists(path / MANIFEST_NAME):
            manifest = fs.read_json(path / MANIFEST_NAME)
            if manifest.get("format") == FORMAT:
                raise ConfigError(f"{given} is already tokenized output")
            expanded += [str(path / e["path"]) for e in read_manifest(path)["shards"]]
        else:
            expanded.append(given)
    return expanded


def tokenize_corpus(inputs: list[str], out_dir: str | os.PathLike[str], options: TokenizeOptions,
                    run: RunOptions = RunOptions(), progress: Progress | None = None) -> TokenizeResult:
    """Runs both phases (see the package docstring) and returns the manifest. The output
    folder is locked from the start to the end (see ``engines.lock``). A run that read no
    document (every input set aside) raises ``NoDocumentsError`` once its output is written."""
    executors: list[LocalExecutor] = []
    try:
        # A full disk in the write phase, outside any work unit: one line too.
        with disk_full_in_one_line(os.fspath(out_dir), "the writing of the shards"):
            result = _tokenize_corpus(inputs, out_dir, options, run, progress, executors)
    finally:
        for executor in executors:
            executor.release()
    # Written, and yet a failure when no document could be read (engines.outcome).
    check_documents_read(result.out_dir, result.stats[READ_STATS], run.reader.text_field, result)
    return result


def _tokenize_corpus(inputs: list[str], out_dir: str | os.PathLike[str], options: TokenizeOptions, run: RunOptions,
                     progress: Progress | None, executors: list[LocalExecutor]) -> TokenizeResult:
    progress = progress or (lambda update: None)
    started = time.perf_counter()  # this call's part of the manifest's wall_seconds (Executor.wall_seconds)
    final = storage.location(out_dir)
    # Only ids and texts are tokenized and staged: the readers skip the inputs' other fields.
    # Batches of at least _ENCODE_BATCH_ROWS documents: each batch ends with encoding threads
    # waiting on the last run, then the staging write; 8 times fewer batches took 4% off the
    # run (on 2 cores), where 32 times fewer lost the overlap of reading and encoding.
    run = replace(run, reader=replace(run.reader, extra_fields=False,
                                      batch_rows=max(run.reader.batch_rows, _ENCODE_BATCH_ROWS)))
    tokenizer = load_tokenizer(options.tokenizer)
    eos = find_eos(tokenizer, options.eos_token) if options.append_eos or options.pad_tail else None
    # `threads` is a speed knob, not part of what the run computes: it reaches the workers as
    # RAYON_NUM_THREADS (inherited when they start), so a resume may use another value.
    tokenizer_name = options.tokenizer if storage.is_remote(options.tokenizer) else str(Path(options.tokenizer).resolve())
    config = PipelineConfig([StageSpec("tokenize", {"tokenizer": tokenizer_name,
                                                    "append_eos": options.append_eos, "eos_token": options.eos_token,
                                                    "keep_text": False, "threads": None})])
    executor = LocalExecutor(config, expand_inputs(list(inputs)), final, run, progress=progress)
    executors.append(executor)
    # The splits are written to local disk (OUT itself, or for an OUT in object storage a
    # folder of the run's local staging) and, in a bucket, uploaded file by file once whole,
    # the manifest last: the bin writers append, which objects cannot.
    out = final if isinstance(final, Path) else _local_output(executor.state.root)
    staging = IdsStaging()
    tasks = executor.plan()
    todo = executor.pending(0, tasks, staging)
    state = executor.state
    dtype = ids_dtype(tokenizer.vocab_size)
    itemsize = np.dtype(dtype).itemsize
    params = {**options.global_params(), "shard_size": run.shard_size,
              "tokenizer_sha256": file_sha256(options.tokenizer)}
    manifest_path = final / MANIFEST_NAME
    if executor.finished is not None:
        return _finished_result(executor, final, params)
    previous: dict[str, Any] | None = None
    if fs.exists(manifest_path) and not todo:
        previous = fs.read_json(manifest_path)
        # A manifest without digests or without its run's identity (an older tokpipe's) is
        # written again, with them.
        if previous.get("params") != params or "files" not in previous \
                or previous.get(RUN_KEY) != executor.identity_digest():
            previous = None
    splits: dict[str, Split] = {}
    streamer: _Streamer | None = None
    scratch = state.shuffle_scratch()
    if previous is None:
        fs.remove(manifest_path)
        for name in (*SPLITS, DOCUMENTS_DIR, MEGATRON_DIR):
            fs.remove_tree(out / name)
            if out != final:
                fs.remove_tree(final / name)
        splits = {name: Split(out, name, options, dtype, tokenizer.vocab_size, eos, run.shard_size)
                  for name in SPLITS}
        if not options.shuffle:
            streamer = _Streamer(tasks, state, options, splits, itemsize,
                                 BinLayout(options, splits))
            executor.progress = lambda update: (progress(update), streamer.notify())  # type: ignore[union-attr]
    saved = os.environ.get("RAYON_NUM_THREADS")
    if options.threads:
        os.environ["RAYON_NUM_THREADS"] = str(options.threads)
    try:
        try:
            with executor.pool(min(max(1, run.workers), len(todo))):
                executor.map("tokenizing", executor.segment_units(0, todo, staging))
        finally:
            close_ids_files()
            if options.threads:
                if saved is None:
                    os.environ.pop("RAYON_NUM_THREADS", None)
                else:
                    os.environ["RAYON_NUM_THREADS"] = saved

        stats = state.merged_stats(tasks, [None])
        errors, errors_digest = state.merge_errors(tasks, digest=True)
        assert errors_digest is not None
        if previous is not None:
            executor.finish_staging()
            wall = previous.get("wall_seconds")  # the manifest stands, and so does its run's time
            return TokenizeResult(out, previous, stats, 0, float(wall) if isinstance(wall, (int, float)) else None)

        summaries = [state.summary(0, t.index) for t in tasks]
        staged = [StagedTask.of(state, s) for s in summaries]
        write_bins(staged, itemsize, options, splits)
        if streamer is not None:
            streamer.finish()
        else:
            documents = sum(int(s["kept"]) for s in summaries)
            tokens = int(stats["tokenize"].extra.get("tokens", 0)) if "tokenize" in stats else 0
            fs.remove_tree(scratch)
            write_shuffled(staged, documents, tokens, itemsize, options, splits, scratch, progress)
        summaries_out = {name: split.close() for name, split in splits.items()}
    except BaseException:
        if streamer is not None:
            streamer.stop()
        for split in splits.values():
            split.abort()
        raise
    finally:
        fs.remove_tree(scratch)

    ordered = {READ_STATS: stats[READ_STATS], **{k: v for k, v in stats.items() if k != READ_STATS}}
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tokpipe_version": __version__,
        "tokenizer": {"path": tokenizer_name, "sha256": params["tokenizer_sha256"],
                      "vocab_size": tokenizer.vocab_size, "eos_id": eos, "append_eos": options.append_eos},
        "dtype": dtype, "seq_len": options.seq_len, "pack": options.pack, "truncate": options.truncate,
        "pad_tail": options.pad_tail, "shuffle": options.shuffle, "seed": options.seed,
        "val_fraction": options.val_fraction, "formats": list(options.formats),
        "splits": summaries_out,
        "totals": {"documents": sum(s["documents"] for s in summaries_out.values()),
                   "tokens": sum(s["tokens"] for s in summaries_out.values())},
        "stats": {name: s.as_dict() for name, s in ordered.items()},
        "inputs": executor.inputs, "errors": errors, "params": params,
        "wall_seconds": executor.wall_seconds(since=started),  # every call's
        "files": sorted([{"path": ERRORS_NAME, "bytes": errors_digest[0], "sha256": errors_digest[1]},
                         *(entry for split in splits.values() for entry in split.files)], key=lambda e: e["path"]),
    }
    if out != final:
        for entry in manifest["files"]:
            if entry["path"] != ERRORS_NAME:  # merged straight into OUT
                fs.publish_copy(out / entry["path"], final / entry["path"])
        fs.remove_tree(out)
    manifest[RUN_KEY] = executor.identity_digest()
    manifest["input_files"] = state.recorded_inputs()  # what a rerun checks once the staging is gone
    documents = {name: split.documents_file for name, split in splits.items()}
    fs.write_text(final / "README.md", tokens_card(manifest, documents))
    fs.write_json(manifest_path, manifest)  # last: the run is finished
    executor.finish_staging()
    return TokenizeResult(final, manifest, ordered, len(todo),
                          manifest["wall_seconds"] if executor.run_wall_seconds() is not None else None)


def _finished_result(executor: LocalExecutor, final: storage.Location, params: dict[str, Any]) -> TokenizeResult:
    """A rerun of a finished run whose staging was removed: its manifest, with nothing
    redone; refused when it asks for other write options, which need the staging."""
    manifest = executor.finished
    assert manifest is not None
    if manifest.get("params") != params:
        raise OutputConflictError(f"{final} holds this run, finished with other write options (seq_len, pack, "
                                  "shuffle, split, formats or shard size); its staging was removed, so it cannot be "
                                  "written again without tokenizing again: use --overwrite to do so (--keep-staging "
                                  "keeps the staging for a cheap re-write)")
    executor.state.remove_staging()  # what a removal cut short by a crash may have left
    stats = {name: StageStats.from_dict(name, data) for name, data in manifest["stats"].items()}
    wall = manifest.get("wall_seconds")
    return TokenizeResult(final, manifest, stats, 0, float(wall) if isinstance(wall, (int, float)) else None)


def _local_output(root: storage.Location) -> Path:
    """Where a run into object storage writes its splits before they are uploaded."""
    if not isinstance(root, Path):
        raise PipelineError("tokpipe tokenize writes its splits on local disk before uploading them: give "
                            "--staging-dir a local folder")
    return root / "output"
