"""Pipeline configs: YAML, TOML and JSON files, defaults, and errors that name the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpipe.errors import ConfigError
from tokpipe.pipeline import DEFAULT_STAGES, load_config, parse_config


def test_yaml_and_toml_give_the_same_pipeline(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("stages:\n  - type: normalize\n    form: NFKC\n  - type: length_filter\n    min: 20\n"
                                     "  - type: exact_dedup\n", encoding="utf-8")
    (tmp_path / "p.toml").write_text('[[stages]]\ntype = "normalize"\nform = "NFKC"\n\n[[stages]]\ntype = "length_filter"\n'
                                     'min = 20\n\n[[stages]]\ntype = "exact_dedup"\n', encoding="utf-8")
    a, b = load_config(tmp_path / "p.yaml"), load_config(tmp_path / "p.toml")
    assert a == b
    assert [type(s).__name__ for s in a.build()] == ["Normalize", "LengthFilter", "ExactDedup"]
    effective = a.to_dict()["stages"]
    assert effective[0]["form"] == "NFKC" and effective[0]["clean_whitespace"] is True
    assert effective[1]["min"] == 20 and effective[1]["max"] is None


def test_default_pipeline() -> None:
    assert [s["type"] for s in load_config(None).to_dict()["stages"]] == [s["type"] for s in DEFAULT_STAGES]


@pytest.mark.parametrize(("data", "message"), [
    ({"stages": [{"type": "nope"}]}, "unknown stage 'nope'"),
    ({"stages": [{"type": "length_filter", "minimum": 3}]}, "has no parameter 'minimum'"),
    ({"stages": [{"type": "length_filter", "unit": "words"}]}, "unit must be chars or bytes"),
    ({"stages": [{"type": "normalize", "form": "NFX"}]}, "form must be one of"),
    ({"stages": [{"type": "gopher_quality", "min_doc_words": "fifty"}]},
     r"^p\.yaml: stages\[1\] \(gopher_quality\): min_doc_words must be an integer or null, got 'fifty'$"),
    ({"stages": [{"form": "NFC"}]}, "mapping with a `type`"),
    ({"stages": []}, "non-empty list"),
    ({"stages": [{"type": "normalize"}], "stage": []}, "unknown top-level key 'stage'"),
    (["normalize"], "expected a mapping"),
])
def test_invalid_configs_name_the_problem(data: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(data, "p.yaml")


def test_unreadable_or_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    (tmp_path / "bad.yaml").write_text("stages: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid yaml"):
        load_config(tmp_path / "bad.yaml")


@pytest.mark.parametrize(("stage_type", "message"), [
    ("no_such_module_here:ShortDocs",
     r"^p\.yaml: stages\[1\]: stage 'no_such_module_here:ShortDocs': cannot import module 'no_such_module_here' "
     r"\(ModuleNotFoundError: No module named 'no_such_module_here'\)"),
    ("tokpipe.pipeline.stages.length:ShortDocs",
     r"stage 'tokpipe.pipeline.stages.length:ShortDocs': module 'tokpipe.pipeline.stages.length' has no class 'ShortDocs'"),
    ("tokpipe.pipeline.stages.length:LengthFilter.nope", "has no class 'LengthFilter.nope'"),
    ("tokpipe.pipeline.config:parse_config", "parse_config is a function, not a stage class"),
    ("tokpipe.pipeline.config:", "expected module.path:ClassName"),
    (":LengthFilter", "expected module.path:ClassName"),
])
def test_a_class_named_by_its_module_must_be_a_stage(stage_type: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        parse_config({"stages": [{"type": stage_type}]}, "p.yaml")
    assert "\n" not in str(raised.value)


def test_a_class_named_by_its_module_goes_by_that_name(tmp_path: Path) -> None:
    """It needs no registration; the run's stats and its rejected documents name it as the
    config does, and the effective config keeps the name (a rerun finds the class again)."""
    (tmp_path / "p.yaml").write_text("stages:\n  - type: tokpipe.pipeline.stages.length:LengthFilter\n    min: 20\n",
                                     encoding="utf-8")
    config = load_config(tmp_path / "p.yaml")
    (stage,) = config.build()
    assert type(stage).__name__ == "LengthFilter" and stage.name == "tokpipe.pipeline.stages.length:LengthFilter"
    assert config.to_dict()["stages"][0] == {"type": "tokpipe.pipeline.stages.length:LengthFilter", "min": 20,
                                             "max": None, "unit": "chars"}
    import tokpipe.pipeline as pipeline

    applied = pipeline.apply(["short", "long enough to be kept, this one"], config, rejected=True)
    assert applied.kept.column("text").to_pylist() == ["long enough to be kept, this one"]
    assert applied.rejected is not None and applied.rejected.column("stage").to_pylist() == [stage.name]
    assert applied.stats[stage.name].dropped["too_short"] == 1
