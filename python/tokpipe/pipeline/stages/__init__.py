"""The built-in stages; importing this package registers them."""

from tokpipe.pipeline.stages.dedup import ExactDedup
from tokpipe.pipeline.stages.length import LengthFilter
from tokpipe.pipeline.stages.normalize import Normalize

__all__ = ["Normalize", "LengthFilter", "ExactDedup"]
