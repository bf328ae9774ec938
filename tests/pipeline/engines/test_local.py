"""The local executor: every document accounted for, the same result for any worker count,
and a killed run that resumes to exactly the uninterrupted output."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tests.pipeline.killed_runs import finish, kill_after_markers, start_cli
from tokpipe.errors import PipelineError
from tokpipe.pipeline.base import DUPLICATE_OF


def write_jsonl(path: Path, records: list[object]) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records),
                    encoding="utf-8")


@pytest.fixture()
def corpus(tmp_path: Path, documents: list[tuple[str, str]]) -> Path:
    """Real documents spread over files, with duplicates across files, short documents, and
    every kind of bad input the readers must set aside."""
    root = tmp_path / "in"
    root.mkdir()
    texts = [t for _, t in documents]
    for n in range(6):
        chunk = texts[n::6]
        records = [{"id": f"f{n}-{i}", "text": t, "n": i} for i, t in enumerate(chunk)]
        records.append({"id": f"f{n}-dup", "text": texts[0]})          # exact duplicates across files
        records.append({"id": f"f{n}-short", "text": ""})              # dropped by length_filter
        write_jsonl(root / f"part{n}.jsonl", records)
    write_jsonl(root / "bad.jsonl", [{"id": "ok-1", "text": texts[1] + " (again, but edited)"}, "{not json",
                                     {"id": "no-text"}, {"id": "num", "text": 5}, {"id": "ok-2", "text": "fine text"}])
    whole = gzip.compress(("\n".join(json.dumps({"text": t}) for t in texts[:20]) + "\n").encode())
    (root / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (root / "empty.jsonl").write_bytes(b"")
    (root / "utf8.jsonl").write_bytes(b'{"id": "bad-utf8", "text": "caf\xe9"}\n{"id": "good-utf8", "text": "caf\xc3\xa9"}\n')
    (root / "notes.txt").write_text(texts[2], encoding="utf-8")
    return root


def read_rows(files: list[Path], columns: list[str]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for f in files:
        table = pq.read_table(f, columns=columns)
        rows += zip(*(table.column(c).to_pylist() for c in columns))
    return sorted(rows)  # type: ignore[type-var]


def output_rows(out: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """(id, text) of the kept documents and (id, text, reason) of the rejected ones."""
    return (read_rows(sorted(out.glob("data/part-*.parquet")), ["id", "text"]),
            read_rows(sorted(out.glob("rejected/part-*.parquet")), ["id", "text", "reason"]))


def test_every_document_is_kept_rejected_or_recorded(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = pipeline.run([corpus], out, workers=2, shard_size=20_000)
    kept, rejected = output_rows(out)
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text(encoding="utf-8").splitlines()]
    read = result.stats["read"]
    # The identity: input units = kept + rejected + error records.
    assert read.input == len(kept) + len(rejected) + len(errors)
    assert {e["reason"] for e in errors} >= {"malformed_json", "missing_text_field", "non_string_text_field",
                                             "corrupt_stream", "empty_file", "invalid_utf8"}
    assert all("caf" not in json.dumps(e) for e in errors), "no document text in errors.jsonl"
    # Every duplicate of texts[0] but the first copy is rejected, naming the kept one.
    reasons = [r for _, _, r in rejected]
    assert reasons.count("duplicate") >= 5 and reasons.count("too_short") == 6
    duplicate_of = read_rows(sorted(out.glob("rejected/part-*.parquet")), ["reason", DUPLICATE_OF])
    kept_ids = {i for i, _ in kept}
    assert {d for r, d in duplicate_of if r == "duplicate"} <= kept_ids
    assert all(d is None for r, d in duplicate_of if r != "duplicate")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert sum(s["rows"] for s in manifest["shards"]) == len(kept)
    assert len(manifest["shards"]) > 2, "shard_size should have cut several shards"
    assert manifest["stats"]["exact_dedup"]["dropped_duplicate"] == reasons.count("duplicate")


def test_a_stage_type_met_again_has_its_own_row_of_stats(corpus: Path, tmp_path: Path) -> None:
    """Stats are kept per stage, not per type: with a document stage and a global stage each
    twice, every stage's row says what it did (a type met again is ``TYPE-2``, as its folder
    under rejected/ is), and the rows account for every document read."""
    config = {"stages": [{"type": "length_filter", "min": 1}, {"type": "exact_dedup"},
                         {"type": "length_filter", "min": 200}, {"type": "exact_dedup"}]}
    out = tmp_path / "out"
    result = pipeline.run([corpus], out, config, workers=2)
    kept, rejected = output_rows(out)
    stats = result.stats
    assert list(stats) == ["read", "length_filter", "exact_dedup", "length_filter-2", "exact_dedup-2"]
    reasons = [r for _, _, r in rejected]
    assert stats["length_filter"].dropped["too_short"] == 6  # the empty texts
    assert stats["exact_dedup"].dropped["duplicate"] == reasons.count("duplicate") > 0
    assert stats["length_filter-2"].dropped["too_short"] == reasons.count("too_short") - 6 > 0
    assert sum(stats["exact_dedup-2"].dropped.values()) == 0  # the first one left no duplicate
    # Each stage's input is what the stage before it kept.
    names = list(stats)
    for before, after in zip(names, names[1:]):
        assert stats[after].input == stats[before].kept, (before, after)
    assert stats["exact_dedup-2"].kept == len(kept)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert list(manifest["stats"]) == names
    assert manifest["stats"]["length_filter-2"] == stats["length_filter-2"].as_dict()
    # The rejected documents name the stage as its row does.
    by_stage = Counter(s for s, in read_rows(sorted(out.glob("rejected/part-*.parquet")), ["stage"]))
    assert by_stage == {name: sum(s.dropped.values()) for name, s in stats.items() if name != "read"
                        and sum(s.dropped.values())}


def test_same_result_for_1_2_and_4_workers(corpus: Path, tmp_path: Path) -> None:
    results = []
    for workers in (1, 2, 4):
        out = tmp_path / f"out{workers}"
        pipeline.run([corpus], out, workers=workers)
        results.append(output_rows(out))
    assert results[0] == results[1] == results[2]
    assert results[0][0], "something is kept"


def test_rerun_is_a_no_op_and_another_config_is_refused(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = pipeline.run([corpus], out, workers=2)
    before = output_rows(out)
    again = pipeline.run([corpus], out, workers=2)
    assert again.tasks_run == 0 and output_rows(out) == before and first.tasks_run > 0
    with pytest.raises(PipelineError, match="different config"):
        pipeline.run([corpus], out, config={"stages": [{"type": "normalize"}]}, workers=2)
    pipeline.run([corpus], out, config={"stages": [{"type": "normalize"}]}, workers=2, overwrite=True)
    assert not (out / "rejected").exists() or not any((out / "rejected").glob("*.parquet"))


def output_files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_manifest_gives_the_wall_time_of_every_call_of_the_run(corpus: Path, tmp_path: Path) -> None:
    """``wall_seconds`` is the run's wall time: a call that resumes a run adds its own time to
    what the earlier calls recorded in the staging (it used to write its own time alone), and
    a rerun of a finished run leaves the manifest's number as it is."""
    out = tmp_path / "out"
    first = pipeline.run([corpus], out, workers=1, keep_staging=True)
    assert first.run_wall_seconds is None  # this call was the whole run
    recorded = json.loads((out / ".tokpipe" / "wall.json").read_text(encoding="utf-8"))["seconds"]
    assert recorded >= json.loads((out / "manifest.json").read_text(encoding="utf-8"))["wall_seconds"] > 0
    # Earlier calls that took 1,000 s: the next call's manifest counts them.
    (out / ".tokpipe" / "wall.json").write_text(json.dumps({"seconds": 1000.0}), encoding="utf-8")
    again = pipeline.run([corpus], out, workers=1)  # over the kept staging, which then goes
    total = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["wall_seconds"]
    assert 1000 < total < 1000 + 600 and again.run_wall_seconds == total
    assert not (out / ".tokpipe").exists()
    rerun = pipeline.run([corpus], out, workers=1)  # finished: nothing redone, nothing rewritten
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["wall_seconds"] == total
    assert rerun.run_wall_seconds == total


