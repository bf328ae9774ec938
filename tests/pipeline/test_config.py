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
