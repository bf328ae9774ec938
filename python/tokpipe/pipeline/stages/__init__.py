"""The built-in stages, and the lookup of the stage a config names: importing this package
registers them.

Stages register themselves with ``@register`` (:mod:`tokpipe.pipeline.base`) when their module
is imported. The lookup lives here, above the stage modules, so that it can import them all
first while they import only :mod:`tokpipe.pipeline.base`: no module imports back a module
that imports it.

A config's ``type`` is a registered name (``short_docs``) or a class's import path
(``mypkg.stages:ShortDocs``), which :func:`resolve_stage` imports: a stage of your own then
needs no registration, and ``tokpipe clean`` can run it. A worker process is also handed the
run's stage classes (:func:`adopt_stage`, see ``engines.shipping``), since a class defined in
``__main__`` or a notebook cell cannot be imported there.
"""

from __future__ import annotations

import importlib

from tokpipe.errors import ConfigError
from tokpipe.pipeline.base import REGISTRY, Stage
from tokpipe.pipeline.stages.decontaminate import Decontaminate
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
from tokpipe.pipeline.stages.sentences import SentenceDedup
from tokpipe.pipeline.stages.text_stats import Blocklist, TextStats
from tokpipe.pipeline.stages.tokenize import Tokenize
from tokpipe.pipeline.stages.url_filter import UrlFilter

__all__ = ["Normalize", "LengthFilter", "ExactDedup", "MinhashDedup", "ParagraphDedup", "C4Quality", "C4BadWords",
           "FineWebQuality", "GopherQuality", "GopherRepetition", "TextStats", "Blocklist", "LanguageFilter", "Perplexity",
           "Pii", "QualityClassifierFilter", "Tokenize", "UrlFilter", "registered_stages", "stage_class", "resolve_stage",
           "adopt_stage", "Decontaminate", "SentenceDedup"]

#: Stage classes this process was handed by the run, by the config's ``type``: a worker
#: process's, which it could not import (``engines.shipping``). Looked up first.
_adopted: dict[str, type[Stage]] = {}


def registered_stages() -> dict[str, type[Stage]]:
    """Every registered stage by name: the built-in ones (imported with this package) and the
    user stages registered so far."""
    return REGISTRY.snapshot()


def stage_class(name: str) -> type[Stage] | None:
    """The stage registered under ``name``, or None."""
    return REGISTRY.snapshot().get(name)


def resolve_stage(type_name: str) -> type[Stage]:
    """The stage class a config's ``type`` names: a registered name, or
    ``module.path:ClassName`` (the module imported, ``ClassName`` may be dotted for a nested
    class). Raises a one-line ``ConfigError`` naming what is wrong: an unknown name, a module
    that does not import, a missing class, or one that is not a stage."""
    adopted = _adopted.get(type_name)
    if adopted is not None:
        return adopted
    if ":" not in type_name:
        known = REGISTRY.snapshot()
        if type_name not in known:
            raise ConfigError(f"unknown stage {type_name!r} (known: {', '.join(known)}); a stage class of your own "
                              "is named as module.path:ClassName")
        return known[type_name]
    module_name, _, qualname = type_name.partition(":")
    if not module_name or not qualname:
        raise ConfigError(f"stage {type_name!r}: expected module.path:ClassName")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"stage {type_name!r}: cannot import module {module_name!r} "
                          f"({type(error).__name__}: {error}); is its folder on sys.path (PYTHONPATH)?") from None
    except Exception as error:  # noqa: BLE001 - the user's module failed as it ran: say so in one line
        raise ConfigError(f"stage {type_name!r}: importing module {module_name!r} failed: "
                          f"{type(error).__name__}: {' '.join(str(error).split())[:300]}") from None
    for part in qualname.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise ConfigError(f"stage {type_name!r}: module {module_name!r} has no class {qualname!r}")
    if not (isinstance(found, type) and issubclass(found, Stage)):
        raise ConfigError(f"stage {type_name!r}: {qualname} is a {type(found).__name__}, not a stage class "
                          "(a subclass of tokpipe.pipeline.Stage, Filter or GlobalStage)")
    return found


def adopt_stage(type_name: str, cls: type[Stage]) -> None:
    """Makes a config's ``type_name`` name ``cls`` in this process, before any lookup: for a
    worker process handed the run's stage classes (``engines.shipping``)."""
    _adopted[type_name] = cls