def test_the_staging_goes_once_the_run_succeeded_and_a_rerun_redoes_nothing(corpus: Path, tmp_path: Path) -> None:
    """Issue 22: ``.tokpipe/`` stayed forever, bigger than the output. Once the run
    succeeded the folder holds the output alone; the same command again finds the run
    finished (in its manifest) and rewrites nothing; another config is refused, and so is
    another cut of the shards, which would need the staging."""
    out = tmp_path / "out"
    first = pipeline.run([corpus], out, workers=2, shard_size=20_000)
    assert first.tasks_run > 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "data", "errors.jsonl", "manifest.json", "rejected"]
    files = output_files(out)
    again = pipeline.run([corpus], out, workers=2, shard_size=20_000)
    assert again.tasks_run == 0 and output_files(out) == files
    assert (again.kept, again.rejected_rows, again.errors, again.shards) == \
        (first.kept, first.rejected_rows, first.errors, first.shards)
    assert {k: v.as_dict() for k, v in again.stats.items()} == {k: v.as_dict() for k, v in first.stats.items()}
    with pytest.raises(PipelineError, match="different config"):
        pipeline.run([corpus], out, config={"stages": [{"type": "normalize"}]}, workers=2, shard_size=20_000)
    with pytest.raises(PipelineError, match="cannot be cut again"):
        pipeline.run([corpus], out, workers=1, shard_size=20_000)
    assert output_files(out) == files


