"""Pipeline configs: a YAML or TOML file with a top-level ``stages:`` list, validated into stages.

::

    stages:
      - type: normalize
        form: NFKC
      - type: length_filter
        min: 200
      - type: exact_dedup

Each item names a registered stage (``type``) and gives its parameters; anything unknown
(stage, parameter, top-level key) is an error naming it, before any data is read. A config
that is valid but probably not what was meant (``Stage.config_warnings``: a ``pii`` stage
with ``scrub_rejected: false`` after stages that drop documents) raises a
``tokpipe.errors.ConfigWarning``.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokpipe.errors import ConfigError, ConfigWarning, TokpipeError
from tokpipe.pipeline.base import Stage

__all__ = ["PipelineConfig", "StageSpec", "DEFAULT_STAGES", "load_config", "parse_config"]

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

    def build(self) -> Stage:
        return _stages()[self.type](**self.params)


@dataclass(frozen=True)
class PipelineConfig:
    stages: tuple[StageSpec, ...]

    def build(self) -> list[Stage]:
        return [spec.build() for spec in self.stages]

    def to_dict(self) -> dict[str, Any]:
        """The effective config: every stage with every parameter, defaults filled in."""
        return {"stages": [{"type": s.type, **_effective_params(s)} for s in self.stages]}

    def fingerprint(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _effective_params(spec: StageSpec) -> dict[str, Any]:
    signature = inspect.signature(_stages()[spec.type].__init__)
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
    known = _stages()
    specs = []
    built: list[Stage] = []
    for n, item in enumerate(items, 1):
        where = f"{source}: stages[{n}]"
        if not isinstance(item, dict) or "type" not in item:
            raise ConfigError(f"{where}: each stage is a mapping with a `type`")
        params = dict(item)
        name = params.pop("type")
        cls = known.get(name)
        if cls is None:
            raise ConfigError(f"{where}: unknown stage {name!r} (known: {', '.join(known)})")
        signature = inspect.signature(cls.__init__)
        accepted = [p for p in signature.parameters if p != "self"]
        for key in params:
            if key not in accepted:
                raise ConfigError(f"{where}: stage {name!r} has no parameter {key!r} "
                                  f"(parameters: {', '.join(accepted) or 'none'})")
        spec = StageSpec(name, params)
        try:
            built.append(spec.build())  # constructors validate their values
        except (TokpipeError, TypeError, ValueError) as e:
            raise ConfigError(f"{where} ({name}): {e}") from None
        specs.append(spec)
    # Checks of a stage's place among the others (a `pii` stage after stages that drop
    # documents, say): the config runs, so they warn instead of failing.
    for n, stage in enumerate(built):
        for message in stage.config_warnings(built[:n]):
            warnings.warn(f"{source}: stages[{n + 1}] ({stage.name}): {message}", ConfigWarning, stacklevel=2)
    return PipelineConfig(tuple(specs))


def load_config(path: str | os.PathLike[str] | None) -> PipelineConfig:
    """The config in ``path`` (``.yaml``/``.yml``/``.toml``/``.json``), or the default pipeline."""
    if path is None:
        return parse_config({"stages": DEFAULT_STAGES}, "default pipeline")
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config ({e.strerror or e})") from None
    suffix = path.suffix.lower()
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
        raise ConfigError(f"{path}: not valid {suffix.lstrip('.') or 'YAML'}: {' '.join(str(e).split())}") from None
    return parse_config(data, str(path))


def _stages() -> dict[str, type[Stage]]:
    """The registered stages, built-in ones imported on first use: importing the pipeline
    (for a reader, say) does not load every stage's dependencies."""
    from tokpipe.pipeline.stages import registered_stages

    return registered_stages()
