"""The manual's examples run: every ```python block of ``docs/*.md`` is executed in an empty
folder, and every ```yaml block that is a pipeline config is validated as one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tokpipe.pipeline.config import parse_config

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = sorted((REPO / "docs").glob("*.md"))


def blocks(language: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for n, match in enumerate(BLOCK.finditer(page.read_text(encoding="utf-8"))):
            if match.group(1) == language:
                found.append((f"{page.name}#{n}", match.group(2)))
    return found


def test_the_manual_has_pages() -> None:
    assert {p.name for p in PAGES} >= {"pii.md", "tokenize.md", "robustness.md"}


@pytest.mark.parametrize(("where", "code"), blocks("python"), ids=[w for w, _ in blocks("python")])
def test_python_examples_run(where: str, code: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"{where}:\n{result.stderr}"


@pytest.mark.parametrize(("where", "text"), blocks("yaml"), ids=[w for w, _ in blocks("yaml")])
def test_yaml_configs_are_valid(where: str, text: str) -> None:
    data = yaml.safe_load(text)
    assert isinstance(data, dict) and "stages" in data, f"{where} is not a pipeline config"
    parse_config(data, where)