def test_a_finished_run_over_an_input_changed_since_is_not_called_done(corpus: Path, tmp_path: Path) -> None:
    """Its staging gone, a finished run's manifest keeps its inputs' sizes and times: a rerun
    after an input changed is refused, naming it, rather than reporting the old output."""
    out = tmp_path / "out"
    pipeline.run([corpus], out, workers=1)
    changed = corpus / "part2.jsonl"
    with open(changed, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "new", "text": "a document added after the run"}) + "\n")
    with pytest.raises(PipelineError, match=f"input {changed} changed since the run began"):
        pipeline.run([corpus], out, workers=1)


def test_keep_staging_keeps_it_for_another_cut_of_the_shards(corpus: Path, tmp_path: Path) -> None:
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    pipeline.run([corpus], out, workers=2, shard_size=20_000, keep_staging=True)
    assert (out / ".tokpipe" / "run.json").exists() and list((out / ".tokpipe" / "seg0").glob("*.json"))
    recut = pipeline.run([corpus], out, workers=1, shard_size=20_000)
    assert recut.tasks_run == 0  # the stages did not run again
    assert not (out / ".tokpipe").exists()  # this run did not keep it
    pipeline.run([corpus], fresh, workers=1, shard_size=20_000)
    assert {k: v for k, v in output_files(out).items() if k != "manifest.json"} == \
        {k: v for k, v in output_files(fresh).items() if k != "manifest.json"}


def test_a_removal_cut_short_is_finished_by_the_rerun(corpus: Path, tmp_path: Path) -> None:
    """A crash while the staging is removed leaves part of it, without ``run.json`` (removed
    first): the same command finds the run finished, removes the rest, and redoes nothing."""
    out = tmp_path / "out"
    pipeline.run([corpus], out, workers=1, keep_staging=True)
    files = output_files(out)
    (out / ".tokpipe" / "run.json").unlink()
    again = pipeline.run([corpus], out, workers=1)
    assert again.tasks_run == 0 and not (out / ".tokpipe").exists()
    assert output_files(out) == {k: v for k, v in files.items() if not k.startswith(".tokpipe/")}


def test_a_staging_dir_elsewhere_goes_too(corpus: Path, tmp_path: Path) -> None:
    out, staging = tmp_path / "out", tmp_path / "staging"
    pipeline.run([corpus], out, workers=1, staging_dir=str(staging))
    assert not staging.exists() and not (out / ".tokpipe").exists()
    assert pipeline.run([corpus], out, workers=1, staging_dir=str(staging)).tasks_run == 0


