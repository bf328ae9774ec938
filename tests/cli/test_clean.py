"""``tokpipe clean`` and ``tokpipe stats`` through the console entry point."""

from __future__ import annotations

import json
import os
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
    table = ds.dataset(str(out / "data")).to_table()  # the kept shards' folder opens as it is
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


def test_stats_of_a_folder_that_is_no_output_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "some.txt").write_text("not an output\n", encoding="utf-8")
    result = run("stats", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"tokpipe: error: {tmp_path}: no manifest.json here (not a finished tokpipe "
                                          "clean or tokenize output folder, or no such folder)"]
    assert result.stdout == ""


def test_a_config_value_of_the_wrong_type_exits_2_before_any_work(tmp_path: Path) -> None:
    """It used to pass validation, then fail in a worker with a numpy traceback (issue 22)."""
    config = tmp_path / "p.yaml"
    config.write_text("stages:\n  - type: normalize\n  - type: gopher_quality\n    min_doc_words: fifty\n",
                      encoding="utf-8")
    out = tmp_path / "out"
    result = run("clean", str(REPO / "examples" / "corpus"), "-o", str(out), "-c", str(config), "-q")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"tokpipe: error: {config}: stages[2] (gopher_quality): min_doc_words must be an integer or null, got 'fifty'"]
    assert not out.exists()


