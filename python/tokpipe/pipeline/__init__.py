"""The data pipeline: readers turn files into Arrow record batches of documents (``id``,
``text``, other fields), stages filter and rewrite them, writers store Parquet shards, and an
executor runs it all in parallel and resumably.

A user stage is a few lines (see :mod:`tokpipe.pipeline.base`); ``run`` is the library
equivalent of ``tokpipe clean``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import Filter, GlobalStage, Stage, StageResult, StageStats, register
from tokpipe.pipeline.config import DEFAULT_STAGES, PipelineConfig, load_config, parse_config

__all__ = ["Stage", "Filter", "GlobalStage", "StageResult", "StageStats", "register", "registered_stages",
           "PipelineConfig", "DEFAULT_STAGES", "load_config", "parse_config", "run", "open_dataset"]


def registered_stages() -> dict[str, type[Stage]]:
    """Every registered stage by name, the built-in ones included (see
    :func:`tokpipe.pipeline.stages.registered_stages`; imported on first use, so that importing
    the pipeline does not load every stage's dependencies)."""
    from tokpipe.pipeline.stages import registered_stages as lookup

    return lookup()


def run(inputs: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
        config: PipelineConfig | dict[str, Any] | str | os.PathLike[str] | None = None,
        progress: Callable[[Any], None] | None = None, engine: str = "local", ray_address: str | None = None,
        **options: Any) -> Any:
    """Run a pipeline over ``inputs`` into ``out_dir`` on local worker processes.

    ``config`` is a :class:`PipelineConfig`, a dict like a config file's content, a path to
    a YAML/TOML file, or None for the default pipeline. ``options`` are
    :class:`tokpipe.pipeline.engines.RunOptions` fields (``workers``, ``shard_size``,
    ``strict``, ``overwrite``) plus reader options (``text_field``, ``id_field``, ``split``).
    ``progress``, if given, is called with a :class:`tokpipe.pipeline.engines.ProgressUpdate`
    as each phase advances. ``engine``: ``"local"`` (processes on this machine) or ``"ray"``
    (a Ray cluster: ``ray_address``, or the Ray already started in this process, else a new
    local one; ``pip install 'tokpipe[ray]'``). Returns the
    :class:`tokpipe.pipeline.engines.RunResult`.
    """
    from dataclasses import fields

    from tokpipe.pipeline.engines import LocalExecutor, RunOptions
    from tokpipe.pipeline.readers import ReaderOptions

    if isinstance(config, PipelineConfig):
        parsed = config
    elif isinstance(config, dict):
        parsed = parse_config(config)
    else:
        parsed = load_config(config)
    reader_names = {f.name for f in fields(ReaderOptions)} - {"strict"}
    reader = ReaderOptions(**{k: options.pop(k) for k in list(options) if k in reader_names},
                           strict=options.get("strict", False))
    run_options = RunOptions(reader=reader, **options)
    if engine == "ray":
        from tokpipe.pipeline.engines.ray import RayExecutor

        return RayExecutor(parsed, inputs, out_dir, run_options, progress=progress, address=ray_address).run()
    if engine != "local":
        raise InvalidArgumentError(f"engine must be 'local' or 'ray', got {engine!r}")
    if ray_address is not None:
        raise InvalidArgumentError("ray_address needs engine='ray'")
    return LocalExecutor(parsed, inputs, out_dir, run_options, progress=progress).run()


def open_dataset(out_dir: str | os.PathLike[str], rejected: bool = False) -> Any:
    """The kept (or, with ``rejected=True``, the rejected) documents of a finished run as one
    ``pyarrow.dataset.Dataset``, from the shards its manifest lists.

    Opening the folder itself would also pick up ``rejected/`` and the JSON files beside the
    shards; HF users can call ``datasets.load_dataset(out_dir)`` (and ``(out_dir,
    "rejected")``), which reads the dataset card the run writes.
    """
    from pathlib import Path

    import pyarrow.dataset as pads

    from tokpipe.pipeline.writers import read_manifest

    manifest = read_manifest(out_dir)
    paths = [str(Path(out_dir) / entry["path"]) for entry in manifest["rejected" if rejected else "shards"]]
    return pads.dataset(paths, format="parquet")
