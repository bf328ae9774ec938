"""Pipeline configs: a YAML or TOML file with a top-level ``stages:`` list, validated into stages.

::

    stages:
      - type: normalize
        form: NFKC
      - type: length_filter
        min: 200
      - type: exact_dedup

Each item names a stage (``type``: a registered name, or a class's import path
``mypkg.stages:ShortDocs``, see :func:`tokpipe.pipeline.stages.resolve_stage`) and gives its
parameters; anything unknown (stage, module, class, parameter, top-level key) is an error
naming it, before any data is read, and so is a value of the wrong type for its parameter
(``min_doc_words: fifty``; checked against the annotations of the stage's ``__init__``, see
:mod:`tokpipe.pipeline.params`). A config that is valid but probably not what was meant
(``Stage.config_warnings``: a ``pii`` stage with ``scrub_rejected: false`` after stages that
drop documents) raises a ``tokpipe.errors.ConfigWarning``.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokpipe import storage
from tokpipe.errors import ConfigError, ConfigWarning, TokpipeError
from tokpipe.pipeline.base import Stage, numbered
from tokpipe.pipeline.params import check_params

__all__ = ["PipelineConfig", "StageSpec", "DEFAULT_STAGES", "load_config", "parse_config", "check_types"]

#: The pipeline ``tokpipe clean`` runs without a config.
DEFAULT_STAGES: list[dict[str, Any]] = [
    {"type": "normalize"},
    {"type": "length_filter"},
    {"type": "exact_dedup"},
]

_TOP_LEVEL = ("stages",)


@dataclass(frozen=True)
class StageSpec:
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    #: The stage's name in the run when its type came earlier in the config (``TYPE-2``,
    #: ``TYPE-3``...; set by :class:`PipelineConfig`), else empty: the type is its name.
    label: str = ""

    @property
    def run_name(self) -> str:
        """The name the run knows the stage by: its row of stats, and the ``stage`` column of
        the documents it rejects."""
        return self.label or self.type

    def to_wire(self) -> dict[str, Any]:
        """The spec as plain data, for a worker process (:meth:`from_wire`)."""
        return {"type": self.type, "params": self.params, "label": self.label}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> StageSpec:
        return cls(data["type"], data["params"], data["label"])

    def stage_class(self) -> type[Stage]:
        """The class ``type`` names (``ConfigError`` when none). The stages are imported on
        first use: importing the pipeline (for a reader, say) does not load every stage's
        dependencies."""
        from tokpipe.pipeline.stages import resolve_stage

        return resolve_stage(self.type)

    def build(self) -> Stage:
        stage = self.stage_class()(**self.params)
        if stage.name != self.run_name:
            # A class named by its import path, or a type met again: the stage goes by its
            # name in the run, in its stats and in the `stage` column of what it rejects.
            stage.name = self.run_name  # type: ignore[misc]
        return stage


@dataclass(frozen=True)
class PipelineConfig:
    stages: tuple[StageSpec, ...]

    def __post_init__(self) -> None:
        # Stats are kept per stage: a type met again gets a label of its own (numbered as
        # its folder under rejected/ is), or two stages' counts would share one row.
        stages = tuple(self.stages)
        names = numbered([spec.type for spec in stages])
        labelled = tuple(replace(spec, label="" if name == spec.type else name) for spec, name in zip(stages, names))
        object.__setattr__(self, "stages", labelled)

    def build(self) -> list[Stage]:
        return [spec.build() for spec in self.stages]

    def to_dict(self) -> dict[str, Any]:
        """The effective config: every stage with every parameter, defaults filled in."""
        return {"stages": [{"type": s.type, **_effective_params(s)} for s in self.stages]}

    def fingerprint(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _effective_params(spec: StageSpec) -> dict[str, Any]:
    signature = inspect.signature(spec.stage_class().__init__)
    params = {name: p.default for name, p in signature.parameters.items()
              if name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty}
    params.update(spec.params)
    return params


def parse_config(data: Any, source: str = "config") -> PipelineConfig:
    """Validate a parsed config (a mapping with ``stages``) and build nothing yet."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with a `stages` list, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_TOP_LEVEL))
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key {unknown[0]!r} (known: {', '.join(_TOP_LEVEL)})")
    items = data.get("stages")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: `stages` must be a non-empty list")
    specs = []
    built: list[Stage] = []
    for n, item in enumerate(items, 1):
        where = f"{source}: stages[{n}]"
        if not isinstance(item, dict) or "type" not in item:
            raise ConfigError(f"{where}: each stage is a mapping with a `type`")
        params = dict(item)
        name = params.pop("type")
        if not isinstance(name, str):
            raise ConfigError(f"{where}: `type` must be a stage's name or module.path:ClassName, "
                              f"not a {type(name).__name__}")
        try:
            cls = StageSpec(name).stage_class()
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
        signature = inspect.signature(cls.__init__)
        accepted = [p for p in signature.parameters if p != "self"]
        for key in params:
            if key not in accepted:
                raise ConfigError(f"{where}: stage {name!r} has no parameter {key!r} "
                                  f"(parameters: {', '.join(accepted) or 'none'})")
        try:
            # Types first, from the constructor's annotations: a constructor that stores a
            # value without looking would let a wrong one fail later, in a worker.
            params = check_params(cls, params)
        except ConfigError as e:
            raise ConfigError(f"{where} ({name}): {e}") from None
        spec = StageSpec(name, params)
        try:
            stage = spec.build()  # constructors validate their values
        except (TokpipeError, TypeError, ValueError) as e:
            raise ConfigError(f"{where} ({name}): {e}") from None
        built.append(stage)
        pinned = stage.pinned_params()  # (see Stage.pinned_params)
        specs.append(StageSpec(name, {**params, **pinned}) if pinned else spec)
    # Checks of a stage's place among the others (a `pii` stage after stages that drop
    # documents, say): the config runs, so they warn instead of failing.
    for n, stage in enumerate(built):
        for message in stage.config_warnings(built[:n]):
            warnings.warn(f"{source}: stages[{n + 1}] ({stage.name}): {message}", ConfigWarning, stacklevel=2)
    return PipelineConfig(tuple(specs))