def test_a_run_that_reads_no_document_exits_1_and_says_which_field_was_meant(tmp_path: Path) -> None:
    """A typo in --text-field used to exit 0 with "0 documents kept, 3 unreadable" (issue 22).
    The output is written all the same, and the corrected command needs no --overwrite."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text("".join(json.dumps({"id": f"d{n}", "text": f"document number {n} " * 5,
                                                        "url": f"https://example.org/{n}"}) + "\n"
                                            for n in range(3)), encoding="utf-8")
    out = tmp_path / "out"
    result = run("clean", str(corpus), "-o", str(out), "--text-field", "content", "-w", "1", "-q")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"tokpipe: error: {out}: no document was read, all input was set aside as unreadable (3 missing_text_field; "
        "see errors.jsonl): no field 'content' in the input, whose fields are id, text, url; did you mean 'text'? "
        "(--text-field, or text_field= in Python)"]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["stats"]["read"]["dropped_missing_text_field"] == 3
    assert len((out / "errors.jsonl").read_text(encoding="utf-8").splitlines()) == 3
    fixed = run("clean", str(corpus), "-o", str(out), "--text-field", "text", "-w", "1", "-q")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["totals"]["rows"] == 3


def test_a_run_that_committed_nothing_reruns_with_a_corrected_config(tmp_path: Path) -> None:
    """A stage that fails at the first task leaves run.json and no task done; the corrected
    command used to be refused as "a different config" (issue 22). One that committed a task
    is still refused, with exit 2 (a usage problem: --overwrite or another folder)."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "picky_stages.py").write_text(
        "from tokpipe.errors import InvalidArgumentError\n"
        "from tokpipe.pipeline import Stage, StageResult\n\n"
        "class Picky(Stage):\n"
        "    name = 'picky'\n\n"
        "    def __init__(self, fail: bool = False) -> None:\n"
        "        self.fail = fail\n\n"
        "    def apply(self, batch):\n"
        "        if self.fail:\n"
        "            raise InvalidArgumentError('picky: refusing every batch')\n"
        "        return StageResult(batch)\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "stages"), os.environ.get("PYTHONPATH", "")])}
    failing, fixed = tmp_path / "failing.yaml", tmp_path / "fixed.yaml"
    failing.write_text("stages:\n  - type: picky_stages:Picky\n    fail: true\n", encoding="utf-8")
    fixed.write_text("stages:\n  - type: picky_stages:Picky\n", encoding="utf-8")
    corpus, out = str(REPO / "examples" / "corpus"), tmp_path / "out"

    def clean(config: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", "clean", corpus, "-o",
                               str(out), "-c", str(config), "-w", "1", "-q"],
                              capture_output=True, text=True, encoding="utf-8", env=env)

    first = clean(failing)
    assert first.returncode == 1 and "picky: refusing every batch" in first.stderr
    assert (out / ".tokpipe" / "run.json").exists()
    again = clean(fixed)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["config"]["stages"] == [
        {"type": "picky_stages:Picky", "fail": False}]
    refused = clean(failing)
    assert refused.returncode == 2
    assert "different config" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_a_replaced_run_never_takes_what_tokpipe_did_not_write(tmp_path: Path) -> None:
    """The reruns that replace a failed run (issue 22) remove only that run's files: a
    staging folder holding another output's run, a file of the user's in the output folder,
    a --staging-dir of the user's: each is refused as before, and nothing of it is lost."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("".join(json.dumps({"id": f"d{n}", "text": f"document {n} " * 5}) + "\n"
                                                     for n in range(3)), encoding="utf-8")
    corpus = str(tmp_path / "in")
    # A --staging-dir holding the (never committed) run of another output folder.
    other, staging = tmp_path / "other", tmp_path / "staging"
    staging.mkdir()
    (staging / "run.json").write_text(json.dumps({"config": {}, "inputs": [], "output": str(other)}),
                                      encoding="utf-8")
    (staging / "seg0").mkdir()
    out2 = tmp_path / "out2"
    out2.mkdir()
    (out2 / "keep.txt").write_text("the user's", encoding="utf-8")
    refused = run("clean", corpus, "-o", str(out2), "--staging-dir", str(staging), "-w", "1", "-q")
    assert refused.returncode == 2 and "different config" in refused.stderr, refused.stderr
    assert (out2 / "keep.txt").read_text(encoding="utf-8") == "the user's"
    assert sorted(p.name for p in staging.iterdir()) == ["run.json", "seg0"]
    # A run that read nothing, then a file of the user's beside its output: the corrected
    # command removes the failed run's files, and refuses the folder.
    out5, mine = tmp_path / "o5", tmp_path / "mine"
    assert run("clean", corpus, "-o", str(out5), "--text-field", "txt", "-w", "1", "-q").returncode == 1
    (out5 / "keep.txt").write_text("the user's", encoding="utf-8")
    refused = run("clean", corpus, "-o", str(out5), "-w", "1", "-q")
    assert refused.returncode == 2 and "not empty" in refused.stderr, refused.stderr
    assert sorted(p.name for p in out5.iterdir()) == ["keep.txt"]
    assert (out5 / "keep.txt").read_text(encoding="utf-8") == "the user's"
    (out5 / "keep.txt").unlink()
    # ... or a --staging-dir of the user's.
    assert run("clean", corpus, "-o", str(out5), "--text-field", "txt", "-w", "1", "-q").returncode == 1
    mine.mkdir()
    (mine / "mine.txt").write_text("the user's", encoding="utf-8")
    refused = run("clean", corpus, "-o", str(out5), "--staging-dir", str(mine), "-w", "1", "-q")
    assert refused.returncode == 2 and "holds no run" in refused.stderr, refused.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["mine.txt"]
    assert run("clean", corpus, "-o", str(out5), "-w", "1", "-q").returncode == 0


def test_the_staging_is_removed_unless_keep_staging(tmp_path: Path) -> None:
    corpus = str(REPO / "examples" / "corpus")
    removed, kept = tmp_path / "removed", tmp_path / "kept"
    assert run("clean", corpus, "-o", str(removed), "-w", "1", "-q").returncode == 0
    assert sorted(p.name for p in removed.iterdir()) == ["README.md", "data", "errors.jsonl", "manifest.json",
                                                         "rejected"]
    again = run("clean", corpus, "-o", str(removed), "-w", "1")
    assert again.returncode == 0 and "documents kept" in again.stderr, again.stderr
    assert run("stats", str(removed), "--verify").returncode == 0
    assert run("clean", corpus, "-o", str(kept), "-w", "1", "-q", "--keep-staging").returncode == 0
    assert (kept / ".tokpipe" / "run.json").is_file()
    assert "--keep-staging" in run("clean", "--help").stdout
