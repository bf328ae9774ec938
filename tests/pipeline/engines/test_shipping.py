"""Stage classes reach the worker processes (``engines.shipping``, ``engines.workers``): a stage
defined in ``__main__`` (``python -c``, a script) runs with ``workers=2`` and on Ray, by
cloudpickle; without cloudpickle it is one line saying what to do, before any work; a script
with no ``if __name__ == "__main__":`` guard runs once, its workers do not run it again; a
class named ``module.path:ClassName`` in a config runs from ``tokpipe clean``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import REPO

# A stage of the user's, and the documents it sees: 12 texts, 4 of them too short.
STAGE = '''
import pyarrow.compute as pc
import tokpipe.pipeline as pipeline
from tokpipe.pipeline import Filter, register

@register
class ShortDocs(Filter):
    name = "short_docs"
    def __init__(self, min_chars: int = 100) -> None:
        self.min_chars = min_chars
    def keep(self, batch):
        return pc.greater_equal(pc.utf8_length(batch["text"]), self.min_chars), "too_short"
'''
CONFIG = {"stages": [{"type": "short_docs", "min_chars": 30}, {"type": "exact_dedup"}]}
# Spawned workers import nothing of the run's script, so cloudpickle must be the only way in;
# "no cloudpickle" is the interpreter with its import refused.
NO_CLOUDPICKLE = "import sys; sys.modules['cloudpickle'] = None\n"
# Generous: only a hang should reach it.
HANG_S = 300


def write_inputs(root: Path) -> Path:
    folder = root / "in"
    folder.mkdir()
    for f in range(3):
        with open(folder / f"part{f}.jsonl", "w", encoding="utf-8") as out:
            for n in range(4):
                text = "short" if n == 0 else f"file {f}, document {n}: long enough for the filter"
                out.write(json.dumps({"text": text}) + "\n")
    return folder


def python(code: str, cwd: Path, *args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` (or ``python args``) in ``cwd``, with ``path`` first on
    ``PYTHONPATH``."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, *(["-c", code] if code else []), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=HANG_S, env=env)


def check_output(out: Path, stage: str = "short_docs") -> None:
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["stats"][stage]["dropped_too_short"] == 3 and manifest["stats"][stage]["kept"] == 9
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert sorted(r["stage"] for r in rejected) == [stage] * 3
    assert manifest["totals"]["rows"] == 9


def run_code(inputs: Path, out: Path, workers: int = 2, engine: str = "local") -> str:
    return f"pipeline.run([{str(inputs)!r}], {str(out)!r}, config={CONFIG!r}, workers={workers}, engine={engine!r})\n"


def test_a_stage_of_python_c_runs_in_the_workers(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    result = python(STAGE + run_code(inputs, tmp_path / "out"), tmp_path)
    assert result.returncode == 0, result.stderr
    check_output(tmp_path / "out")


def test_without_cloudpickle_a_main_stage_is_one_line_before_any_work(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    result = python(NO_CLOUDPICKLE + STAGE + run_code(inputs, tmp_path / "out"), tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == ("tokpipe.errors.PipelineError: stage 'short_docs': class ShortDocs is defined in __main__ (a script, "
                    "a notebook or python -c), which the worker processes cannot import; install cloudpickle (pip install "
                    "cloudpickle) to have it sent to them, move the class into a module of its own and import it from "
                    "there, or run with workers=1")
    assert not (tmp_path / "out").exists()
    # As it says: one worker needs no shipping.
    result = python(NO_CLOUDPICKLE + STAGE + run_code(inputs, tmp_path / "out", workers=1), tmp_path)
    assert result.returncode == 0, result.stderr
    check_output(tmp_path / "out")


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """Its workers do not run it again: its top level (here, a line appended to a log) runs
    once, and the run is not started again in every worker (``BrokenProcessPool``)."""
    inputs = write_inputs(tmp_path)
    script = tmp_path / "clean.py"
    script.write_text(STAGE + "open('ran.log', 'a').write('ran\\n')\n" + run_code(inputs, tmp_path / "out"),
                      encoding="utf-8")
    result = python("", tmp_path, str(script))
    assert result.returncode == 0, result.stderr
    check_output(tmp_path / "out")
    assert (tmp_path / "ran.log").read_text(encoding="utf-8") == "ran\n"


def test_a_stage_registered_by_an_imported_module_needs_no_cloudpickle(tmp_path: Path) -> None:
    """The module is imported again in each worker (by the class's reference), which
    registers its stages there too; the script has no guard."""
    inputs = write_inputs(tmp_path)
    (tmp_path / "my_stages.py").write_text(STAGE, encoding="utf-8")
    script = tmp_path / "clean.py"
    script.write_text(NO_CLOUDPICKLE + "import tokpipe.pipeline as pipeline\nimport my_stages\n"
                      + run_code(inputs, tmp_path / "out"), encoding="utf-8")
    result = python("", tmp_path, str(script))
    assert result.returncode == 0, result.stderr
    check_output(tmp_path / "out")


def test_a_class_the_workers_cannot_load_is_one_line(tmp_path: Path) -> None:
    """A stage of a module made in memory: this process finds it by name, a worker cannot
    import it."""
    inputs = write_inputs(tmp_path)
    code = ("import sys, types\nmodule = types.ModuleType('made_here')\nsys.modules['made_here'] = module\n"
            + STAGE.replace("class ShortDocs(Filter):", "class ShortDocs(Filter):\n    __module__ = 'made_here'")
            + "module.ShortDocs = ShortDocs\n" + run_code(inputs, tmp_path / "out"))
    result = python(code, tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "tokpipe.errors.PipelineError: a worker process could not load the run's stage classes: "
        "ModuleNotFoundError: No module named 'made_here'")


def test_a_config_names_a_class_by_its_module(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    (tmp_path / "my_stages.py").write_text(STAGE.replace("@register\n", ""), encoding="utf-8")
    config = tmp_path / "p.yaml"
    config.write_text("stages:\n  - type: my_stages:ShortDocs\n    min_chars: 30\n  - type: exact_dedup\n",
                      encoding="utf-8")
    cli = "from tokpipe.cli import main; main()"
    result = python(cli, tmp_path, "clean", str(inputs), "-o", str(tmp_path / "out"), "-c", str(config),
                    "--workers", "2", path=tmp_path)
    assert result.returncode == 0, result.stderr
    check_output(tmp_path / "out", stage="my_stages:ShortDocs")
    # A module that is not there: one line naming it, before any work.
    config.write_text("stages:\n  - type: my_stagez:ShortDocs\n", encoding="utf-8")
    result = python(cli, tmp_path, "clean", str(inputs), "-o", str(tmp_path / "out2"), "-c", str(config),
                    path=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "stage 'my_stagez:ShortDocs': cannot import module 'my_stagez'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out2").exists()


def test_a_stage_of_python_c_runs_on_ray(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    start = textwrap.dedent("""
        import ray
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    """)
    result = python(STAGE + start + run_code(inputs, tmp_path / "out", engine="ray"), tmp_path)
    assert result.returncode == 0, result.stderr
    check_output(tmp_path / "out")


def test_the_docs_module_of_stages_is_still_found(tmp_path: Path) -> None:
    """The documented way before stages travelled: a module of stages imported by a guarded
    script, with workers; and the example corpus of the repository."""
    (tmp_path / "my_stages.py").write_text(STAGE, encoding="utf-8")
    script = tmp_path / "clean.py"
    script.write_text("import tokpipe.pipeline as pipeline\nimport my_stages\nif __name__ == '__main__':\n    "
                      f"pipeline.run([{str(REPO / 'examples' / 'corpus')!r}], 'out', config={CONFIG!r}, workers=2)\n",
                      encoding="utf-8")
    result = python("", tmp_path, str(script))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "manifest.json").exists()
