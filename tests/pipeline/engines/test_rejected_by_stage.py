"""``rejected_by_stage`` (``tokpipe clean --rejected-by-stage``): each stage's drops in
``OUT/rejected/STAGE/``. Run over the shared Common Crawl sample with three stages that each
drop documents, every stage folder is checked against the rows of a run in the default layout
whose ``stage`` column names that stage (read with pyarrow alone), for any number of workers,
in Parquet and JSON Lines, through a kill and a resume, and as the manifest, the dataset card
(``datasets.load_dataset``), ``pyarrow.dataset``, ``tokpipe stats --verify`` and ``tokpipe
report`` see it."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tests.conftest import CORPORA
from tests.pipeline.killed_runs import finish, kill_after_markers, start_cli
from tokpipe.errors import InvalidArgumentError, OutputConflictError
from tokpipe.pipeline.writers import ParquetShardWriter, verify_manifest

#: Three stages that each drop some of the sample: short pages, pages gopher_quality judges
#: poor, and the planted copies of the pages both keep.
CONFIG = {"stages": [{"type": "length_filter", "min": 1000}, {"type": "gopher_quality"}, {"type": "exact_dedup"}]}
STAGES = ("length_filter", "gopher_quality", "exact_dedup")
COLUMNS = ["id", "text", "reason", "stage", "duplicate_of"]


def cc_documents() -> list[dict[str, Any]]:
    docs = []
    for name in ("cc_en_head-0091.jsonl.gz", "cc_en_head-0174.jsonl.gz"):
        with gzip.open(CORPORA / "web" / name, "rt", encoding="utf-8") as f:
            docs += [json.loads(line) for line in f]
    assert len(docs) == 20, "expected the two Common Crawl samples of 10 documents"
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 20 Common Crawl documents and a copy of each under another id, over four files."""
    docs = cc_documents()
    docs += [{**d, "id": f"copy-{d['id']}"} for d in docs]
    root = tmp_path_factory.mktemp("cc")
    for part in range(4):
        lines = [json.dumps(d, ensure_ascii=False) + "\n" for d in docs[part::4]]
        (root / f"part{part}.jsonl").write_text("".join(lines), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def default_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("default") / "out"
    pipeline.run([corpus], out, CONFIG, workers=2)
    return out


def rows(files: list[Path]) -> list[tuple[Any, ...]]:
    table = pq.read_table(files, columns=COLUMNS) if files else None
    return sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS))) if table is not None else []


