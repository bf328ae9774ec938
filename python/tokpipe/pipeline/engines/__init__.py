"""Where a pipeline runs: ``local`` (worker processes on this machine, the default) or ``ray``
(``engines.ray``), both on the executor contract of ``engines.base``."""

from tokpipe.pipeline.engines.base import Executor, ProgressUpdate, RunOptions, RunResult, WorkUnit
from tokpipe.pipeline.engines.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor", "ProgressUpdate", "RunOptions", "RunResult", "WorkUnit"]
