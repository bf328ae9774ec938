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
    "ArgumentTypeError",
    "EncodeError",
    "CorpusError",
    "StateError",
    "InternalError",
    "ConfigError",
    "PipelineError",
    "OutputConflictError",
    "NotAnOutputError",
    "NoDocumentsError",
    "StorageError",
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


class ArgumentTypeError(TokpipeError, TypeError):
    """An argument of the wrong kind: one string where a list of paths or texts is expected,
    a table where a record batch is, a column of the wrong Arrow type, a stage class without a
    ``name``. Also a ``TypeError``, as Python raises for such calls."""


class EncodeError(TokpipeError, ValueError):
    """Text could not be encoded as asked."""


class CorpusError(TokpipeError):
    """A training corpus is unusable: missing, empty, or invalid under ``strict``."""


class StateError(TokpipeError, RuntimeError):
    """An object was used in a state that forbids the call: a trainer asked to train a second
    time (or after an earlier call failed), a writer, reader or index used after it closed."""


class InternalError(TokpipeError, RuntimeError):
    """A bug in tokpipe: its Rust core panicked, or an invariant of its own code broke. The
    message says what failed; please report it. Raised instead of letting a panic unwind into
    the interpreter."""


class ConfigError(TokpipeError, ValueError):
    """A pipeline config is invalid: unknown stage or parameter, bad value, unreadable file."""


class PipelineError(TokpipeError):
    """A pipeline run failed (bad input under ``strict``, an output folder from another
    config, a stage that raised); the message names the file or stage."""


class OutputConflictError(PipelineError, ConfigError):
    """The output folder holds another run (begun with a different config, inputs, reader
    options or output format, and past its first committed task) or files that are no tokpipe
    run. A usage problem, fixed with ``--overwrite`` or another folder: a ``PipelineError`` as
    before, and a ``ConfigError``, so that ``tokpipe clean`` and ``tokpipe tokenize`` exit 2."""


class NotAnOutputError(ConfigError):
    """A folder given as a finished run's output (``tokpipe report``, ``tokpipe.report``) is
    not one: no ``manifest.json``, or one that is no ``tokpipe clean`` or ``tokpipe tokenize``
    manifest. A usage problem, as a ``ConfigError``: the command exits 2."""


class NoDocumentsError(PipelineError):
    """A run ended without reading a single document: every input unit was set aside as
    unreadable (a wrong ``text_field`` most often: the message names the fields the records
    have, and the closest one). The output folder is written all the same (``manifest.json``,
    ``errors.jsonl``); ``result`` is the run's result (a ``RunResult``, or for ``tokenize`` a
    ``TokenizeResult``)."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class StorageError(TokpipeError, OSError):
    """Object storage could not be used: its fsspec package (a tokpipe extra) is missing, no
    credentials were found, or the service failed. The message names the URL and the extra
    to install, never a credential. (A missing object or bucket is ``FileNotFoundError``,
    refused access ``PermissionError``, as for local files.)"""


class ConfigWarning(UserWarning):
    """A pipeline config is valid but likely wrong (a ``pii`` stage told to leave the documents
    earlier stages reject as they are, say); ``tokpipe clean`` prints it as one line."""
