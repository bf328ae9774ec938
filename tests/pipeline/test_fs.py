"""``pipeline.fs``, the filesystem seam: a file written through it appears whole or not at
all (never a prefix, never a leftover temporary file, also when its writer raises), a file
being written hides from the globs for finished files, and publish, listing and the removals
do what their docstrings say.

Expected contents are literals written here from the documented contract.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokpipe.pipeline import fs


def names(folder: Path) -> list[str]:
    """Every entry of ``folder``, hidden ones too, read without the module under test."""
    return sorted(p.name for p in folder.iterdir())


def test_an_atomic_write_appears_whole_when_its_block_ends(tmp_path: Path) -> None:
    path = tmp_path / "part-00000-00001.parquet"
    with fs.atomic(path) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".") and tmp != path
        with open(tmp, "wb") as f:
            f.write(b"first half ")
            f.flush()
            # A reader looking now sees nothing at the final name, and a glob for finished
            # files does not pick up the one being written.
            assert not path.exists()
            assert fs.listing(tmp_path, "part-*.parquet") == []
            f.write(b"second half")
    assert path.read_bytes() == b"first half second half"
    assert names(tmp_path) == ["part-00000-00001.parquet"]


def test_a_writer_that_raises_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "000003.json"
    path.write_bytes(b"the old marker")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with fs.atomic(path) as tmp:
            tmp.write_bytes(b"half of a new mar")
            raise RuntimeError("disk on fire")
    assert path.read_bytes() == b"the old marker"
    assert names(tmp_path) == ["000003.json"]
    # A new file whose writer raises is not there at all.
    with pytest.raises(RuntimeError):
        with fs.atomic(tmp_path / "new.json") as tmp:
            tmp.write_bytes(b"{")
            raise RuntimeError("cut short")
    assert names(tmp_path) == ["000003.json"]


def test_write_text_cut_short_by_an_encoding_error_leaves_the_whole_old_text(tmp_path: Path) -> None:
    """A lone surrogate cannot be encoded to UTF-8: the write fails after the temporary file
    was opened."""
    path = tmp_path / "run.json"
    fs.write_text(path, "whole")
    with pytest.raises(UnicodeEncodeError):
        fs.write_text(path, "x" * 100_000 + "\udcff")
    assert path.read_text(encoding="utf-8") == "whole"
    assert names(tmp_path) == ["run.json"]


def test_json_is_written_indented_by_one_with_sorted_keys_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    fs.write_json(path, {"b": 1, "a": [2, "x"]})
    assert path.read_text(encoding="utf-8") == '{\n "a": [\n  2,\n  "x"\n ],\n "b": 1\n}'
    assert fs.read_json(path) == {"a": [2, "x"], "b": 1}
    fs.write_json(path, [])  # replaces the file
    assert fs.read_json(path) == [] and names(tmp_path) == ["tasks.json"]


def test_publish_renames_the_temporary_file_into_place(tmp_path: Path) -> None:
    path = tmp_path / "megatron.idx"
    path.write_bytes(b"an older index")
    tmp = fs.temp_name(path)
    assert tmp == tmp_path / ".megatron.idx.tmp"
    tmp.write_bytes(b"MMIDIDX")
    fs.publish(tmp, path)
    assert path.read_bytes() == b"MMIDIDX"
    assert names(tmp_path) == ["megatron.idx"]


def test_listing_matches_the_pattern_and_a_missing_folder_lists_nothing(tmp_path: Path) -> None:
    for name in ("part-00000-00000.parquet", "part-00001-00000.parquet", "errors.jsonl", "manifest.json"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "rejected").mkdir()
    assert sorted(p.name for p in fs.listing(tmp_path, "part-*.parquet")) == ["part-00000-00000.parquet",
                                                                             "part-00001-00000.parquet"]
    assert all(p.parent == tmp_path for p in fs.listing(tmp_path))
    assert sorted(p.name for p in fs.listing(tmp_path)) == ["errors.jsonl", "manifest.json",
                                                             "part-00000-00000.parquet", "part-00001-00000.parquet",
                                                             "rejected"]
    assert fs.listing(tmp_path / "nowhere", "*.json") == []


def test_size_and_read_ends(tmp_path: Path) -> None:
    path = tmp_path / "part-000001-0.arrow"
    path.write_bytes(b"ARROW1" + bytes(20) + b"ARROW1")
    assert fs.size(path) == 32
    assert fs.read_ends(path, 6) == (b"ARROW1", b"ARROW1")
    path.write_bytes(b"ARROW1" + bytes(20))
    assert fs.read_ends(path, 6) == (b"ARROW1", bytes(6))
    with pytest.raises(OSError):
        fs.size(tmp_path / "gone.arrow")


def test_remove_takes_a_file_or_a_link_and_ignores_what_is_not_there(tmp_path: Path) -> None:
    target = tmp_path / "target.bin"
    target.write_bytes(b"ids")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    fs.remove(link)
    assert names(tmp_path) == ["target.bin"] and target.read_bytes() == b"ids"
    fs.remove(target)
    assert names(tmp_path) == []
    fs.remove(target)  # not there: nothing happens


def test_remove_tree_and_remove_empty_dir(tmp_path: Path) -> None:
    tree = tmp_path / "seg0"
    (tree / "kept").mkdir(parents=True)
    (tree / "kept" / "part-000000-0.arrow").write_bytes(b"x")
    fs.remove_tree(tree)
    assert names(tmp_path) == []
    fs.remove_tree(tree)  # not there: nothing happens
    fs.remove_tree(tree, ignore_errors=False)  # as its docstring says, also when errors raise

    full, empty = tmp_path / "full", tmp_path / "empty"
    full.mkdir()
    (full / "lock.json").write_bytes(b"{}")
    empty.mkdir()
    fs.remove_empty_dir(full)
    fs.remove_empty_dir(empty)
    fs.remove_empty_dir(tmp_path / "never")  # not there: nothing happens
    assert names(tmp_path) == ["full"] and names(full) == ["lock.json"]


def test_make_dirs_exists_and_is_dir(tmp_path: Path) -> None:
    deep = tmp_path / ".tokpipe" / "seg1" / "kept"
    assert not fs.exists(deep) and not fs.is_dir(deep)
    fs.make_dirs(deep)
    fs.make_dirs(deep)  # already there: nothing happens
    assert fs.exists(deep) and fs.is_dir(deep)
    (deep / "f").write_bytes(b"")
    assert fs.exists(deep / "f") and not fs.is_dir(deep / "f")
