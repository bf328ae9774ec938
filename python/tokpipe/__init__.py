"""tokpipe: tokenizers and a data pipeline for LLM pretraining datasets, with a Rust core.

The public names::

    Tokenizer      load (tokenizer.json, .tiktoken, GPT-2 files), encode, decode, save
    train_bpe      train a byte-level BPE tokenizer on files or an iterable of strings
    TokpipeError   base class of every error tokpipe raises on purpose
"""

from tokpipe._core import __version__
from tokpipe.errors import (
    CorpusError,
    EncodeError,
    FormatError,
    InvalidArgumentError,
    PatternError,
    TokpipeError,
)
from tokpipe.tokenizer import Tokenizer

__all__ = [
    "__version__",
    "Tokenizer",
    "TokpipeError",
    "FormatError",
    "PatternError",
    "InvalidArgumentError",
    "EncodeError",
    "CorpusError",
]
