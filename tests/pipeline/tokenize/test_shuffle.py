"""``tokenize.shuffle``: its three ways (in place in one pass, key range by key range, spilled
to buckets) and the ``.bin`` linked from the staging or copied together all give the same
files, for any number of workers."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tests.pipeline.tokenize.helpers import GPT2, digest, recorded, run_options
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus
from tokpipe.pipeline.tokenize import shuffle


def test_the_bin_is_the_staging_linked_or_copied_to_the_same_bytes(corpus: Path, tmp_path: Path) -> None:
    """One worker stages every task's ids in order in one file: that file is the train .bin
    (a hard link, no second copy). Two workers stage into two files, interleaved: the .bin
    is copied together in task order, to the same bytes."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=9, seq_len=40, pack=True)
    one, two = tmp_path / "one", tmp_path / "two"
    tokenize_corpus([str(corpus)], one, options, run_options(1, keep_staging=True))
    tokenize_corpus([str(corpus)], two, options, run_options(2, keep_staging=True))
    staged = sorted((one / ".tokpipe" / "seg0" / "kept").glob("ids-*.bin"))
    assert len(staged) == 1
    assert os.path.samefile(staged[0], one / "megatron" / "train.bin")
    assert len(list((two / ".tokpipe" / "seg0" / "kept").glob("ids-*.bin"))) == 2
    assert (two / "megatron" / "train.bin").stat().st_nlink == 1
    assert digest(one) == digest(two)
    # The manifest lists every file with its sha256, whether the .bin was linked (its digest
    # read back) or copied (its digest taken while writing).
    assert recorded(one) == recorded(two) == digest(one)


@pytest.mark.parametrize("pack", [False, True])
def test_same_output_for_1_and_2_workers_reruns_and_spilled_buckets(corpus: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch, pack: bool) -> None:
    """The shuffle's three ways give the same files: in place in one pass, in place key range
    by key range (a small shuffle buffer), and spilled to key-range buckets on disk (what
    staging too large for the page cache takes)."""
    options = TokenizeOptions(GPT2, formats=("parquet", "megatron"), seed=3, val_fraction=0.1, seq_len=50 if pack else None,
                              pack=pack)
    a, b, c, d = tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "d"
    tokenize_corpus([str(corpus)], a, options, run_options(1))
    tokenize_corpus([str(corpus)], b, options, run_options(2))
    # A shuffle buffer far smaller than the corpus: many key ranges.
    small = replace(options, shuffle_buffer=20_000)
    result = tokenize_corpus([str(corpus)], c, small, run_options(2))
    assert digest(a) == digest(b) == digest(c)
    assert len(digest(a)) == 9  # errors.jsonl; train and val: shard, documents, .bin, .idx
    rerun = tokenize_corpus([str(corpus)], c, small, run_options(2))
    assert rerun.tasks_run == 0 and digest(c) == digest(a)
    assert result.manifest["totals"] == rerun.manifest["totals"]
    spilled: list[Path] = []
    original = shuffle._write_shuffled_spilling

    def spilling(*args: object, **kwargs: object) -> None:
        spilled.append(args[6])  # type: ignore[arg-type]  # the scratch folder
        original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shuffle, "_page_cache_budget", lambda: 0)
    monkeypatch.setattr(shuffle, "_write_shuffled_spilling", spilling)
    tokenize_corpus([str(corpus)], d, small, run_options(2))
    assert spilled and digest(d) == digest(a)
    assert recorded(a) == recorded(b) == recorded(c) == recorded(d) == digest(a)
