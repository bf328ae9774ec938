"""A pipeline config given by URL (``load_config("s3://...")``, ``tokpipe clean --config
s3://...``), read from a real S3 protocol server on 127.0.0.1 (``tests/s3_server.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.s3_server import bucket_filesystem
from tokpipe.errors import ConfigError
from tokpipe.pipeline import load_config

YAML = "stages:\n  - type: normalize\n    form: NFKC\n  - type: length_filter\n    min: 20\n  - type: exact_dedup\n"
TOML = ('[[stages]]\ntype = "normalize"\nform = "NFKC"\n\n[[stages]]\ntype = "length_filter"\nmin = 20\n\n'
        '[[stages]]\ntype = "exact_dedup"\n')
JSON = '{"stages": [{"type": "normalize", "form": "NFKC"}, {"type": "length_filter", "min": 20}, {"type": "exact_dedup"}]}'


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def test_a_config_url_reads_as_the_local_file(bucket: str, tmp_path: Path) -> None:
    fs = bucket_filesystem()
    local = tmp_path / "p.yaml"
    local.write_text(YAML, encoding="utf-8")
    for name, text in (("p.yaml", YAML), ("p.toml", TOML), ("p.json", JSON)):
        fs.pipe_file(f"{bucket}/configs/{name}", text.encode())
        assert load_config(f"s3://{bucket}/configs/{name}") == load_config(local), name


def test_errors_name_the_url(bucket: str) -> None:
    fs = bucket_filesystem()
    missing = f"s3://{bucket}/configs/missing.yaml"
    with pytest.raises(ConfigError) as lost:
        load_config(missing)
    assert str(lost.value).startswith(f"{missing}: cannot read the config (no such object")
    fs.pipe_file(f"{bucket}/configs/bad.toml", b"stages = [")
    with pytest.raises(ConfigError, match=f"^s3://{bucket}/configs/bad.toml: not valid toml: "):
        load_config(f"s3://{bucket}/configs/bad.toml")
    fs.pipe_file(f"{bucket}/configs/unknown.yaml", b"stages:\n  - type: nope\n")
    with pytest.raises(ConfigError, match=f"^s3://{bucket}/configs/unknown.yaml: stages\\[1\\]: unknown stage 'nope'"):
        load_config(f"s3://{bucket}/configs/unknown.yaml")


def test_clean_takes_a_config_url(bucket: str, tmp_path: Path) -> None:
    bucket_filesystem().pipe_file(f"{bucket}/p.yaml", YAML.encode())
    (tmp_path / "p.yaml").write_text(YAML, encoding="utf-8")
    remote = run("clean", "--print-config", "--config", f"s3://{bucket}/p.yaml")
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == run("clean", "--print-config", "--config", str(tmp_path / "p.yaml")).stdout
    missing = run("clean", "--print-config", "--config", f"s3://{bucket}/none.yaml")
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"tokpipe: error: s3://{bucket}/none.yaml: cannot read the config (no such object")
    assert missing.stderr.count("\n") == 1
