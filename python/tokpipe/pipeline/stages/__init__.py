"""The built-in stages, and the registry lookup: importing this package registers them.

Stages register themselves with ``@register`` (:mod:`tokpipe.pipeline.base`) when their module
is imported. The lookup lives here, above the stage modules, so that it can import them all
first while they import only :mod:`tokpipe.pipeline.base`: no module imports back a module
that imports it.
"""

from __future__ import annotations

from tokpipe.pipeline.base import REGISTRY, Stage
from tokpipe.pipeline.stages.dedup import ExactDedup
from tokpipe.pipeline.stages.length import LengthFilter
from tokpipe.pipeline.stages.language import LanguageFilter
from tokpipe.pipeline.stages.minhash import MinhashDedup
from tokpipe.pipeline.stages.normalize import Normalize
from tokpipe.pipeline.stages.paragraphs import ParagraphDedup
from tokpipe.pipeline.stages.perplexity import Perplexity
from tokpipe.pipeline.stages.pii import Pii
from tokpipe.pipeline.stages.quality_classifier import QualityClassifierFilter
from tokpipe.pipeline.stages.quality_c4 import C4BadWords, C4Quality, FineWebQuality
from tokpipe.pipeline.stages.quality_gopher import GopherQuality, GopherRepetition
from tokpipe.pipeline.stages.text_stats import Blocklist, TextStats
from tokpipe.pipeline.stages.tokenize import Tokenize

__all__ = ["Normalize", "LengthFilter", "ExactDedup", "MinhashDedup", "ParagraphDedup", "C4Quality", "C4BadWords",
           "FineWebQuality", "GopherQuality", "GopherRepetition", "TextStats", "Blocklist", "LanguageFilter", "Perplexity",
           "Pii", "QualityClassifierFilter", "Tokenize", "registered_stages", "stage_class"]


def registered_stages() -> dict[str, type[Stage]]:
    """Every registered stage by name: the built-in ones (imported with this package) and the
    user stages registered so far."""
    return REGISTRY.snapshot()


def stage_class(name: str) -> type[Stage] | None:
    """The stage registered under ``name``, or None."""
    return REGISTRY.snapshot().get(name)
