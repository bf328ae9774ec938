"""``tokpipe.report`` without a browser: what the page may show (PII masked in samples), what
the reading may hold (bounded tallies, no ids past the join limit), the error a folder that is
no output raises, and sizes written as the dataset card writes them.

Each test writes its corpus, runs ``tokpipe clean`` (and ``tokenize``) as a user would, and
builds the report in this process (so that a limit can be lowered for the test). Expected
values come from what the test planted, or from the files on disk, never from the report.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, VOCAB
from tokpipe.errors import ConfigError, NotAnOutputError, TokpipeError
from tokpipe.pipeline import fs
from tokpipe.report import build_report, collect
from tokpipe.report import tokens as tokens_module

#: The module, which ``tokpipe.report.collect`` (the function) hides as an attribute.
collect_module = importlib.import_module("tokpipe.report.collect")


def ok(*args: str) -> str:
    result = subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                            capture_output=True, text=True, encoding="utf-8", cwd=REPO)
    assert result.returncode == 0, result.stderr
    return result.stdout


def clean(tmp_path: Path, records: list[dict[str, str]], config: str, name: str = "out") -> Path:
    corpus = tmp_path / f"{name}-corpus"
    corpus.mkdir()
    (corpus / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (tmp_path / f"{name}.yaml").write_text(config, encoding="utf-8")
    out = tmp_path / name
    ok("clean", str(corpus), "-c", str(tmp_path / f"{name}.yaml"), "-o", str(out), "-q", "-w", "1")
    return out


def masked(value: str) -> str:
    """The pii stage's ``mask`` as its documentation states it: every ASCII letter and digit
    becomes ``*``, separators stay."""
    return re.sub(r"[A-Za-z0-9]", "*", value)


EMAIL, PHONE = "jane.roe@mail.example", "+44 20 7946 0958"


@pytest.mark.parametrize("pii", ["  - type: pii\n    scrub_rejected: false\n",
                                 "  - type: pii\n    action: keep\n"])
def test_sample_text_is_masked_whatever_the_pii_stage_did(tmp_path: Path, pii: str) -> None:
    # Short documents, rejected by length_filter before the pii stage, hold an address and a
    # phone number; the stage (tag, but not scrubbing rejected documents; or keep) leaves them.
    records = [{"id": f"long-{i}", "text": f"A long enough document number {i}, with plain words in it."}
               for i in range(5)]
    records += [{"id": f"short-{i}", "text": f"{EMAIL} {PHONE} #{i}"} for i in range(2)]
    out = clean(tmp_path, records, "stages:\n  - type: length_filter\n    min: 45\n" + pii)
    rejected = pq.read_table([out / e["path"] for e in json.loads((out / "manifest.json").read_text())["rejected"]])
    assert any(EMAIL in text and PHONE in text for text in rejected.column("text").to_pylist())  # raw on disk
    page = build_report([str(out)])
    assert EMAIL not in page and PHONE not in page
    assert page.count(f"{masked(EMAIL)} {masked(PHONE)} #") == 2  # both samples, masked


def test_without_a_pii_stage_samples_are_shown_as_written(tmp_path: Path) -> None:
    out = clean(tmp_path, [{"id": "s", "text": f"{EMAIL} x"}, {"id": "l", "text": "long " * 20}],
                "stages:\n  - type: length_filter\n    min: 45\n")
    assert f"{EMAIL} x" in build_report([str(out)])


def test_duplicate_clusters_are_a_bounded_tally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 40 texts, the i-th in 2 + i % 4 copies: 40 clusters, each counted exactly when kept.
    copies = {i: 2 + i % 4 for i in range(40)}
    records = [{"id": f"t{i}-c{c}", "text": f"The duplicated text number {i} said again and again."}
               for i, n in copies.items() for c in range(n)]
    out = clean(tmp_path, records, "stages:\n  - type: exact_dedup\n")
    monkeypatch.setattr(collect_module, "MAX_CLUSTER_IDS", 6)
    run = collect(str(out))
    clusters = run.clusters["exact_dedup"]
    assert 0 < len(clusters) <= 6
    assert run.cluster_sampling["exact_dedup"] >= 1
    assert run.cluster_removed["exact_dedup"] == sum(n - 1 for n in copies.values())  # exact, always
    for kept_id, duplicates in clusters.items():  # the clusters kept are counted in full
        assert duplicates == copies[int(kept_id.split("-")[0][1:])] - 1
    removed = sum(n - 1 for n in copies.values())
    page = build_report([str(out)])
    assert f"{removed} documents removed as duplicates. Sampled:" in page and "largest sampled clusters" in page
    monkeypatch.undo()  # the limit back: every cluster, exact
    assert f"40 clusters of two or more documents; {removed} documents removed" in build_report([str(out)])


def test_no_id_is_read_past_the_join_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [{"id": f"d{i}", "text": f"Document {i} has a few words in it.", "source": "web"} for i in range(10)]
    out = clean(tmp_path, records, "stages:\n  - type: length_filter\n    min: 5\n")
    tokens = tmp_path / "tokens"
    ok("tokenize", str(out), "-t", str(VOCAB / "cl100k_base.tiktoken.gz"), "-o", str(tokens), "-q", "-w", "1")
    asked: list[tuple[str, list[str] | None]] = []
    real = fs.parquet_file

    @contextlib.contextmanager
    def spy(path):  # type: ignore[no-untyped-def]
        with real(path) as parquet:
            iter_batches = parquet.iter_batches

            def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
                asked.append((str(path), kwargs.get("columns")))
                return iter_batches(*args, **kwargs)

            parquet.iter_batches = recorded
            yield parquet

    monkeypatch.setattr(tokens_module.fs, "parquet_file", spy)
    monkeypatch.setattr(tokens_module, "JOIN_LIMIT", 3)
    run = collect(str(tokens))
    assert len(run.doc_lengths) == 10 and not run.tokens_by
    assert asked and all("id" not in (columns or ["id"]) for _, columns in asked), asked
    assert any("not joined (over 3 documents)" in note for note in run.notes)
    monkeypatch.setattr(tokens_module, "JOIN_LIMIT", 10)
    assert collect(str(tokens)).tokens_by["source"]["web"] > 0  # at the limit: joined


def test_a_folder_that_is_no_output_raises_a_tokpipe_error(tmp_path: Path) -> None:
    with pytest.raises(TokpipeError, match="not a tokpipe output folder") as caught:
        collect(str(tmp_path))
    assert isinstance(caught.value, NotAnOutputError) and isinstance(caught.value, ConfigError)
    (tmp_path / "manifest.json").write_text('{"format": "something-else"}', encoding="utf-8")
    with pytest.raises(NotAnOutputError, match="manifest.json"):
        collect(str(tmp_path))
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(NotAnOutputError, match="not valid JSON"):
        collect(str(tmp_path))


def test_sizes_are_written_as_the_dataset_card_writes_them(tmp_path: Path) -> None:
    records = [{"id": f"d{i}", "text": f"Document {i} " + "with a good number of words " * (i + 3)} for i in range(200)]
    out = clean(tmp_path, records, "stages:\n  - type: length_filter\n    min: 5\n")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    on_disk = sum((out / e["path"]).stat().st_size for e in manifest["shards"])
    card = (out / "README.md").read_text(encoding="utf-8")
    size = re.search(r"in \d+ shard\(s\) of ([0-9.,]+ [kMG]?B)\b", card)
    assert size, card[:600]
    page = build_report([str(out)])
    assert f"{len(manifest['shards'])} ({size.group(1)})" in page  # the overview's kept shards, same text
    number, unit = size.group(1).split()
    assert abs(float(number.replace(",", "")) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit] - on_disk) \
        <= 0.01 * on_disk
