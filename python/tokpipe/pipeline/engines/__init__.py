"""Where a pipeline runs: ``local`` (worker processes on this machine, the default)."""

from tokpipe.pipeline.engines.local import LocalExecutor, ProgressUpdate, RunOptions, RunResult

__all__ = ["LocalExecutor", "ProgressUpdate", "RunOptions", "RunResult"]
