"""Where a pipeline runs: ``local`` (worker processes on this machine, the default)."""

from tokpipe.pipeline.engines.local import LocalExecutor, RunOptions, RunResult

__all__ = ["LocalExecutor", "RunOptions", "RunResult"]
