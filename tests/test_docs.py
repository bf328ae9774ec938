"""The manual cannot go stale: README.md and every page of ``docs/`` are checked against the code.

- **Every example runs.** A page's ```bash and ```python blocks run in order, in one fresh
  folder per page, as a reader would type them from the repository root: the folder holds a
  copy of ``examples/``, and the published vocabulary files the examples name
  (``cl100k_base.tiktoken.gz``, ``o200k_base.tiktoken.gz``, GPT-2's ``encoder.json`` and
  ``vocab.bpe``, BERT's ``vocab.txt``), copied from the shared corpora. Files persist from
  block to block; Python variables do not (each block is its own ``python -c``, so each
  imports what it uses). ``tokpipe`` and ``python3`` are this interpreter's. ``pip install``
  is not run: the suite runs where it has been done.
- A block right after ``<!-- file: NAME -->`` is written to ``NAME`` instead of being run (a
  config or a module that later blocks use). A block right after ``<!-- not run: REASON -->``
  is not run; the reason says why it cannot run here (a Ray cluster's address, the test
  command itself). ```text blocks are output or syntax, never run; every fence names its
  language, so no example is skipped by accident.
- Every ```yaml block is a valid pipeline config.
- The stage reference (``docs/pipeline.md``) has a section for every registered stage, whose
  table lists exactly its constructor's parameters with their defaults.
- The CLI reference (``docs/cli.md``) has a section for every ``tokpipe`` command, naming
  every option of it (every flag spelling), and no option the command lacks.
- The layout table (``docs/development.md``) names only paths that exist, and every Python
  package of ``python/tokpipe`` and every top-level module of ``rust/tokpipe-core/src``.
- Relative links and their ``#anchors`` resolve; every page is reachable from
  ``docs/index.md``; README.md stays a front door (about 6 KB).
- The README's first command, on the shipped example, rejects a document by a rule, drops a
  duplicate and sets an unreadable record aside, and writes only under the ignored ``out/``.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pyarrow.dataset
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO, VOCAB
from tokpipe.pipeline.config import parse_config

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
#: The published files the examples name, and where the suite takes them from.
VOCAB_FILES = {
    "cl100k_base.tiktoken.gz": "cl100k_base.tiktoken.gz",
    "o200k_base.tiktoken.gz": "o200k_base.tiktoken.gz",
    "encoder.json": "gpt2_encoder.json",
    "vocab.bpe": "gpt2_vocab.bpe",
    "vocab.txt": "bert_base_uncased_vocab.txt",
}
RUN = ("bash", "python")
#: Languages of blocks that are shown, never run: output, syntax, data.
SHOWN = ("text", "json", "jsonl", "toml", "yaml")
#: Generous: only a hang should reach it.
BLOCK_TIMEOUT_S = 600

MARK = re.compile(r"^<!--\s*(not run|file):\s*(.*?)\s*-->$")


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    mark: str | None = None  # "not run" or "file"
    mark_value: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def page_name(page: Path) -> str:
    return str(page.relative_to(REPO))


def parse_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, with the mark on the line before each (if any)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks, n = [], 0
    while n < len(lines):
        opening = re.match(r"^(\s*)```(.*)$", lines[n])
        if not opening:
            n += 1
            continue
        indent, info = opening.group(1), opening.group(2).strip()
        body, end = [], n + 1
        while end < len(lines) and lines[end].strip() != "```":
            body.append(lines[end][len(indent):] if lines[end].startswith(indent) else lines[end])
            end += 1
        assert end < len(lines), f"{page_name(page)}:{n + 1}: a fence that never closes"
        mark = MARK.match(lines[n - 1].strip()) if n > 0 else None
        blocks.append(Block(page_name(page), n + 1, info, "\n".join(body) + "\n",
                            mark.group(1) if mark else None, mark.group(2) if mark else ""))
        n = end + 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in parse_blocks(page)]


def test_the_manual_has_its_pages() -> None:
    assert {p.name for p in PAGES} >= {"README.md", "index.md", "tokenizers.md", "pipeline.md", "tokenize.md", "ray.md",
                                       "pii.md", "robustness.md", "cli.md", "benchmarks.md", "development.md"}


def test_every_fence_names_a_language_and_every_mark_a_reason() -> None:
    problems = [f"{b.where}: a fence without a language (```text for output)" for b in ALL_BLOCKS if not b.language]
    problems += [f"{b.where}: ```{b.language} is neither run ({', '.join(RUN)}) nor shown ({', '.join(SHOWN)})"
                 for b in ALL_BLOCKS if b.language and b.language not in RUN + SHOWN]
    problems += [f"{b.where}: `<!-- {b.mark}: -->` needs a {'reason' if b.mark == 'not run' else 'file name'}"
                 for b in ALL_BLOCKS if b.mark and not b.mark_value]
    problems += [f"{b.where}: `<!-- not run -->` on a ```{b.language} block, which is never run"
                 for b in ALL_BLOCKS if b.mark == "not run" and b.language not in RUN]
    assert not problems, "\n".join(problems)


# -- running the examples ---------------------------------------------------------------------

@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tokpipe``, ``python3`` and ``python`` as this interpreter runs them."""
    folder = tmp_path_factory.mktemp("bin")
    (folder / "tokpipe").write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from tokpipe.cli import main; main()" "$@"\n')
    for name in ("python3", "python"):
        (folder / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for path in folder.iterdir():
        path.chmod(0o755)
    return folder


def page_folder(folder: Path) -> Path:
    """A folder laid out as the examples expect: ``examples/`` and the vocabulary files."""
    shutil.copytree(REPO / "examples", folder / "examples")
    for name, source in VOCAB_FILES.items():
        shutil.copyfile(VOCAB / source, folder / name)
    return folder


def example_env(bin_dir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


#: Prepended to every bash block: stop at the first failing command, and skip installs.
BASH_PRELUDE = 'set -euo pipefail\npip() { echo "(pip $* is not run by the doc test)"; }\n'


def run_block(block: Block, folder: Path, env: dict[str, str]) -> None:
    if block.language == "bash":
        command = ["bash", "-c", BASH_PRELUDE + block.code]
    else:
        command = [sys.executable, "-c", block.code]
    try:
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                                timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT_S} s\n{block.code}")
    assert result.returncode == 0, (f"{block.where} exited {result.returncode}:\n{block.code}\n"
                                    f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")


def check_config(block: Block, folder: Path) -> None:
    """A ```yaml block is a valid pipeline config, checked where it stands in its page: the
    files it names (a model, a tokenizer) are those the blocks before it made."""
    data = yaml.safe_load(block.code)
    assert isinstance(data, dict) and "stages" in data, f"{block.where} is not a pipeline config"
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        parse_config(data, block.where)
    finally:
        os.chdir(cwd)


def run_page(blocks: list[Block], folder: Path, env: dict[str, str]) -> None:
    for block in blocks:
        if block.language == "yaml":
            check_config(block, folder)
        if block.mark == "file":
            (folder / block.mark_value).write_text(block.code, encoding="utf-8")
        elif block.language in RUN and block.mark != "not run":
            run_block(block, folder, env)


@pytest.mark.parametrize("page", PAGES, ids=[page_name(p) for p in PAGES])
def test_examples_run(page: Path, tmp_path: Path, bin_dir: Path, request: pytest.FixtureRequest) -> None:
    # The README's first command has a test of its own, below.
    blocks = [b for b in ALL_BLOCKS if b.page == page_name(page) and b is not readme_first_command()]
    if any("s3://my-bucket" in b.code for b in blocks if b.language in RUN and b.mark != "not run"):
        # Object-storage examples run against the test suite's S3 server, in a bucket of
        # the name they use (the server and its credentials reach them through the environment).
        request.getfixturevalue("s3_endpoint")
        from tests.s3_server import bucket_filesystem

        filesystem = bucket_filesystem()
        if filesystem.exists("my-bucket"):
            filesystem.rm("my-bucket", recursive=True)
        filesystem.mkdir("my-bucket")
    env = example_env(bin_dir)
    env["TOKPIPE_CACHE"] = str(tmp_path / "cache")
    run_page(blocks, page_folder(tmp_path), env)


def test_the_shipped_config_is_valid() -> None:
    parse_config(yaml.safe_load((REPO / "examples" / "pipeline.yaml").read_text(encoding="utf-8")), "examples")


# -- the README's first command ---------------------------------------------------------------

def readme_first_command() -> Block:
    return next(b for b in ALL_BLOCKS if b.page == "README.md" and b.language == "bash")


def test_the_readme_first_command_shows_the_pipeline_at_work(tmp_path: Path, bin_dir: Path) -> None:
    first = readme_first_command()
    assert first.mark is None and "pip install" in first.code and "tokpipe clean examples/corpus" in first.code
    folder = page_folder(tmp_path)
    before = {p for p in folder.rglob("*")}
    run_block(first, folder, example_env(bin_dir))

    rejected = pq.read_table(sorted((folder / "out" / "clean" / "rejected").glob("*.parquet"))).to_pylist()
    reasons = {row["reason"] for row in rejected}
    assert "duplicate" in reasons, reasons
    kept_ids = set(pq.read_table(sorted((folder / "out" / "clean" / "data").glob("part-*.parquet"))).column("id").to_pylist())
    assert all(row["duplicate_of"] in kept_ids for row in rejected if row["reason"] == "duplicate")
    assert reasons - {"duplicate"}, f"no document rejected by a rule: {reasons}"
    errors = [json.loads(line) for line in (folder / "out" / "clean" / "errors.jsonl").read_text().splitlines()]
    assert errors and all(e["path"].startswith("examples/corpus/") for e in errors)
    # What the README says of this run: of 10 records, 7 kept, 2 rejected, 1 set aside.
    assert (len(kept_ids), len(rejected), len(errors)) == (7, 2, 1)
    assert "keeps 7, rejects" in (REPO / "README.md").read_text(encoding="utf-8")
    # ... and that plain tools open the folder as it is, and the report shows the run's reasons.
    assert pyarrow.dataset.dataset(folder / "out" / "clean" / "data").count_rows() == 7
    page = (folder / "out" / "report.html").read_text(encoding="utf-8")
    assert all(row["reason"] in page for row in rejected), "the report misses a drop reason"

    made = {p for p in folder.rglob("*")} - before
    strays = sorted(str(p.relative_to(folder)) for p in made if not p.relative_to(folder).parts[0] == "out")
    assert not strays, f"the first command wrote outside out/: {strays}"
    ignored = subprocess.run(["git", "check-ignore", "-q", "out/clean/manifest.json"], cwd=REPO)
    assert ignored.returncode == 0, "out/ must be in .gitignore: the README's first command writes there"


# -- the stage reference ----------------------------------------------------------------------

def yaml_default(value: Any) -> str:
    """A constructor default as the reference writes it: YAML's spelling, flow style."""
    if isinstance(value, tuple):
        value = [list(v) if isinstance(v, tuple) else v for v in value]
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip().removesuffix("\n...").strip()


def page_sections(text: str, level: int) -> dict[str, str]:
    """The text under each heading of ``level`` (``##``), by heading, up to the next one of that
    level or higher."""
    sections: dict[str, str] = {}
    current = None
    for line in text.split("\n"):
        heading = re.match(r"^(#+)\s+(.*)$", line)
        if heading and len(heading.group(1)) <= level:
            current = heading.group(2).strip() if len(heading.group(1)) == level else None
            if current is not None:
                sections[current] = ""
            continue
        if current is not None:
            sections[current] += line + "\n"
    return sections


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.split("\n"):
        if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))])
    return rows


