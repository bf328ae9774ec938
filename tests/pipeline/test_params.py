"""Stage parameter values checked against the constructors' annotations before any work
(issue 22): a value of the wrong type is one ``ConfigError`` line naming the stage, the
parameter, the expected type and the value, for the built-in stages and for one's own."""

from __future__ import annotations

import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tokpipe.pipeline as pipeline
from tokpipe.errors import ConfigError
from tokpipe.pipeline import PipelineConfig, parse_config
from tokpipe.pipeline.config import StageSpec
from tokpipe.pipeline.params import check_params, param_types, parse_annotation
from tokpipe.pipeline.stages import registered_stages

#: A value no parameter of a built-in stage takes: a mapping whose value is a list (not a
#: string, number, boolean, list, nor a mapping of strings to strings).
WRONG = {"nested": [1.5]}
#: The built-in stages (other test modules register stages of their own).
BUILTIN = {name: cls for name, cls in registered_stages().items() if cls.__module__.startswith("tokpipe.")}


def test_every_built_in_stage_declares_a_checked_type_its_defaults_have() -> None:
    """A parameter without an annotation this module reads would go unchecked, and a default
    outside its own type would make the check refuse the effective config."""
    unchecked, bad_defaults = [], []
    assert len(BUILTIN) >= 17
    for name, cls in BUILTIN.items():
        signature = inspect.signature(cls.__init__)
        for param, kind in param_types(cls).items():
            if kind is None:
                unchecked.append(f"{name}.{param}")
                continue
            default = signature.parameters[param].default
            if default is not inspect.Parameter.empty and not kind.accepts(default):
                bad_defaults.append(f"{name}.{param}={default!r}")
    assert unchecked == [] and bad_defaults == []
    # The effective config of every stage (its defaults, written out) passes the check.
    for cls in BUILTIN.values():
        defaults = {p: v.default for p, v in inspect.signature(cls.__init__).parameters.items()
                    if p != "self" and v.default is not inspect.Parameter.empty}
        check_params(cls, defaults)


@pytest.mark.parametrize("stage", sorted(BUILTIN))
def test_a_wrong_value_for_any_parameter_is_refused_before_the_stage_is_built(stage: str) -> None:
    for param in param_types(BUILTIN[stage]):
        with pytest.raises(ConfigError) as raised:
            parse_config({"stages": [{"type": "normalize"}, {"type": stage, param: WRONG}]}, "p.yaml")
        message = str(raised.value)
        assert message.startswith(f"p.yaml: stages[2] ({stage}): {param} must be ")
        assert message.endswith(", got {'nested': [1.5]}") and "\n" not in message


def test_the_message_names_stage_parameter_type_and_value() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"stages": [{"type": "normalize"}, {"type": "gopher_quality", "min_doc_words": "fifty"}]},
                     "p.yaml")
    assert str(raised.value) == "p.yaml: stages[2] (gopher_quality): min_doc_words must be an integer or null, got 'fifty'"
    with pytest.raises(ConfigError) as raised:
        parse_config({"stages": [{"type": "exact_dedup", "lowercase": "yes"}]}, "p.yaml")
    assert str(raised.value) == "p.yaml: stages[1] (exact_dedup): lowercase must be a boolean (true or false), got 'yes'"
    with pytest.raises(ConfigError) as raised:
        parse_config({"stages": [{"type": "gopher_quality", "min_stop_words": "many"}]}, "p.yaml")
    assert str(raised.value) == "p.yaml: stages[1] (gopher_quality): min_stop_words must be an integer, 'auto' or null, " \
                                "got 'many'"
    with pytest.raises(ConfigError) as raised:
        parse_config({"stages": [{"type": "pii", "types": "x" * 100}]}, "p.yaml")
    assert str(raised.value) == "p.yaml: stages[1] (pii): types must be a list of strings or null, got '" + "x" * 56 + "..."


@pytest.mark.parametrize(("annotation", "value", "accepted"), [
    ("int", 3, True),
    ("int", True, False),  # a boolean is no integer
    ("int", 3.0, False),
    ("int", np.int64(3), True),
    ("float", 3, True),  # an integer is a number
    ("float", False, False),
    ("float", "0.5", False),
    ("bool", 1, False),
    ("bool", True, True),
    ("str", 7, False),
    ("str", Path("a/b.txt"), True),
    ("str | None", None, True),
    ("int | None", "fifty", False),
    ("Optional[int]", None, True),
    ("Union[int, str]", 2.5, False),
    ("Literal['chars', 'bytes']", "bytes", True),
    ("Literal['chars', 'bytes']", "words", False),
    ("Literal[1, 2]", True, False),
    ("list[str]", ["a", "b"], True),
    ("list[str]", ("a", "b"), True),
    ("list[str]", "ab", False),  # a string is no list of strings
    ("list[str]", ["a", 1], False),
    ("List[int]", [1, 2], True),
    ("Sequence[Sequence[float]]", [[2, 0.2], [3, 0.18]], True),
    ("Sequence[Sequence[float]]", [[2, "x"]], False),
    ("tuple[int, float]", [1, 2.5], True),
    ("tuple[int, float]", [1], False),
    ("tuple[int, ...]", [1, 2, 3], True),
    ("dict[str, str]", {"email": "mask"}, True),
    ("dict[str, str]", {"email": 1}, False),
    ("dict[str, str]", ["email"], False),
    ("Mapping[str, int]", {"a": 1}, True),
    ("str | os.PathLike[str]", Path("x"), True),
    ("MyOwnClass", object(), True),  # a type it does not know is left to the constructor
    ("int | MyOwnClass", "anything", True),
    ("list[MyOwnClass]", [object()], True),
    ("list[MyOwnClass]", "not a list", False),
])
def test_the_rules(annotation: str, value: Any, accepted: bool) -> None:
    kind = parse_annotation(annotation)
    assert (kind is None or kind.accepts(value)) is accepted


