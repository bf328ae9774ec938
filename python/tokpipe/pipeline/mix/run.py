"""The driver of ``tokpipe mix``: the sources checked and the plan made before the output
folder is touched, then the run's lock and state (``engines.state``: a rerun of a finished
mix redoes nothing; a killed one starts its single pass over), then the writes."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from tokpipe import storage
from tokpipe.errors import ConfigError, OutputConflictError
from tokpipe.pipeline import fs
from tokpipe.pipeline.engines.base import Progress
from tokpipe.pipeline.engines.state import RUN_KEY, RunState, identity_digest, local_staging
from tokpipe.pipeline.mix.plan import MixOptions, MixResult, check_compatible, open_source, plan, weight_of
from tokpipe.pipeline.mix.write import write_output
from tokpipe.pipeline.tokenize.options import DOCUMENTS_DIR, MEGATRON_DIR, SPLITS
from tokpipe.pipeline.writers import MANIFEST_NAME
from tokpipe.pipeline.writers.manifest import ERRORS_NAME

__all__ = ["mix"]


def mix(sources: Sequence[tuple[str, Any]] | Mapping[str, Any], out_dir: str | os.PathLike[str],
        options: MixOptions = MixOptions(), progress: Progress | None = None) -> MixResult:
    """Mixes ``sources`` (``(folder, weight)`` pairs, or a mapping of folder to weight; each
    folder a ``tokpipe tokenize`` output) into ``out_dir`` (see the package docstring).
    Every check of the sources and of the budget is made before the output folder is
    touched; a bad source raises ``ConfigError`` naming it."""
    progress = progress or (lambda update: None)
    started = time.perf_counter()
    pairs = list(sources.items()) if isinstance(sources, Mapping) else list(sources)
    if not pairs:
        raise ConfigError("no source to mix: give SOURCE=WEIGHT at least once")
    names: list[str] = []  # each source as the run's identity names it: absolute, or a URL without credentials
    opened = []
    for index, (given, weight) in enumerate(pairs):
        given = os.fspath(given) if not isinstance(given, str) else given
        name = storage.redact(given) if storage.is_remote(given) else str(Path(given).resolve())
        if name in names:
            raise ConfigError(f"{storage.redact(given)[:200]}: listed twice (give it one weight)")
        names.append(name)
        opened.append(open_source(index, given, weight_of(weight, given)))
    _check_output_holds_no_source(out_dir, names)
    check_compatible(opened)
    splits = plan(opened, options)
    if options.staging_dir is not None and storage.is_remote(options.staging_dir):
        raise ConfigError("--staging-dir must be a local folder for mix (it spills key ranges and writes its splits "
                          "there before uploading them)")

    final = storage.location(out_dir)
    state = RunState(final, options.staging_dir if options.staging_dir is not None else local_staging(final))
    identity = {"command": "mix",
                "sources": [[name, str(s.weight), s.manifest_sha256] for name, s in zip(names, opened)],
                "tokens": options.tokens, "max_epochs": str(Fraction(str(options.max_epochs))), "seed": options.seed,
                "formats": list(options.formats), "shard_size": options.shard_size}
    lock = state.lock()
    lock.acquire()
    try:
        finished = _begin(state, identity, options)
        if finished is not None:
            return MixResult(final, finished, written=False)
        manifest = write_output(opened, splits, final, state, options, identity, progress, started)
        return MixResult(final, manifest)
    finally:
        lock.release()
        if state.identity() is None:  # finished, or refused before it began: no state left but the folder
            state.discard_if_empty()


def _check_output_holds_no_source(out_dir: str | os.PathLike[str] | storage.RemotePath, names: list[str]) -> None:
    """Refuses an output folder that is a source or holds one: the mix clears its output
    (``--overwrite``, or the files of a killed run) and would delete its own input."""
    given = str(out_dir) if isinstance(out_dir, storage.RemotePath) else os.fspath(out_dir)
    out = (storage.redact(given) if storage.is_remote(given) else str(Path(given).resolve())).rstrip("/")
    for name in names:
        if name == out or name.startswith(out + "/") or name.startswith(out + os.sep):
            raise ConfigError(f"{storage.redact(given)[:200]}: the output folder is, or holds, the source "
                              f"{name[:200]}; write the mix to another folder")


def _begin(state: RunState, identity: dict[str, Any], options: MixOptions) -> dict[str, Any] | None:
    """Starts the run in the state folder, or finds the same mix finished (its manifest)."""
    if options.overwrite:
        state.clear()
    previous = state.identity()
    if previous is not None and previous != identity:
        if not (state.begun_for_this_output() and previous.get("command") == "mix"):
            raise OutputConflictError(f"{state.out} holds a run of other sources or options; use --overwrite to "
                                      "start over, or another output folder")
        previous = None  # an unfinished mix leaves nothing to reuse: the corrected command starts over
    finished = state.finished_manifest()
    if previous is None and finished is not None:
        if finished[RUN_KEY] == identity_digest(identity):
            return finished
        raise OutputConflictError(f"{state.out} holds a finished run of other sources or options; use --overwrite "
                                  "to start over, or another output folder")
    if previous is None and state.identity() is None and state.holds_anything():
        raise OutputConflictError(f"{state.out} is not empty and holds no tokpipe run; use --overwrite or another "
                                  "folder")
    # A killed mix (same identity) or a corrected one: what it may have written goes.
    out = state.out
    for name in (*SPLITS, DOCUMENTS_DIR, MEGATRON_DIR):
        fs.remove_tree(out / name)
    for name in (MANIFEST_NAME, ERRORS_NAME, "README.md"):
        fs.remove(out / name)
    fs.remove_tree(state.root / "shuffle")
    fs.remove_tree(state.root / "output")
    state.begin(identity, [], 0)
    return None
