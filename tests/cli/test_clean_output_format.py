"""``tokpipe clean --output-format jsonl|jsonl.gz|jsonl.zst``: the shards load with the standard
tools and hold the rows of the Parquet output, under the same manifest and ``stats --verify``;
the same bytes for any number of workers and after a kill and resume; a wrong or changed
format is refused before any work.

Expected rows come from the Parquet output (read by pyarrow) and the shards are read by
``json``, ``gzip``, ``zstandard`` and HF ``datasets``, never by tokpipe.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tests.conftest import REPO
from tests.pipeline.killed_runs import finish, kill_after_markers, start_cli

FORMATS = ("jsonl", "jsonl.gz", "jsonl.zst")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", *args],
                          capture_output=True, text=True, encoding="utf-8")


def clean(corpus: Path, out: Path, *options: str) -> None:
    result = run("clean", str(corpus), "-o", str(out), "-q", *options)
    assert result.returncode == 0, result.stderr


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def make_corpus(root: Path, texts: list[str]) -> Path:
    """Documents with the fields real crawls carry (numbers, a nested object whose keys vary,
    a list, a field nested too deep for a typed column, a field of two types), duplicates and
    empty texts (rejected), and text with every kind of character JSON escapes."""
    root.mkdir()
    tricky = 'tab\there, "quotes", back\\slash, nul\x00 bell\x07 esc\x1b, é 中文 😀 \u2028 end'
    for n in range(6):
        records: list[dict[str, Any]] = []
        for i, text in enumerate(texts[n::6][:12]):
            meta: dict[str, Any] = {"url": f"https://example.com/{n}/{i}", "words": len(text.split())}
            if i % 3:
                meta["lang"] = "en"
            records.append({"id": f"f{n}-{i}", "text": text, "n": i, "score": i / 2, "meta": meta,
                            "tags": ["a", "b"][: i % 3], "mixed": i if n % 2 else {"k": [i]},
                            "deep": nested(20) if i == 0 else [i]})
        records += [{"id": f"f{n}-tricky", "text": f"{tricky} {n}"}, {"id": f"f{n}-dup", "text": texts[0]},
                    {"id": f"f{n}-empty", "text": ""}]
        write_jsonl(root / f"part{n}.jsonl", records)
    return root


def nested(depth: int) -> Any:
    """A list nested ``depth`` deep: past 16, kept as JSON text in the Parquet output."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def read_shard(path: Path) -> bytes:
    """A shard's bytes, decompressed by the standard tools."""
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(raw)
    if path.name.endswith(".zst"):
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()
    return raw