def test_strict_stops_at_the_first_bad_input(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"bad\.jsonl|cut\.jsonl\.gz|empty\.jsonl|utf8\.jsonl"):
        pipeline.run([corpus], tmp_path / "out", workers=1, strict=True)


def test_a_killed_run_resumes_to_the_uninterrupted_output(tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    corpus = tmp_path / "in"
    corpus.mkdir()
    texts = [t for _, t in documents]
    for n in range(40):
        write_jsonl(corpus / f"{n:02d}.jsonl", [{"id": f"{n}-{i}", "text": t} for i, t in enumerate(texts[n % 7::3])]
                    + [{"id": f"{n}-dup", "text": texts[n % 5]}])
    reference = tmp_path / "reference"
    finish(start_cli("clean", str(corpus), "-o", str(reference), "--workers", "1", "-q"))

    out = tmp_path / "out"
    proc = start_cli("clean", str(corpus), "-o", str(out), "--workers", "1", "-q")
    assert 5 <= kill_after_markers(proc, out / ".tokpipe" / "seg0", 5) < 40
    assert not (out / "manifest.json").exists()

    finish(start_cli("clean", str(corpus), "-o", str(out), "--workers", "1", "-q"))
    assert output_rows(out) == output_rows(reference)
    assert [p.name for p in sorted(out.glob("data/*.parquet"))] == \
        [p.name for p in sorted(reference.glob("data/*.parquet"))]
    for a, b in zip(sorted(out.glob("data/*.parquet")), sorted(reference.glob("data/*.parquet"))):
        assert pq.read_table(a).equals(pq.read_table(b))


def test_the_output_loads_as_one_table_in_pyarrow_and_hf_datasets(corpus: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.dataset as pads

    out = tmp_path / "out"
    pipeline.run([corpus], out, workers=2, shard_size=20_000)
    kept, rejected = output_rows(out)
    # Inputs with different fields (jsonl with and without "n", a .txt) share one schema.
    # The kept shards' folder opens as it is, with no option: it holds them alone.
    table = pads.dataset(str(out / "data")).to_table()
    assert sorted(zip(table.column("id").to_pylist(), table.column("text").to_pylist())) == kept
    assert table.schema.names[:2] == ["id", "text"] and "n" in table.schema.names
    assert pipeline.open_dataset(out).to_table().equals(pads.dataset(
        [str(s) for s in sorted(out.glob("data/part-*.parquet"))], format="parquet").to_table())
    rejected_table = pipeline.open_dataset(out, rejected=True).to_table(columns=["id", "text", "reason"])
    assert sorted(zip(*(rejected_table.column(c).to_pylist() for c in ("id", "text", "reason")))) == rejected

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))["train"]
    assert sorted(zip(loaded["id"], loaded["text"])) == kept
    loaded_rejected = datasets.load_dataset(str(out), "rejected", cache_dir=str(tmp_path / "hf-cache"))["train"]
    assert sorted(zip(loaded_rejected["id"], loaded_rejected["text"], loaded_rejected["reason"])) == rejected
    parquet = datasets.load_dataset("parquet", data_files=str(out / "data" / "part-*.parquet"),
                                    cache_dir=str(tmp_path / "hf-cache"))
    assert parquet["train"].num_rows == len(kept)


def _worker_threads() -> tuple[str | None, int]:
    import pyarrow

    return os.environ.get("RAYON_NUM_THREADS"), pyarrow.cpu_count()


