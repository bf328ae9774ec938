"""The exception hierarchy every tokpipe error belongs to.

The Rust core has one error enum; the binding maps each variant onto one class here. Classes
that mean "the value you gave is wrong" also derive from ``ValueError`` so code that already
catches that keeps working. File-system failures are raised as Python's own ``OSError``
subclasses (``FileNotFoundError``...), with the file name set.

``ConfigWarning`` is the one warning: a config that runs, but probably not as meant.
"""

from __future__ import annotations

__all__ = [
    "TokpipeError",
    "FormatError",
    "PatternError",
    "InvalidArgumentError",
    "EncodeError",
    "CorpusError",
    "ConfigError",
    "PipelineError",
    "ConfigWarning",
]


class TokpipeError(Exception):
    """Base class of every error tokpipe raises on purpose."""


class FormatError(TokpipeError, ValueError):
    """A tokenizer file (tokenizer.json, .tiktoken, encoder.json, vocab.bpe) is malformed or
    uses a feature tokpipe does not support; the message names the file and the field."""


class PatternError(TokpipeError, ValueError):
    """A pre-tokenizer regex does not compile, or failed on some input."""


class InvalidArgumentError(TokpipeError, ValueError):
    """An argument cannot work (vocabulary too small, unknown token id, bad special token)."""


class EncodeError(TokpipeError, ValueError):
    """Text could not be encoded as asked."""


class CorpusError(TokpipeError):
    """A training corpus is unusable: missing, empty, or invalid under ``strict``."""


class ConfigError(TokpipeError, ValueError):
    """A pipeline config is invalid: unknown stage or parameter, bad value, unreadable file."""


class PipelineError(TokpipeError):
    """A pipeline run failed (bad input under ``strict``, an output folder from another
    config, a stage that raised); the message names the file or stage."""


class ConfigWarning(UserWarning):
    """A pipeline config is valid but likely wrong (a ``pii`` stage told to leave the documents
    earlier stages reject as they are, say); ``tokpipe clean`` prints it as one line."""