def test_the_stage_reference_lists_every_stage_and_parameter() -> None:
    from tokpipe.pipeline import registered_stages

    sections = page_sections((DOCS / "pipeline.md").read_text(encoding="utf-8"), 3)
    problems = []
    # Only tokpipe's own stages: other tests register stages of their own in the same process.
    builtin = {name: cls for name, cls in registered_stages().items()
               if cls.__module__.startswith("tokpipe.pipeline.stages.")}
    assert len(builtin) >= 17, sorted(builtin)
    for name, cls in builtin.items():
        section = sections.get(f"`{name}`")
        if section is None:
            problems.append(f"no `### \\`{name}\\`` section")
            continue
        documented = {}
        for row in table_rows(section)[1:]:
            # A row names one parameter, or several that share a default (`min_words`, `max_words`).
            if re.fullmatch(r"`\w+`(\s*,\s*`\w+`)*", row[0]):
                for param in re.findall(r"`(\w+)`", row[0]):
                    documented[param] = row[1] if len(row) > 1 else ""
        parameters = {p.name: p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"}
        for param in sorted(set(parameters) - set(documented)):
            problems.append(f"{name}: parameter `{param}` is not in its table")
        for param in sorted(set(documented) - set(parameters)):
            problems.append(f"{name}: the table has `{param}`, which the stage does not take")
        for param, p in parameters.items():
            if param not in documented:
                continue
            want = "required" if p.default is p.empty else f"`{yaml_default(p.default)}`"
            if documented[param] != want:
                problems.append(f"{name}.{param}: default cell {documented[param]!r}, the code's is {want!r}")
    assert not problems, "docs/pipeline.md is out of date:\n" + "\n".join(problems)


# -- the CLI reference ------------------------------------------------------------------------

def cli_commands() -> dict[str, click.Command]:
    """Every ``tokpipe`` command: importing the modules of ``tokpipe.cli`` registers them."""
    import importlib
    import pkgutil

    import tokpipe.cli as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"tokpipe.cli.{module.name}")
    return dict(package.cli.commands)