def check_types(config: PipelineConfig, source: str = "config") -> PipelineConfig:
    """``config`` with its values checked against its stages' parameter types (as
    :func:`parse_config` checks them), for a config made in Python without it; values as the
    stages take them (a path as its string)."""
    specs = []
    for n, spec in enumerate(config.stages, 1):
        where = f"{source}: stages[{n}]"
        try:
            params = check_params(spec.stage_class(), spec.params)
        except ConfigError as e:
            raise ConfigError(f"{where} ({spec.type}): {e}") from None
        specs.append(spec if all(params[k] is v for k, v in spec.params.items()) else StageSpec(spec.type, params))
    return PipelineConfig(tuple(specs))


def load_config(path: str | os.PathLike[str] | None) -> PipelineConfig:
    """The config in ``path`` (``.yaml``/``.yml``/``.toml``/``.json``; a path or an
    object-storage URL), or the default pipeline."""
    if path is None:
        return parse_config({"stages": DEFAULT_STAGES}, "default pipeline")
    where = storage.location(path) if storage.is_url(os.fspath(path)) else Path(path)
    shown = storage.redact(str(where)) if isinstance(where, storage.RemotePath) else str(where)
    try:
        if isinstance(where, storage.RemotePath):
            with storage.open_input(where) as f:
                raw = f.read().decode("utf-8")
        else:
            raw = where.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{shown}: cannot read the config ({e.strerror or e})") from None
    suffix = where.suffix.lower()
    try:
        if suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # Python < 3.11
                import tomli as tomllib  # type: ignore[no-redef]
            data = tomllib.loads(raw)
        elif suffix == ".json":
            data = json.loads(raw)
        else:
            import yaml

            data = yaml.safe_load(raw)
    except Exception as e:  # each parser has its own error class; all mean "not valid syntax"
        raise ConfigError(f"{shown}: not valid {suffix.lstrip('.') or 'YAML'}: {' '.join(str(e).split())}") from None
    return parse_config(data, shown)
