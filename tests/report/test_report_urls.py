"""``tokpipe report URL``: a clean and a tokenize output in a bucket of a real S3 protocol
server on 127.0.0.1 (``tests/s3_server.py``), uploaded as they are, give the page the local
folders give (but for the names shown), and the page can be written to the bucket too."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.test_stats_urls import outputs, run, upload
from tests.s3_server import bucket_filesystem


def test_a_report_of_folders_in_a_bucket_is_the_local_one(bucket: str, tmp_path: Path) -> None:
    clean, tokens = outputs(tmp_path)
    urls = [upload(bucket, folder, folder.name) for folder in (clean, tokens)]
    local = run("report", str(clean), str(tokens), "-o", str(tmp_path / "local.html"))
    assert local.returncode == 0, local.stderr
    remote = run("report", *urls, "-o", f"s3://{bucket}/report.html")
    assert remote.returncode == 0, remote.stderr
    page = bucket_filesystem().cat_file(f"{bucket}/report.html").decode("utf-8")
    expected = (tmp_path / "local.html").read_text(encoding="utf-8")
    for folder, url in zip((clean, tokens), urls):
        # The run's name, not the paths under it (the tokens' inputs are the local shards).
        expected = re.sub(re.escape(str(folder)) + r"(?![/\w])", url, expected)
    assert page == expected
    assert "<svg" in page and "duplicate" in page


def test_a_bucket_folder_with_no_manifest_is_one_line_exit_2(bucket: str, tmp_path: Path) -> None:
    result = run("report", f"s3://{bucket}/nothing-here", "-o", str(tmp_path / "r.html"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"s3://{bucket}/nothing-here" in result.stderr