def test_the_cli_reference_names_every_command_and_option() -> None:
    sections = page_sections((DOCS / "cli.md").read_text(encoding="utf-8"), 2)
    problems = []
    commands = cli_commands()
    for name, command in sorted(commands.items()):
        section = sections.get(f"`tokpipe {name}`")
        if section is None:
            problems.append(f"no `## \\`tokpipe {name}\\`` section")
            continue
        flags = {flag for p in command.params if isinstance(p, click.Option) for flag in p.opts + p.secondary_opts}
        flags.discard("--help")
        flags.discard("-h")
        for flag in sorted(flags):
            if not re.search(rf"`{re.escape(flag)}[ `=/]", section):
                problems.append(f"tokpipe {name}: option {flag} is not named (in backticks)")
        for row in table_rows(section)[1:]:
            for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", row[0]):
                if flag not in flags:
                    problems.append(f"tokpipe {name}: the table names {flag}, which the command lacks")
    for heading in sections:
        match = re.fullmatch(r"`tokpipe ([\w-]+)`", heading)
        if match and match.group(1) not in commands:
            problems.append(f"a section for `tokpipe {match.group(1)}`, which is no command")
    assert not problems, "docs/cli.md is out of date:\n" + "\n".join(problems)


# -- the layout table -------------------------------------------------------------------------

