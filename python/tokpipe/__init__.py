"""tokpipe: tokenizers and a data pipeline for LLM pretraining datasets, with a Rust core.

The public names::

    Tokenizer      load (tokenizer.json, sentencepiece .model, .tiktoken, GPT-2 files, BERT vocab.txt),
                   encode (n-best and sampled for Unigram), decode, save
    train_bpe      train a byte-level BPE tokenizer on files or an iterable of strings
    train_wordpiece  train a BERT WordPiece tokenizer (likelihood or HF's frequency score)
    train_unigram  train a sentencepiece Unigram tokenizer (saves as .model or tokenizer.json)
    CorpusReport   what a training run read and set aside
    LanguageModel  load an ARPA n-gram model and score text exactly as kenlm does
    train_lm       train a KenLM-compatible modified Kneser-Ney n-gram model
    TokpipeError   base class of every error tokpipe raises on purpose
"""

from typing import TYPE_CHECKING, Any

from tokpipe._core import __version__
from tokpipe.errors import (
    ArgumentTypeError,
    CorpusError,
    EncodeError,
    FormatError,
    InvalidArgumentError,
    InternalError,
    PatternError,
    StateError,
    StorageError,
    TokpipeError,
)
from tokpipe.tokenizer import Tokenizer
from tokpipe.train import CorpusReport, train_bpe, train_unigram, train_wordpiece

if TYPE_CHECKING:
    from tokpipe.lm import LanguageModel, TrainedLM, train_lm

# `tokpipe.lm` (numpy, pyarrow) is imported on first use: `import tokpipe` then loads no
# numpy, so the command line can settle numpy's thread settings before numpy starts (see
# `tokpipe.cli`).
_LAZY = {"LanguageModel", "TrainedLM", "train_lm"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from tokpipe import lm

        return getattr(lm, name)
    raise AttributeError(f"module 'tokpipe' has no attribute {name!r}")

__all__ = [
    "__version__",
    "Tokenizer",
    "train_bpe",
    "train_wordpiece",
    "train_unigram",
    "CorpusReport",
    "LanguageModel",
    "TrainedLM",
    "train_lm",
    "TokpipeError",
    "FormatError",
    "PatternError",
    "InvalidArgumentError",
    "ArgumentTypeError",
    "EncodeError",
    "CorpusError",
    "StateError",
    "StorageError",
    "InternalError",
]
