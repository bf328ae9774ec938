"""The built-in stages; importing this package registers them."""

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
           "Pii", "QualityClassifierFilter", "Tokenize"]