def by_stage_of_default(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The default layout's rejected rows grouped by their ``stage`` column."""
    grouped: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows(sorted(out.glob("rejected/part-*.parquet"))):
        grouped[row[3]].append(row)
    return dict(grouped)


def stage_folders(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {folder.name: rows(sorted(folder.glob("part-*.parquet")))
            for folder in sorted((out / "rejected").iterdir())}


def test_each_stage_folder_holds_exactly_the_rows_that_stage_dropped(corpus: Path, default_run: Path,
                                                                     tmp_path: Path) -> None:
    expected = by_stage_of_default(default_run)
    assert set(expected) == set(STAGES), "every stage drops some of the sample"
    out = tmp_path / "out"
    result = pipeline.run([corpus], out, CONFIG, workers=2, rejected_by_stage=True)
    assert not list((out / "rejected").glob("part-*")), "nothing is left at the top of rejected/"
    assert stage_folders(out) == expected
    # The union is the default run's rejected rows; the kept shards are the same files.
    assert sorted(r for stage in STAGES for r in expected[stage]) == rows(sorted(
        default_run.glob("rejected/part-*.parquet")))
    for ours, theirs in zip(sorted(out.glob("data/*")), sorted(default_run.glob("data/*")), strict=True):
        assert ours.read_bytes() == theirs.read_bytes()
    # The manifest lists every per-stage shard with its stage, and the result counts them.
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    listed = {e["path"]: e for e in manifest["rejected"]}
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.glob("rejected/*/part-*.parquet"))
    assert sorted(listed) == on_disk
    assert all(e["stage"] == e["path"].split("/")[1] for e in listed.values())
    assert result.rejected_rows == manifest["totals"]["rejected_rows"] == sum(len(v) for v in expected.values())
    assert verify_manifest(out) == []
    stray = out / "rejected" / "exact_dedup" / "part-00009-00000.parquet"
    shutil.copy(sorted((out / "rejected" / "exact_dedup").iterdir())[0], stray)
    assert verify_manifest(out) == ["rejected/exact_dedup/part-00009-00000.parquet: on disk but not listed in the "
                                    "manifest"]
    stray.unlink()
    # One stage's drops open as one table in pyarrow, by their folder alone.
    gopher = pads.dataset(str(out / "rejected" / "gopher_quality")).to_table()
    assert set(gopher.column("stage").to_pylist()) == {"gopher_quality"}
    assert gopher.num_rows == len(expected["gopher_quality"])
    assert sorted(pipeline.open_dataset(out, rejected=True).to_table(columns=COLUMNS).to_pylist(),
                  key=lambda r: tuple(map(str, r.values()))) == \
        sorted(pipeline.open_dataset(default_run, rejected=True).to_table(columns=COLUMNS).to_pylist(),
               key=lambda r: tuple(map(str, r.values())))


def test_the_stage_folders_are_the_same_for_any_number_of_workers(corpus: Path, tmp_path: Path) -> None:
    tables = []
    for workers in (1, 3):
        out = tmp_path / f"out{workers}"
        pipeline.run([corpus], out, CONFIG, workers=workers, rejected_by_stage=True)
        # Read in the order of the shards' names: the documents' order too is the same.
        tables.append({f.name: pq.read_table(sorted(f.glob("part-*.parquet"))) for f in (out / "rejected").iterdir()})
    assert tables[0].keys() == tables[1].keys() == set(STAGES)
    for stage in STAGES:
        assert tables[0][stage].equals(tables[1][stage]), stage


def test_the_stage_folders_are_written_one_after_another(corpus: Path, default_run: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker writes one stage's folder at a time (one pass over its staging per stage),
    so it holds one stage's pending row group, not one per stage: at 10M documents the
    pending row groups of six stages held up to 620 MiB a worker. Checked by the writers
    open at once under rejected/ (one worker: the final step runs in this process)."""
    open_now: set[int] = set()
    most = 0
    init, close, abort = ParquetShardWriter.__init__, ParquetShardWriter.close, ParquetShardWriter.abort

    def opened(self: ParquetShardWriter, directory: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal most
        init(self, directory, *args, **kwargs)
        if "rejected" in Path(str(directory)).parts:
            open_now.add(id(self))
            most = max(most, len(open_now))

    def closed(self: ParquetShardWriter) -> Any:
        open_now.discard(id(self))
        return close(self)

    def aborted(self: ParquetShardWriter) -> None:
        open_now.discard(id(self))
        abort(self)

    monkeypatch.setattr(ParquetShardWriter, "__init__", opened)
    monkeypatch.setattr(ParquetShardWriter, "close", closed)
    monkeypatch.setattr(ParquetShardWriter, "abort", aborted)
    out = tmp_path / "out"
    pipeline.run([corpus], out, CONFIG, workers=1, rejected_by_stage=True)
    assert most == 1
    assert stage_folders(out) == by_stage_of_default(default_run)


def test_two_stages_of_one_type_get_two_folders(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = {"stages": [{"type": "length_filter", "min": 600}, {"type": "length_filter", "min": 2500}]}
    result = pipeline.run([corpus], out, config, rejected_by_stage=True, workers=2)
    lengths = {d["id"]: len(d["text"]) for d in cc_documents()}
    lengths |= {f"copy-{i}": n for i, n in lengths.items()}
    folders = stage_folders(out)
    assert set(folders) == {"length_filter", "length_filter-2"}
    assert sorted(r[0] for r in folders["length_filter"]) == sorted(i for i, n in lengths.items() if n < 600)
    assert sorted(r[0] for r in folders["length_filter-2"]) == sorted(i for i, n in lengths.items()
                                                                     if 600 <= n < 2500)
    for folder, rows_ in folders.items():  # the column names the stage as its folder does
        assert {r[3] for r in rows_} == {folder}
    # Each stage has its own row of stats, named as its folder, in the result and the manifest.
    short = sum(n < 600 for n in lengths.values())
    middle = sum(600 <= n < 2500 for n in lengths.values())
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    for stats in ({name: s.as_dict() for name, s in result.stats.items()}, manifest["stats"]):
        assert list(stats) == ["read", "length_filter", "length_filter-2"]
        assert (stats["length_filter"]["in"], stats["length_filter"]["dropped_too_short"]) == (len(lengths), short)
        assert (stats["length_filter-2"]["in"], stats["length_filter-2"]["dropped_too_short"]) == (
            len(lengths) - short, middle)


def test_jsonl_stage_folders_read_with_json(corpus: Path, default_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pipeline.run([corpus], out, CONFIG, workers=2, rejected_by_stage=True, output_format="jsonl")
    expected = by_stage_of_default(default_run)
    for stage in STAGES:
        records = [json.loads(line) for path in sorted((out / "rejected" / stage).glob("part-*.jsonl"))
                   for line in path.read_text(encoding="utf-8").splitlines()]
        assert sorted(tuple(r[c] for c in COLUMNS) for r in records) == expected[stage]
    assert verify_manifest(out) == []


def test_the_card_loads_every_rejected_row_and_each_stage(corpus: Path, default_run: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    pipeline.run([corpus], out, CONFIG, workers=2, rejected_by_stage=True)
    expected = by_stage_of_default(default_run)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    def loaded(name: str) -> list[tuple[Any, ...]]:
        table = datasets.load_dataset(str(out), name, split="train", cache_dir=str(tmp_path / "hf")).data.table
        return sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS)))

    assert loaded("rejected") == sorted(r for stage in STAGES for r in expected[stage])
    for stage in STAGES:
        assert loaded(f"rejected-{stage}") == expected[stage]


def test_the_report_reads_every_per_stage_shard(corpus: Path, default_run: Path, tmp_path: Path) -> None:
    from tokpipe.report.collect import read_output

    out = tmp_path / "out"
    pipeline.run([corpus], out, CONFIG, workers=2, rejected_by_stage=True)
    ours, theirs = read_output(str(out)), read_output(str(default_run))
    assert ours.rows["rejected"] == theirs.rows["rejected"] == sum(map(len, by_stage_of_default(default_run).values()))
    assert ours.reason_rows == theirs.reason_rows


def test_a_killed_run_resumes_to_the_uninterrupted_stage_folders(tmp_path: Path) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    docs = cc_documents()
    for n in range(40):  # 40 tasks, each with pages every stage drops (and copies of other tasks')
        lines = [json.dumps({**d, "id": f"{n}-{i}"}) + "\n" for i, d in enumerate(docs[n % 4::4])]
        (corpus / f"{n:02d}.jsonl").write_text("".join(lines), encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG), encoding="utf-8")
    args = ["clean", str(corpus), "-c", str(config), "--workers", "1", "-q", "--rejected-by-stage"]
    reference = tmp_path / "reference"
    finish(start_cli(*args, "-o", str(reference)))

    out = tmp_path / "out"
    proc = start_cli(*args, "-o", str(out))
    assert 5 <= kill_after_markers(proc, out / ".tokpipe" / "seg0", 5) < 40
    assert not (out / "manifest.json").exists()
    finish(start_cli(*args, "-o", str(out)))
    assert stage_folders(out) == stage_folders(reference)
    assert set(stage_folders(out)) == set(STAGES)
    for ours, theirs in zip(sorted(out.glob("rejected/*/*")), sorted(reference.glob("rejected/*/*")), strict=True):
        assert ours.relative_to(out) == theirs.relative_to(reference)
        assert pq.read_table(ours).equals(pq.read_table(theirs))
    assert verify_manifest(out) == []


def test_a_group_cut_short_while_packing_leaves_no_shard_in_a_stage_folder(corpus: Path, tmp_path: Path) -> None:
    """As if the run had been killed while worker group 0 wrote its per-stage shards: its
    pack marker and the manifest not yet written, one shard too many in a stage folder (a
    copy of one it wrote, so reading the folder would count those rows twice). The rerun
    redoes the group, and only what it writes is there."""
    reference = tmp_path / "reference"
    pipeline.run([corpus], reference, CONFIG, workers=2, rejected_by_stage=True)
    out = tmp_path / "out"
    pipeline.run([corpus], out, CONFIG, workers=2, rejected_by_stage=True, keep_staging=True)
    (out / ".tokpipe" / "pack" / "0.json").unlink()
    (out / "manifest.json").unlink()
    shard = sorted((out / "rejected" / "length_filter").glob("part-00000-*.parquet"))[0]
    shutil.copy(shard, shard.with_name("part-00000-00007.parquet"))

    pipeline.run([corpus], out, CONFIG, workers=2, rejected_by_stage=True, keep_staging=True)
    assert not (out / "rejected" / "length_filter" / "part-00000-00007.parquet").exists()
    assert stage_folders(out) == stage_folders(reference)
    assert verify_manifest(out) == []


def test_a_bad_value_or_another_layout_is_refused_before_any_work(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        pipeline.run([corpus], tmp_path / "bad", CONFIG, rejected_by_stage="yes")
    assert "rejected_by_stage" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "bad").exists()
    out = tmp_path / "out"
    pipeline.run([corpus], out, CONFIG)
    with pytest.raises(OutputConflictError):
        pipeline.run([corpus], out, CONFIG, rejected_by_stage=True)
    with pytest.raises(InvalidArgumentError, match="rejected_by_stage"):
        pipeline.apply(["a text"], rejected_by_stage=True)