@pytest.mark.parametrize("preset", [None, "3"])
def test_worker_processes_share_the_cores(preset: str | None) -> None:
    # N workers on C cores get C // N threads each (Rust's pool and Arrow's), not C each;
    # a RAYON_NUM_THREADS the user set is kept. Run in a child so the variable starts as given.
    code = (
        "import os, json\n"
        "from tokpipe.pipeline.engines.workers import WorkerPool\n"
        "from tests.pipeline.engines.test_local import _worker_threads\n"
        "os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:2]))\n"
        "pool = WorkerPool(2)\n"
        "print(json.dumps(pool.submit(_worker_threads, (), 'probe', '').result()))\n"
        "pool.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    if preset is not None:
        env["RAYON_NUM_THREADS"] = preset
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.returncode == 0, out.stderr
    threads, arrow = json.loads(out.stdout)
    expected = preset or str(max(1, min(2, len(os.sched_getaffinity(0))) // 2))
    assert threads == expected and arrow == int(expected)


def test_prefetched_items_keep_their_order_and_errors() -> None:
    """The reader runs a batch ahead on a thread: same items, same order, its exception
    raised where its item would have been, and a consumer that stops early stops it."""
    import threading

    from tokpipe.pipeline.engines.units import prefetched

    assert list(prefetched(iter(range(100)))) == list(range(100))
    assert list(prefetched(iter([]))) == []

    def failing():  # type: ignore[no-untyped-def]
        yield 1
        yield 2
        raise ValueError("bad input")

    got = []
    with pytest.raises(ValueError, match="bad input"):
        for item in prefetched(failing()):
            got.append(item)
    assert got == [1, 2]

    closed = threading.Event()

    def endless():  # type: ignore[no-untyped-def]
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    stream = prefetched(endless())
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert closed.is_set()


def test_batches_are_bounded_by_bytes_from_reading_to_the_shards(tmp_path: Path) -> None:
    """Parquet input, staging read back after a global stage, and the pack step batch by
    bytes, not only rows (issue 19: 1,024 rows of 1 MiB documents are a 1 GiB batch). The
    input is one row group of 1 MiB documents, as pyarrow writes a table by default; the
    output's row groups show the batches that reached the writer."""
    import pyarrow as pa

    from tokpipe.pipeline.readers.base import MAX_BATCH_TEXT_BYTES

    size = 1 << 20
    words = ("crawl text with enough different words to be a document " * (size // 50))[:size - 16]
    texts = [f"{n:08d} {words}" for n in range(80)]
    pq.write_table(pa.table({"id": [f"d{n}" for n in range(80)], "text": texts}), tmp_path / "big.parquet")
    assert pq.ParquetFile(tmp_path / "big.parquet").num_row_groups == 1
    out = tmp_path / "out"
    pipeline.run([tmp_path / "big.parquet"], out, workers=1)
    groups = [pq.ParquetFile(shard).metadata.row_group(g).num_rows
              for shard in sorted(out.glob("data/part-*.parquet")) for g in range(pq.ParquetFile(shard).num_row_groups)]
    assert sum(groups) == 80
    assert max(groups) <= MAX_BATCH_TEXT_BYTES // size + 1, groups


def test_an_input_changed_before_the_resume_is_refused(tmp_path: Path) -> None:
    """An input edited between a crash and the resume: the resumed run would mix documents
    of the old and the new file (issue 19), so it is refused, naming the file."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    text = "A document long enough to pass the default length filter, with some more words. " * 2
    for f in range(3):
        write_jsonl(inputs / f"part{f}.jsonl", [{"id": f"{f}-{n}", "text": f"{text} {f} {n}"} for n in range(20)])
    out = tmp_path / "out"
    pipeline.run([inputs], out, workers=1, keep_staging=True)  # the staging, to cut as a crash would
    # As if the run had been killed while task 1 ran: its marker, and everything after, gone.
    state = out / ".tokpipe"
    (state / "seg0" / "000001.json").unlink()
    for marker in [*state.glob("global0/*"), *state.glob("pack/*.json"), out / "manifest.json"]:
        marker.unlink()
    changed = inputs / "part1.jsonl"
    with open(changed, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "new", "text": text + " added after the crash"}) + "\n")
    with pytest.raises(PipelineError, match=f"input {changed} changed since the run began"):
        pipeline.run([inputs], out, workers=1)
    # Put back as it was (same bytes, same modification time), the run resumes.
    lines = changed.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]
    stat = (state / "inputs.json")
    recorded = json.loads(stat.read_text(encoding="utf-8"))[str(changed)]
    changed.write_text("".join(lines), encoding="utf-8")
    os.utime(changed, ns=(recorded[1], recorded[1]))
    result = pipeline.run([inputs], out, workers=1)
    assert result.kept == 60
