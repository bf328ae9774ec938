"""The built-in stages; importing this package registers them."""

from tokpipe.pipeline.stages.dedup import ExactDedup
from tokpipe.pipeline.stages.length import LengthFilter
from tokpipe.pipeline.stages.normalize import Normalize
from tokpipe.pipeline.stages.perplexity import Perplexity
from tokpipe.pipeline.stages.quality_c4 import C4BadWords, C4Quality, FineWebQuality

__all__ = ["Normalize", "LengthFilter", "ExactDedup", "C4Quality", "C4BadWords", "FineWebQuality", "Perplexity"]
