"""``tokpipe mix`` through the console entry point: a mix of two real tokenize outputs, what
``tokpipe stats`` says of it, and each bad input refused with one line and exit code 2
before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA, VOCAB

CL100K = str(VOCAB / "cl100k_base.tiktoken.gz")
GPT2 = str(VOCAB / "gpt2_encoder.json")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8", timeout=300)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tokenize outputs of English and Japanese text (cl100k), and one of English with GPT-2."""
    root = tmp_path_factory.mktemp("mix-cli")
    made = {}
    for name, text, tokenizer in (("en", "botchan.txt", CL100K), ("ja", "wagahaiwa_nekodearu.txt", CL100K),
                                  ("gpt2", "botchan.txt", GPT2)):
        lines = (CORPORA / "text" / text).read_text(encoding="utf-8").splitlines()[:600]
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for i in range(0, len(lines), 5):
                f.write(json.dumps({"id": f"{name}{i}", "text": "\n".join(lines[i:i + 5])}, ensure_ascii=False) + "\n")
        result = run("tokenize", str(root / f"{name}.jsonl"), "-t", tokenizer, "-o", str(root / name),
                     "--format", "both", "-q")
        assert result.returncode == 0, result.stderr
        made[name] = root / name
    return made


def test_mix_command(folders: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "mix"
    en_tokens = json.loads((folders["en"] / "manifest.json").read_text(encoding="utf-8"))["totals"]["tokens"]
    result = run("mix", f"{folders['en']}=3", f"{folders['ja']}=1", "-o", str(out), "--tokens", str(2 * en_tokens),
                 "--max-epochs", "2", "--seed", "4")
    assert result.returncode == 0, result.stderr
    assert "epochs" in result.stderr and f"{2 * en_tokens:,} tokens" in result.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    lengths = pq.read_table(out / "documents" / "train.parquet")
    realised = {0: 0, 1: 0}
    for doc_id, length in zip(lengths.column("id").to_pylist(), lengths.column("length").to_pylist()):
        realised[int(doc_id.split("/", 1)[0])] += length
    # 3:1 of 2 x en's tokens: en gives 1.5 epochs, exactly.
    assert realised == {0: 2 * en_tokens * 3 // 4 + (2 * en_tokens * 3 % 4 >= 2), 1: 2 * en_tokens - realised[0]}
    assert [s["splits"]["train"]["tokens"] for s in manifest["mix"]["sources"]] == [realised[0], realised[1]]
    stats = run("stats", str(out), "--verify")
    assert stats.returncode == 0, stats.stderr + stats.stdout
    report = run("report", str(out), "-o", str(tmp_path / "report.html"))
    assert report.returncode == 0 and f"{2 * en_tokens:,}" in (tmp_path / "report.html").read_text(encoding="utf-8")
    again = run("mix", f"{folders['en']}=3", f"{folders['ja']}=1", "-o", str(out), "--tokens", str(2 * en_tokens),
                "--max-epochs", "2", "--seed", "4")
    assert again.returncode == 0 and "nothing redone" in again.stderr
    other = run("mix", f"{folders['en']}=1", f"{folders['ja']}=1", "-o", str(out))
    assert other.returncode == 2 and "holds a finished run" in other.stderr


def test_bad_input_is_refused_with_one_line(folders: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "never"
    en, ja = str(folders["en"]), str(folders["ja"])
    cases = [
        ((f"{en}=1", f"{tmp_path / 'gone'}=1"), f"{tmp_path / 'gone'}: no such folder"),
        ((f"{en}=1", f"{folders['en'] / 'train'}=1"), "not a tokpipe tokenize output"),
        ((f"{en}=1", f"{folders['gpt2']}=1"), f"{folders['gpt2']}: tokenized with gpt2_encoder.json"),
        ((f"{en}=0", f"{ja}=1"), "weight 0 must be positive"),
        ((f"{en}=-1", f"{ja}=1"), "weight -1 must be positive"),
        ((f"{en}=abc", f"{ja}=1"), "weight 'abc' is not a number"),
        ((en, f"{ja}=1"), "expected SOURCE=WEIGHT"),
        ((f"{en}=1", f"{ja}=1", "--tokens", "100000000"), "epochs, more than --max-epochs 1"),
    ]
    for args, message in cases:
        result = run("mix", *args, "-o", str(out))
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tokpipe: error: ") and message in lines[0], (args, lines)
        assert not out.exists()


def test_a_size_under_one_byte_is_refused_naming_the_option(folders: dict[str, Path], tmp_path: Path) -> None:
    # A malformed option value is click's usage error (the usage line, then the message).
    out = tmp_path / "never"
    result = run("mix", f"{folders['en']}=1", f"{folders['ja']}=1", "--shuffle-buffer", "0.5", "-o", str(out))
    assert result.returncode == 2 and "Invalid value for '--shuffle-buffer': '0.5' is less than one byte" in result.stderr
    assert not out.exists()


def test_a_mix_killed_mid_write_is_written_again_whole(folders: dict[str, Path], tmp_path: Path) -> None:
    import os
    import signal
    import time

    from tests.pipeline.killed_runs import finish, start_cli
    from tests.pipeline.tokenize.helpers import digest

    out = tmp_path / "mix"
    # Sources repeated many times: a run long enough to be killed once it published shards.
    args = ["mix", f"{folders['en']}=1", f"{folders['ja']}=1", "--max-epochs", "400", "--tokens", "6000000",
            "--shard-size", "64KB", "-q"]
    proc = start_cli(*args, "-o", str(out))
    while proc.poll() is None and not list((out / "train").glob("part-*.parquet")):
        time.sleep(0.002)
    assert proc.poll() is None, "the mix ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert not (out / "manifest.json").exists() and (out / ".tokpipe" / "lock.json").exists()
    finish(start_cli(*args, "-o", str(out)))  # the dead run's lock is taken over, its files replaced
    finish(start_cli(*args, "-o", str(tmp_path / "whole")))
    assert digest(out) == digest(tmp_path / "whole")
    assert not list(out.rglob(".*.tmp")) and not (out / ".tokpipe").exists()
