"""The run's stage classes, sent to the processes that run its work units.

A work unit rebuilds its stages from the config (``StageSpec.build``), which names each
stage's class: a registered name or ``module.path:ClassName``. A worker process is a fresh
interpreter that does not run the user's main module again (``engines.workers``), and a Ray
worker may be on another machine, so a class defined in ``__main__`` (a script, a notebook
cell, ``python -c``) or inside a function cannot be found there by its name, and a class
registered by a module the main module imported is not registered there.

So the run hands every worker the classes of its config (:func:`stage_payload`, once per run;
:func:`adopt_stages` in the worker): by reference (module and name; the worker imports the
module, which registers what it registers) where the class can be imported, by value with
``cloudpickle`` where it cannot. Without ``cloudpickle``, a class that cannot be imported is
a one-line error before any work, saying what to do instead.
"""

from __future__ import annotations

import importlib
import pickle
import sys
from types import ModuleType
from typing import Any

from tokpipe.errors import PipelineError
from tokpipe.pipeline.base import Stage
from tokpipe.pipeline.config import PipelineConfig

__all__ = ["stage_payload", "adopt_stages", "cloudpickle_module"]

#: What a stage class's module is called when the class was defined in the main script, a
#: notebook or ``python -c`` (``__mp_main__``: the main module re-run by a spawned process).
_MAIN_MODULES = ("__main__", "__mp_main__")


def cloudpickle_module() -> ModuleType | None:
    """``cloudpickle`` if it can be imported, else None."""
    try:
        import cloudpickle
    except ImportError:
        return None
    return cloudpickle


def stage_payload(config: PipelineConfig) -> bytes:
    """The config's stage classes, by its ``type`` names, as bytes for :func:`adopt_stages`.
    Raises a one-line ``PipelineError`` when one of them cannot reach another process."""
    classes: dict[str, type[Stage]] = {}
    for spec in config.stages:
        classes.setdefault(spec.type, spec.stage_class())
    pairs = list(classes.items())
    cloudpickle = cloudpickle_module()
    if cloudpickle is None:
        for type_name, cls in pairs:
            where = _not_importable(cls)
            if where is not None:
                raise PipelineError(f"stage {type_name!r}: class {cls.__qualname__} is defined {where}, which the worker "
                                    "processes cannot import; install cloudpickle (pip install cloudpickle) to have it "
                                    "sent to them, move the class into a module of its own and import it from there, or "
                                    "run with workers=1")
    try:
        return (cloudpickle or pickle).dumps(pairs)
    except Exception as error:  # noqa: BLE001 - whatever a class holds that pickling refuses, in one line
        raise PipelineError(f"the stage classes of the config cannot be sent to the worker processes "
                            f"({type(error).__name__}: {' '.join(str(error).split())[:300]}); move them into a module "
                            "of their own and import them from there, or run with workers=1") from None


def adopt_stages(payload: bytes) -> None:
    """In a worker: makes the config's ``type`` names find the classes of ``payload`` (from
    :func:`stage_payload`), before any of them is looked up."""
    from tokpipe.pipeline.stages import adopt_stage

    pairs: list[tuple[str, type[Stage]]] = pickle.loads(payload)
    for type_name, cls in pairs:
        adopt_stage(type_name, cls)


def _not_importable(cls: type[Any]) -> str | None:
    """Where ``cls`` was defined, when another process cannot import it from there; None when
    it can (its module imports and gives back this very class under its qualified name)."""
    if cls.__module__ in _MAIN_MODULES:
        return "in __main__ (a script, a notebook or python -c)"
    if "<locals>" in cls.__qualname__:
        return "inside a function"
    try:
        found: Any = sys.modules.get(cls.__module__) or importlib.import_module(cls.__module__)
        for part in cls.__qualname__.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return f"in {cls.__module__}, where it cannot be found again by its name"
    return None if found is cls else f"in {cls.__module__}, where its name now holds another object"
