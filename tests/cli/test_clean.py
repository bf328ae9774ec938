"""``tokpipe clean`` and ``tokpipe stats`` through the console entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import yaml

from tests.conftest import REPO


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def test_print_config_shows_every_default() -> None:
    result = run("clean", "--print-config")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    assert [s["type"] for s in config["stages"]] == ["normalize", "length_filter", "exact_dedup"]
    assert config["stages"][0]["form"] == "NFC"


def test_config_errors_exit_2_naming_the_problem(tmp_path: Path) -> None:
    for body, message in (("stages:\n  - type: nope\n", "unknown stage 'nope'"),
                          ("stages:\n  - type: length_filter\n    minimum: 3\n", "no parameter 'minimum'")):
        config = tmp_path / "p.yaml"
        config.write_text(body, encoding="utf-8")
        result = run("clean", str(REPO / "examples" / "corpus"), "-o", str(tmp_path / "out"), "-c", str(config))
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_missing_input_and_output_exit_2(tmp_path: Path) -> None:
    assert run("clean", str(tmp_path / "absent"), "-o", str(tmp_path / "out")).returncode == 2
    assert run("clean", str(REPO / "examples" / "corpus")).returncode == 2


def test_clean_the_shipped_example_then_stats(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("clean", str(REPO / "examples" / "corpus"), "-o", str(out), "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert "exact_dedup" in result.stderr and "documents kept" in result.stderr
    table = ds.dataset(sorted(str(p) for p in out.glob("part-*.parquet")), format="parquet").to_table()
    assert table.num_rows > 0 and table.schema.names[:2] == ["id", "text"]
    stats = run("stats", str(out), "--verify")
    assert stats.returncode == 0, stats.stderr
    assert "verified" in stats.stdout and "normalize" in stats.stdout
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["totals"]["rows"] == table.num_rows


def test_help_explains_every_option() -> None:
    result = run("clean", "--help")
    for option in ("--output", "--config", "--workers", "--shard-size", "--task-size", "--text-field", "--id-field", "--split",
                   "--strict", "--overwrite", "--print-config", "--quiet"):
        assert option in result.stdout


def test_strict_stops_with_exit_1_and_one_line(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text('{"text": "fine"}\n{broken\n', encoding="utf-8")
    lenient = run("clean", str(corpus), "-o", str(tmp_path / "lenient"), "--workers", "1")
    assert lenient.returncode == 0, lenient.stderr
    assert json.loads((tmp_path / "lenient" / "errors.jsonl").read_text(encoding="utf-8"))["reason"] == "malformed_json"
    strict = run("clean", str(corpus), "-o", str(tmp_path / "strict"), "--workers", "1", "--strict")
    assert strict.returncode == 1
    assert "a.jsonl" in strict.stderr and "Traceback" not in strict.stderr
    assert len(strict.stderr.strip().splitlines()) == 1


def test_the_shipped_example_config_runs(tmp_path: Path) -> None:
    result = run("clean", str(REPO / "examples" / "corpus"), "-o", str(tmp_path / "out"),
                 "-c", str(REPO / "examples" / "pipeline.yaml"), "-q")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["stages"][0]["form"] == "NFKC"


def test_a_config_warning_is_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    config = tmp_path / "p.yaml"
    config.write_text("stages:\n  - type: length_filter\n  - type: pii\n    scrub_rejected: false\n", encoding="utf-8")
    result = run("clean", str(REPO / "examples" / "corpus"), "-o", str(tmp_path / "out"), "-c", str(config), "-q")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"tokpipe: warning: {config}: stages[2] (pii): scrub_rejected is false, so what length_filter drop(s) goes "
        "to rejected/ with its personal data (text, fields, ids and duplicate_of); set scrub_rejected: true to "
        "scrub it too"]
    assert (tmp_path / "out" / "manifest.json").exists()