def shard_names(out: Path, suffix: str) -> list[str]:
    return [p.relative_to(out).as_posix() for p in [*sorted(out.glob(f"data/part-*{suffix}")),
                                                     *sorted(out.glob(f"rejected/part-*{suffix}"))]]


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    """A Parquet shard's rows, its JSON-text columns parsed (JSON Lines holds them as values)."""
    table = pq.read_table(path)
    rows = table.to_pylist()
    for field in table.schema:
        if isinstance(field.type, pa.JsonType):
            for row in rows:
                row[field.name] = None if row[field.name] is None else json.loads(row[field.name])
    return rows


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """A JSON Lines shard's rows. Lines end at ``\n`` only (not ``str.splitlines``: a text
    may hold U+2028, which JSON keeps as it is)."""
    text = read_shard(path).decode("utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory, documents: list[tuple[str, str]]) -> dict[str, Path]:
    """The corpus cleaned into each format (two workers, several shards each)."""
    root = tmp_path_factory.mktemp("formats")
    corpus = make_corpus(root / "in", [t for _, t in documents])
    outs = {}
    for output_format in ("parquet", *FORMATS):
        outs[output_format] = root / output_format
        clean(corpus, outs[output_format], "-w", "2", "--shard-size", "100KB", "--output-format", output_format)
    return outs


@pytest.mark.parametrize("output_format", FORMATS)
def test_each_format_holds_the_parquet_rows_and_verifies(outputs: dict[str, Path], output_format: str) -> None:
    reference, out = outputs["parquet"], outputs[output_format]
    names = shard_names(reference, ".parquet")
    assert len([n for n in names if not n.startswith("rejected/")]) > 2, "several kept shards"
    # The same shards, cut alike, named alike with the format's suffix.
    assert shard_names(out, f".{output_format}") == [n.replace(".parquet", f".{output_format}") for n in names]
    for name in names:
        rows = jsonl_rows(out / name.replace(".parquet", f".{output_format}"))
        assert rows == parquet_rows(reference / name), name
    first = jsonl_rows(out / names[0].replace(".parquet", f".{output_format}"))
    assert any(isinstance(row["deep"], list) for row in first), "JSON text as nested values"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    parquet_manifest = json.loads((reference / "manifest.json").read_text(encoding="utf-8"))
    for key in ("shards", "rejected"):
        assert [e["rows"] for e in manifest[key]] == [e["rows"] for e in parquet_manifest[key]]
    assert manifest["totals"]["rows"] == parquet_manifest["totals"]["rows"]
    assert f'data_files: "data/part-*.{output_format}"' in (out / "README.md").read_text(encoding="utf-8")
    verified = run("stats", str(out), "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "verified" in verified.stdout


@pytest.mark.parametrize("output_format", FORMATS)
def test_a_corrupted_shard_fails_verify(outputs: dict[str, Path], output_format: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(outputs[output_format], out)
    shard = sorted(out.glob(f"data/part-*.{output_format}"))[1]
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 2] ^= 0x20
    shard.write_bytes(bytes(raw))
    result = run("stats", str(out), "--verify")
    assert result.returncode == 1
    assert f"tokpipe: problem: data/{shard.name}: sha256" in result.stderr


def test_hf_datasets_loads_the_shards(tmp_path: Path, documents: list[tuple[str, str]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields of one type each (a field kept as JSON text has values of several types, line by
    line, as its input had: readers that infer one type per column refuse those)."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    corpus = tmp_path / "in"
    corpus.mkdir()
    for n in range(3):
        write_jsonl(corpus / f"{n}.jsonl", [{"id": f"{n}-{i}", "text": t, "score": i / 2,
                                              "meta": {"url": f"u{i}", **({"lang": "en"} if i % 2 else {})}}
                                             for i, t in enumerate(t for _, t in documents[n::3])])
    for output_format in ("jsonl.zst", "jsonl.gz"):
        out = tmp_path / output_format
        clean(corpus, out, "-w", "2", "--output-format", output_format)
        expected = [row for path in sorted(out.glob(f"data/part-*.{output_format}")) for row in jsonl_rows(path)]
        assert len(expected) > 10
        loaded = datasets.load_dataset("json", data_files=str(out / "data" / f"part-*.{output_format}"),
                                       cache_dir=str(tmp_path / "hf"))["train"]
        assert loaded.to_list() == expected
        # The dataset card names the shards: the folder loads as it is.
        card = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))["train"]
        assert card.to_list() == expected


def test_the_same_lines_for_any_number_of_workers(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    corpus = make_corpus(tmp_path / "in", [t for _, t in documents])
    one, two = tmp_path / "one", tmp_path / "two"
    clean(corpus, one, "-w", "1", "--output-format", "jsonl.gz")
    clean(corpus, two, "-w", "2", "--output-format", "jsonl.gz", "--keep-staging")  # kept: re-cut below
    assert [n for n in shard_names(two, ".jsonl.gz") if n.startswith("data/part-00001-")], \
        "the second group wrote shards"
    for prefix in ("data/", "rejected/"):
        lines = [b"".join(read_shard(out / n) for n in shard_names(out, ".jsonl.gz") if n.startswith(f"{prefix}part-"))
                 for out in (one, two)]
        assert lines[0] == lines[1] and lines[0]
    # The finished two-worker run, rerun with one worker: the second group's shards go, and
    # every file is the one-worker run's, byte for byte (gzip's header has no time, no name).
    clean(corpus, two, "-w", "1", "--output-format", "jsonl.gz")
    assert shard_names(two, ".jsonl.gz") == shard_names(one, ".jsonl.gz")
    for name in shard_names(one, ".jsonl.gz"):
        assert (two / name).read_bytes() == (one / name).read_bytes(), name
    assert run("stats", str(two), "--verify").returncode == 0


def test_a_killed_run_resumes_to_the_same_bytes(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    texts = [t for _, t in documents]
    for n in range(40):
        write_jsonl(corpus / f"{n:02d}.jsonl", [{"id": f"{n}-{i}", "text": t, "meta": {"i": i}}
                                                for i, t in enumerate(texts[n % 7::3])]
                    + [{"id": f"{n}-dup", "text": texts[n % 5]}])
    options = ("--workers", "1", "-q", "--output-format", "jsonl.zst")
    reference = tmp_path / "reference"
    finish(start_cli("clean", str(corpus), "-o", str(reference), *options))

    out = tmp_path / "out"
    proc = start_cli("clean", str(corpus), "-o", str(out), *options)
    assert 5 <= kill_after_markers(proc, out / ".tokpipe" / "seg0", 5) < 40
    assert not (out / "manifest.json").exists()
    finish(start_cli("clean", str(corpus), "-o", str(out), *options))

    names = shard_names(reference, ".jsonl.zst")
    assert names and shard_names(out, ".jsonl.zst") == names
    for name in names:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert run("stats", str(out), "--verify").returncode == 0


def test_a_wrong_format_is_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("clean", str(REPO / "examples" / "corpus"), "-o", str(out), "--output-format", "csv")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "tokpipe: error: --output-format must be one of parquet, jsonl, jsonl.gz, jsonl.zst, not 'csv'"]
    assert not out.exists()
    from tokpipe import pipeline
    from tokpipe.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="output_format must be one of parquet, jsonl, jsonl.gz, jsonl.zst"):
        pipeline.run([REPO / "examples" / "corpus"], out, output_format="JSONL")
    assert not out.exists()


def test_another_format_on_resume_is_refused_like_another_config(tmp_path: Path) -> None:
    corpus, out = str(REPO / "examples" / "corpus"), tmp_path / "out"
    clean(Path(corpus), out, "-w", "1")
    again = run("clean", corpus, "-o", str(out), "-w", "1", "--output-format", "jsonl")
    assert again.returncode == 2  # usage: the output folder holds another run
    assert "different config" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in out.glob("data/part-*")) == ["part-00000-00000.parquet"]
    clean(Path(corpus), out, "-w", "1", "--output-format", "jsonl", "--overwrite")
    assert sorted(p.name for p in out.glob("data/part-*")) == ["part-00000-00000.jsonl"]
    # And back: a JSON Lines run is not resumed as a Parquet one either.
    back = run("clean", corpus, "-o", str(out), "-w", "1")
    assert back.returncode == 2 and "different config" in back.stderr