def test_the_layout_table_matches_the_tree() -> None:
    text = (DOCS / "development.md").read_text(encoding="utf-8")
    layout = page_sections(text, 2)["Layout"]
    paths = set()
    for row in table_rows(layout)[1:]:
        # `rust/x/src/a.rs`, `b.rs`: a bare name is a sibling of the cell's first path.
        first, *others = [p.rstrip("/") for p in re.findall(r"`([^`]+)`", row[0])]
        paths |= {first} | {p if "/" in p else f"{Path(first).parent}/{p}" for p in others}
    problems = [f"`{p}` does not exist" for p in sorted(paths) if not (REPO / p).exists()]
    package = REPO / "python" / "tokpipe"
    core = REPO / "rust" / "tokpipe-core" / "src"
    wanted = [p for p in package.iterdir() if (p.is_dir() and (p / "__init__.py").exists())]
    wanted += [p for p in package.glob("pipeline/*") if p.is_dir() and (p / "__init__.py").exists()]
    wanted += [p for p in core.iterdir() if p.is_dir() or (p.suffix == ".rs" and p.name not in ("lib.rs",))]
    # A Rust module is `name.rs`, `name/` or both: either spelling names it.
    modules = {p.removesuffix(".rs") for p in paths}
    for path in sorted(wanted):
        module = str(path.relative_to(REPO)).removesuffix(".rs")
        if module not in modules and not any(m.startswith(module + "/") for m in modules):
            problems.append(f"{module} is not in the table")
    assert not problems, "docs/development.md's layout is out of date:\n" + "\n".join(problems)


# -- links and size ---------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*]|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.MULTILINE)}


def test_links_resolve_and_every_page_is_in_the_index() -> None:
    problems = []
    for page in PAGES:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                problems.append(f"{page_name(page)}: link to {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{page_name(page)}: link to {target}: no such heading")
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        if page.name != "index.md" and f"({page.name}" not in index:
            problems.append(f"docs/index.md does not link {page.name}")
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_front_door() -> None:
    size = len((REPO / "README.md").read_bytes())
    assert size <= 6500, f"README.md is {size} bytes: move detail into docs/"
