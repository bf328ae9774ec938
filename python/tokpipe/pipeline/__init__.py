"""The data pipeline: readers turn files into Arrow record batches of documents (``id``,
``text``, other fields), stages filter and rewrite them, writers store Parquet shards, and an
executor runs it all in parallel and resumably.

A user stage is a few lines (see :mod:`tokpipe.pipeline.base`); ``run`` is the library
equivalent of ``tokpipe clean``, over files or in-memory data; ``apply`` runs a pipeline over
in-memory data (a ``pyarrow.Table``, a Hugging Face dataset, a list of texts or of dicts) and
returns the kept rows as a ``pyarrow.Table``, with no file to name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from tokpipe.errors import InvalidArgumentError, TokpipeError
from tokpipe.pipeline.base import Filter, GlobalStage, Stage, StageResult, StageStats, register
from tokpipe.pipeline.config import DEFAULT_STAGES, PipelineConfig, check_types, load_config, parse_config

if TYPE_CHECKING:
    import pyarrow as pa

    from tokpipe.pipeline.engines import RunOptions, RunResult
    from tokpipe.pipeline.memory import StagedInput, Texts
    from tokpipe.pipeline.readers import ReaderOptions, ReadError

__all__ = ["Stage", "Filter", "GlobalStage", "StageResult", "StageStats", "register", "registered_stages",
           "PipelineConfig", "DEFAULT_STAGES", "load_config", "parse_config", "run", "apply", "Applied", "texts",
           "open_dataset"]

#: What ``config`` may be: a parsed config, a dict shaped like a config file, a file's path, or None.
Config = Union[PipelineConfig, dict[str, Any], str, "os.PathLike[str]", None]


def registered_stages() -> dict[str, type[Stage]]:
    """Every registered stage by name, the built-in ones included (see
    :func:`tokpipe.pipeline.stages.registered_stages`; imported on first use, so that importing
    the pipeline does not load every stage's dependencies)."""
    from tokpipe.pipeline.stages import registered_stages as lookup

    return lookup()


def run(inputs: Sequence[str | os.PathLike[str]] | Any, out_dir: str | os.PathLike[str],
        config: Config = None, progress: Callable[[Any], None] | None = None, engine: str = "local",
        ray_address: str | None = None, **options: Any) -> Any:
    """Run a pipeline over ``inputs`` into ``out_dir`` on local worker processes.

    ``inputs`` are paths (files, folders, glob patterns), or in-memory data as
    :func:`apply` takes it, except that a list of strings is a list of paths: pass texts as
    ``texts([...])``. In-memory data is written to a temporary folder first (see
    :mod:`tokpipe.pipeline.memory`), removed when the run ends; since it is written anew by
    every call, a second call into the same ``out_dir`` needs ``overwrite=True``.

    ``config`` is a :class:`PipelineConfig`, a dict like a config file's content, a path to
    a YAML/TOML file, or None for the default pipeline. ``options`` are
    :class:`tokpipe.pipeline.engines.RunOptions` fields (``workers``, ``shard_size``,
    ``strict``, ``overwrite``, ``output_format``: ``"parquet"``, ``"jsonl"``, ``"jsonl.gz"`` or
    ``"jsonl.zst"``; ``keep_staging``: keep the staging once the run succeeded;
    ``rejected_by_stage``: each stage's drops in ``rejected/STAGE/``) plus reader
    options (``text_field``, ``id_field``, ``split``).
    ``progress``, if given, is called with a :class:`tokpipe.pipeline.engines.ProgressUpdate`
    as each phase advances, and a few times a second in between (from a thread of the run,
    never two calls at once). ``engine``: ``"local"`` (processes on this machine) or ``"ray"``
    (a Ray cluster: ``ray_address``, or the Ray already started in this process, else a new
    local one; ``pip install 'tokpipe[ray]'``). Returns the
    :class:`tokpipe.pipeline.engines.RunResult`.

    A run that reads no document at all, every input set aside as unreadable (a wrong
    ``text_field``, most often), is a failure: the output folder is written as always
    (``manifest.json``, ``errors.jsonl``), then :class:`tokpipe.errors.NoDocumentsError` is
    raised, its message naming the fields the input has and the one likely meant, its
    ``result`` the ``RunResult``. A config value of the wrong type for its stage's parameter
    is a :class:`tokpipe.errors.ConfigError` before any work, whether the config is a file, a
    dict or a :class:`PipelineConfig`.
    """
    from tokpipe.pipeline.engines.outcome import check_documents_read
    from tokpipe.pipeline.engines.state import READ_STATS
    from tokpipe.pipeline.memory import check_data, split_inputs, stage

    parsed, reader, run_options = _prepare(config, options)
    if engine not in ("local", "ray"):
        raise InvalidArgumentError(f"engine must be 'local' or 'ray', got {engine!r}")
    if ray_address is not None and engine != "ray":
        raise InvalidArgumentError("ray_address needs engine='ray'")
    data, paths = split_inputs(inputs)
    if data is not None:
        check_data(data, reader)
    _check_stages_travel(parsed, run_options.workers if engine == "local" else 2)
    if data is None:
        result = _execute(parsed, paths or [], out_dir, run_options, progress, engine, ray_address)
    else:
        with tempfile.TemporaryDirectory(prefix="tokpipe-memory-") as folder:
            staged = stage(data, folder, reader)
            with _named_as_data(staged):
                result = _execute(parsed, staged.files, out_dir, run_options, progress, engine, ray_address)
    check_documents_read(result.out_dir, result.stats[READ_STATS], reader.text_field, result)
    return result


def texts(items: Iterable[str]) -> Texts:
    """Marks ``items`` as documents' texts for :func:`run`, which takes a list of strings
    as paths: ``run(texts(["a text", ...]), out_dir)``. (:func:`apply` takes a list of
    strings as texts.)"""
    from tokpipe.pipeline.memory import texts as mark

    return mark(items)


@dataclass(frozen=True)
class Applied:
    """What :func:`apply` returns.

    - ``kept``: the documents the pipeline kept, as the kept shards of a run hold them
      (``id``, ``text``, the data's other columns, and those the stages add).
    - ``rejected``: with ``apply(..., rejected=True)``, the documents the stages dropped,
      with ``reason``, ``stage`` and ``duplicate_of``; else None.
    - ``errors``: the input set aside before any stage (a null or missing text, a text that
      is not a string...), one :class:`~tokpipe.pipeline.readers.ReadError` each, with
      ``path`` ``"memory"`` and ``location`` ``"row N"`` (N counts from 1 in the data).
    - ``stats``: per stage (``"read"`` first), as ``RunResult.stats``.
    """

    kept: pa.Table
    rejected: pa.Table | None
    errors: list[ReadError]
    stats: dict[str, StageStats]

    def __repr__(self) -> str:
        rejected = "None" if self.rejected is None else f"<{self.rejected.num_rows} rows>"
        return f"Applied(kept=<{self.kept.num_rows} rows>, rejected={rejected}, errors={len(self.errors)}, " \
               f"stats={{{', '.join(self.stats)}}})"


def apply(data: Any, config: Config = None, *, rejected: bool = False, workers: int = 1,
          progress: Callable[[Any], None] | None = None, **options: Any) -> Applied:
    """Runs a pipeline over in-memory ``data`` and returns its kept rows (and, with
    ``rejected=True``, its rejected rows) as ``pyarrow`` tables, in an :class:`Applied`.

    ``data``: a ``pyarrow.Table``, ``RecordBatch``, ``RecordBatchReader`` or
    ``pyarrow.dataset.Dataset``; a Hugging Face ``datasets.Dataset`` or ``IterableDataset``
    (one split); a pandas ``DataFrame``; or an iterable of dicts (documents, as JSON Lines
    records) or of strings (texts). The run is a file run's, by the same code: the data is
    streamed into a temporary folder, read by the Parquet or the JSON Lines reader, run by
    the local engine on ``workers`` processes (1: this process), and the folder removed
    (see :mod:`tokpipe.pipeline.memory`). A document without an id gets ``memory:N``.

    ``config`` and ``options`` are :func:`run`'s (``text_field``, ``id_field``, ``strict``,
    ``shard_size``...). Data that cannot be documents (an int, a list of ints, a table
    without its text column) is refused with one ``TokpipeError`` line before any work.
    """
    from tokpipe.pipeline.engines import LocalExecutor
    from tokpipe.pipeline.memory import check_data, stage

    pointless = sorted(set(options) & {"output_format", "staging_dir", "overwrite", "keep_staging",
                                       "rejected_by_stage"})
    if pointless:
        raise InvalidArgumentError(f"apply() returns tables and keeps no folder: {', '.join(pointless)} is run()'s")
    parsed, reader, run_options = _prepare(config, {**options, "workers": workers})
    check_data(data, reader)
    _check_stages_travel(parsed, workers)
    with tempfile.TemporaryDirectory(prefix="tokpipe-apply-") as folder:
        staged = stage(data, os.path.join(folder, "input"), reader)
        out = os.path.join(folder, "out")
        with _named_as_data(staged):
            result = LocalExecutor(parsed, staged.files, out, run_options, progress=progress).run()
        return Applied(kept=_table(out, False), rejected=_table(out, True) if rejected else None,
                       errors=_read_errors(out, staged), stats=result.stats)


def _prepare(config: Config, options: dict[str, Any]) -> tuple[PipelineConfig, ReaderOptions, RunOptions]:
    """The parsed config, and ``options`` split into the reader's and the run's."""
    from dataclasses import fields

    from tokpipe.pipeline.engines import RunOptions
    from tokpipe.pipeline.readers import ReaderOptions

    if isinstance(config, PipelineConfig):
        parsed = check_types(config)  # one made in Python did not go through parse_config
    elif isinstance(config, dict):
        parsed = parse_config(config)
    else:
        parsed = load_config(config)
    reader_names = {f.name for f in fields(ReaderOptions)} - {"strict"}
    options = dict(options)
    reader = ReaderOptions(**{k: options.pop(k) for k in list(options) if k in reader_names},
                           strict=options.get("strict", False))
    return parsed, reader, RunOptions(reader=reader, **options)


def _check_stages_travel(config: PipelineConfig, workers: int) -> None:
    """With worker processes, refuses before any work a stage class that cannot reach them
    (``engines.shipping``)."""
    if workers > 1:
        from tokpipe.pipeline.engines.shipping import stage_payload

        stage_payload(config)


def _execute(config: PipelineConfig, inputs: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
             options: RunOptions, progress: Callable[[Any], None] | None, engine: str,
             ray_address: str | None) -> RunResult:
    if engine == "ray":
        from tokpipe.pipeline.engines.ray import RayExecutor

        return RayExecutor(config, inputs, out_dir, options, progress=progress, address=ray_address).run()
    from tokpipe.pipeline.engines import LocalExecutor

    return LocalExecutor(config, inputs, out_dir, options, progress=progress).run()


@contextmanager
def _named_as_data(staged: StagedInput) -> Iterator[None]:
    """Inside the block, a tokpipe error that names a staged file names the data instead
    (``memory, row N``): the temporary folder means nothing to the user."""
    try:
        yield
    except TokpipeError as error:
        message = staged.rename(str(error))
        if message == str(error):
            raise
        try:
            renamed = type(error)(message)
        except Exception:  # noqa: BLE001 - an error class of other arguments: raised as it is
            raise error from None
        raise renamed from None


def _table(out: str, rejected: bool) -> pa.Table:
    """The kept (or rejected) rows of the finished run in ``out``, as one table."""
    return open_dataset(out, rejected=rejected).to_table()


def _read_errors(out: str, staged: StagedInput) -> list[ReadError]:
    """The run's ``errors.jsonl``, each error named after the data (``StagedInput.error``)."""
    import json

    from tokpipe.pipeline.writers.manifest import ERRORS_NAME

    with open(os.path.join(out, ERRORS_NAME), encoding="utf-8") as f:
        return [staged.error(json.loads(line)) for line in f if line.strip()]


def open_dataset(out_dir: str | os.PathLike[str], rejected: bool = False) -> Any:
    """The kept (or, with ``rejected=True``, the rejected) documents of a finished run as one
    ``pyarrow.dataset.Dataset``, from the shards its manifest lists (a folder or a URL).

    The kept shards are alone in ``out_dir/data`` (``pyarrow.dataset.dataset`` opens that
    folder as it is, and ``out_dir/rejected``, or one stage's ``out_dir/rejected/STAGE`` of a
    run with ``rejected_by_stage``); HF users can call
    ``datasets.load_dataset(out_dir)`` (and ``(out_dir, "rejected")``), which reads the dataset
    card the run writes. This reads the manifest's list, which also covers a folder written by
    an older tokpipe (shards in ``out_dir`` itself).
    """
    import pyarrow.dataset as pads

    from tokpipe.pipeline import fs
    from tokpipe.pipeline.writers import read_manifest
    from tokpipe.storage import RemotePath, location

    where = location(out_dir)
    manifest = read_manifest(where)
    paths = [where / entry["path"] for entry in manifest["rejected" if rejected else "shards"]]
    if isinstance(where, RemotePath):  # read through the one filesystem layer
        return pads.dataset([p.key for p in paths], format="parquet", filesystem=fs.arrow_filesystem(where))
    return pads.dataset([str(p) for p in paths], format="parquet")
