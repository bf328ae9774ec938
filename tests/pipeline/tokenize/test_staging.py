"""``tokenize.staging``: a task whose staging a power loss damaged (a short or zero-filled
file, an empty marker, an ids range past its file's end) or that an older tokpipe staged
another way is found on resume and redone, and only those tasks."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

from tests.pipeline.tokenize.helpers import GPT2, digest, run_options
from tokpipe.pipeline.engines import RunOptions
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus
from tokpipe.pipeline.tokenize.staging import StagedTask, staged_batches


def test_damaged_staging_is_found_and_its_task_redone(corpus: Path, tmp_path: Path) -> None:
    """What a power loss can leave (staging is not fsynced): a task's marker whose staging
    file came back short, one whose file came back zero-filled, a marker cut to nothing. The
    rerun redoes exactly those tasks, and the output is the uninterrupted run's."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=100, pack=True, seed=2)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    tokenize_corpus([str(corpus)], out, options, run_options(1, keep_staging=True))  # the staging, to damage
    seg = out / ".tokpipe" / "seg0"
    staged = sorted((seg / "kept").glob("part-*.arrow"))
    assert len(staged) > 4
    with open(staged[1], "r+b") as f:
        f.truncate(os.path.getsize(staged[1]) // 2)
    with open(staged[3], "r+b") as f:
        f.write(bytes(os.path.getsize(staged[3])))
    (seg / "000002.json").write_bytes(b"")
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert resumed.tasks_run == 3
    assert digest(out) == digest(reference)
    assert resumed.manifest["totals"] == json.loads((reference / "manifest.json").read_text())["totals"]


def test_a_short_ids_file_redoes_the_tasks_past_its_end(corpus: Path, tmp_path: Path) -> None:
    """The raw ids file has no magic bytes: a task whose ids range ends past the file's end
    (what a power loss can leave) is redone, and only those tasks."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seq_len=100, pack=True, seed=2)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    first = tokenize_corpus([str(corpus)], out, options, run_options(1, keep_staging=True))  # the staging, to cut
    seg = out / ".tokpipe" / "seg0"
    (ids,) = sorted((seg / "kept").glob("ids-*.bin"))
    ends = sorted(json.loads(m.read_text())["ids"]["end"] for m in seg.glob("*.json"))
    cut = ends[len(ends) // 2] - 1
    os.unlink(out / "megatron" / "train.bin")  # the .bin is the same file: cut the staging alone
    with open(ids, "r+b") as f:
        f.truncate(cut)
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert resumed.tasks_run == sum(end > cut for end in ends) < first.tasks_run
    assert digest(out) == digest(reference)


def test_tasks_staged_the_old_way_are_redone(corpus: Path, tmp_path: Path) -> None:
    """A marker from a tokpipe that staged ids in Arrow files names no ids range: the rerun
    redoes that task instead of failing, and the output is the uninterrupted run's."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=5)
    reference, out = tmp_path / "reference", tmp_path / "out"
    tokenize_corpus([str(corpus)], reference, options, run_options(1))
    tokenize_corpus([str(corpus)], out, options, run_options(1, keep_staging=True))  # the staging, to age
    marker = sorted((out / ".tokpipe" / "seg0").glob("*.json"))[1]
    summary = json.loads(marker.read_text())
    del summary["ids"]
    marker.write_text(json.dumps(summary))
    (out / "manifest.json").unlink()
    resumed = tokenize_corpus([str(corpus)], out, options, run_options(1))
    assert resumed.tasks_run == 1
    assert digest(out) == digest(reference)


def test_the_list_of_staged_batches_holds_no_memory_per_document(tmp_path: Path) -> None:
    """Phase 2 lists every staged batch of the run (``staged_batches``) and keeps the list
    to its end: its per-document columns must stay views of the memory-mapped staging
    files, not arrays of this process (int64 offsets were 8 bytes a document, 46 MB for
    the 5.7M documents of the 10M-document proof). Counted with ``tracemalloc``, which sees
    numpy's allocations: 20,000 documents in 3 batches hold under 1 byte a document."""
    folder = tmp_path / "in"
    folder.mkdir()
    with open(folder / "docs.jsonl", "w", encoding="utf-8") as f:
        for n in range(20_000):
            f.write(json.dumps({"id": f"d{n}", "text": f"word {n} and more"}) + "\n")
    out = tmp_path / "out"
    tokenize_corpus([str(folder)], out, TokenizeOptions(GPT2), RunOptions(workers=1, keep_staging=True))
    seg = out / ".tokpipe" / "seg0"
    tasks = []
    for marker in sorted(seg.glob("[0-9]*.json")):
        summary = json.loads(marker.read_text())
        ids = summary["ids"]
        tasks.append(StagedTask([seg / "kept" / name for name in summary["kept_files"]], seg / "kept" / ids["file"],
                                ids["start"], ids["end"]))
    tracemalloc.start()
    try:
        files, batches = staged_batches(tasks, 2)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(len(b.doc_ids) for b in batches) == 20_000
    assert held < 20_000
    # The offsets, computed on demand, are the staged lengths' running sums.
    assert sum(int(b.offsets[-1]) for b in batches) * 2 == sum(t.end - t.start for t in tasks)