@pytest.mark.parametrize(("annotation", "text"), [
    (typing.Optional[int], "int | None"),
    (typing.Union[int, str, None], "int | str | None"),
    (typing.List[str], "list[str]"),
    (typing.Dict[str, float], "dict[str, float]"),
    (typing.Literal["a", "b"], "Literal['a', 'b']"),
    (typing.Tuple[int, ...], "tuple[int, ...]"),
    (typing.Sequence[typing.Sequence[float]], "Sequence[Sequence[float]]"),
    (bool, "bool"),
    (type(None), "None"),
])
def test_annotation_objects_read_as_their_text(annotation: Any, text: str) -> None:
    """A module without ``from __future__ import annotations`` holds the objects."""
    assert parse_annotation(annotation) == parse_annotation(text) is not None


def test_a_shorthand_a_stage_takes_is_declared() -> None:
    """``languages: en`` is one language: the constructor takes it, so its type says so."""
    assert check_params(BUILTIN["language"], {"languages": "en"}) == {"languages": "en"}


def test_values_are_stored_as_the_stage_takes_them() -> None:
    """A path is its string and a numpy number a Python one: the config is written as JSON
    (the run's identity), which takes neither."""
    cls = registered_stages()["blocklist"]
    checked = check_params(cls, {"words_file": Path("w.txt"), "max_per_1000_words": np.float32(0.5)})
    assert checked == {"words_file": "w.txt", "max_per_1000_words": 0.5}
    assert type(checked["max_per_1000_words"]) is float
    assert json.dumps(check_params(registered_stages()["length_filter"], {"min": np.int64(3), "max": None})) == \
        '{"min": 3, "max": null}'


def test_a_path_object_in_a_python_config_runs(tmp_path: Path) -> None:
    """It used to fail as the run recorded its config: "Object of type PosixPath is not JSON
    serializable"."""
    (tmp_path / "words.txt").write_text("bad\n", encoding="utf-8")
    (tmp_path / "in.jsonl").write_text('{"text": "a bad text"}\n{"text": "a fine text"}\n', encoding="utf-8")
    result = pipeline.run([tmp_path / "in.jsonl"], tmp_path / "out",
                          {"stages": [{"type": "blocklist", "words_file": tmp_path / "words.txt"}]}, workers=1)
    assert result.kept == 1 and result.stats["blocklist"].dropped["blocklist"] == 1


def test_a_config_made_in_python_is_checked_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"text": "a text"}\n', encoding="utf-8")
    config = PipelineConfig((StageSpec("normalize"), StageSpec("gopher_quality", {"min_doc_words": "fifty"})))
    with pytest.raises(ConfigError) as raised:
        pipeline.run([tmp_path / "in.jsonl"], tmp_path / "out", config, workers=1)
    assert str(raised.value) == "config: stages[2] (gopher_quality): min_doc_words must be an integer or null, got 'fifty'"
    assert not (tmp_path / "out").exists()


@pipeline.register
class _Shout(pipeline.Stage):
    """A user stage, registered, whose module uses ``from __future__ import annotations``."""

    name = "test_params_shout"

    def __init__(self, times: int = 1, marks: list[str] | None = None) -> None:
        self.times = times
        self.marks = marks

    def apply(self, batch: Any) -> pipeline.StageResult:
        return pipeline.StageResult(batch)


def test_a_registered_stage_of_ones_own_is_checked() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"stages": [{"type": "test_params_shout", "times": "twice"}]}, "p.yaml")
    assert str(raised.value) == "p.yaml: stages[1] (test_params_shout): times must be an integer, got 'twice'"
    with pytest.raises(ConfigError, match=r"marks must be a list of strings or null, got \['!', 2\]"):
        parse_config({"stages": [{"type": "test_params_shout", "marks": ["!", 2]}]}, "p.yaml")
    parse_config({"stages": [{"type": "test_params_shout", "times": 2, "marks": ["!"]}]}, "p.yaml")


def test_a_stage_named_by_its_module_path_with_annotation_objects_is_checked(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_params_stages.py").write_text(
        "import typing\n"
        "import pyarrow as pa\n"
        "from tokpipe.pipeline import Stage, StageResult\n\n"
        "class Cut(Stage):\n"
        "    name = 'cut'\n\n"
        "    def __init__(self, ratio: float = 0.5, mode: typing.Literal['head', 'tail'] = 'head',\n"
        "                 keep: typing.Optional[typing.List[str]] = None) -> None:\n"
        "        self.ratio, self.mode, self.keep = ratio, mode, keep\n\n"
        "    def apply(self, batch: pa.RecordBatch) -> StageResult:\n"
        "        return StageResult(batch)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_params_stages", raising=False)
    with pytest.raises(ConfigError) as raised:
        parse_config({"stages": [{"type": "my_params_stages:Cut", "mode": "middle"}]}, "p.yaml")
    assert str(raised.value) == "p.yaml: stages[1] (my_params_stages:Cut): mode must be one of 'head', 'tail', " \
                                "got 'middle'"
    with pytest.raises(ConfigError, match="ratio must be a number, got True"):
        parse_config({"stages": [{"type": "my_params_stages:Cut", "ratio": True}]}, "p.yaml")
    config = parse_config({"stages": [{"type": "my_params_stages:Cut", "ratio": 1, "keep": ["a"]}]}, "p.yaml")
    assert config.stages[0].params == {"ratio": 1, "keep": ["a"]}
