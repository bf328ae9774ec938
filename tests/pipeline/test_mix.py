"""``tokpipe.pipeline.mix``: three real ``tokpipe tokenize`` outputs (English, Japanese and
Chinese text of the shared corpora, cl100k) mixed, and the output checked against the rules
docs/mix.md states, computed here independently: the largest-remainder targets in exact
fractions, the seeded orders with splitmix64 in plain Python integers, and every output
document matched back to its source document by its ``{source}/{epoch}/{id}`` id.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.conftest import CORPORA, VOCAB
from tests.pipeline.tokenize.helpers import M64, digest, read_megatron, run_options, splitmix64
from tokpipe.errors import ConfigError, OutputConflictError
from tokpipe.pipeline.mix import MixOptions, mix, parse_source
from tokpipe.pipeline.tokenize import TokenizeOptions, tokenize_corpus, verify_tokenized

CL100K = str(VOCAB / "cl100k_base.tiktoken.gz")


def _chunks(lines: list[str], sizes: int) -> list[str]:
    """Documents of 1 to ``sizes`` lines, of real text."""
    docs, at = [], 0
    while at < len(lines):
        size = 1 + (len(docs) * 7) % sizes
        text = "".join(lines[at:at + size]).strip()
        if text:
            docs.append(text)
        at += size
    return docs


def _write_jsonl(path: Path, prefix: str, docs: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"id": f"{prefix}{i}", "text": text}, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three tokenize outputs (train and val, Parquet and Megatron, several shards each)."""
    root = tmp_path_factory.mktemp("mix-sources")
    text = CORPORA / "text"
    # Short English documents: more than one write batch (4,096), so several shards.
    en = (text / "tinyshakespeare.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:12000]
    ja = (text / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:400]
    zh = [line for p in sorted((text / "zh_notes").iterdir()) for line in p.read_text(encoding="utf-8")
          .splitlines(keepends=True)]
    made = {}
    for n, (name, lines, size) in enumerate((("en", en, 2), ("ja", ja, 6), ("zh", zh, 10))):
        _write_jsonl(root / f"{name}.jsonl", name, _chunks(lines, size))
        out = root / name
        tokenize_corpus([str(root / f"{name}.jsonl")], out,
                        TokenizeOptions(tokenizer=CL100K, formats=("parquet", "megatron"), seed=n, val_fraction=0.1),
                        run_options(shard_size=64 << 10))
        made[name] = out
    assert len(json.loads((made["en"] / "manifest.json").read_text(encoding="utf-8"))["splits"]["train"]["parquet"]) > 1
    return made


def _source_docs(folder: Path, split: str) -> tuple[list[str], dict[str, list[int]]]:
    """A source split's documents, read from its own files: ids in documents-file order, and
    each id's tokens."""
    order = pq.read_table(folder / "documents" / f"{split}.parquet").column("id").to_pylist()
    table = pq.read_table(sorted((folder / split).glob("part-*.parquet")))
    return order, dict(zip(table.column("id").to_pylist(), table.column("input_ids").to_pylist()))


def _targets(total: int, weights: list[Fraction]) -> list[int]:
    """The documented rule, written out: floors, then the largest remainders (first listed on ties)."""
    exact = [total * w / sum(weights) for w in weights]
    floors = [e.numerator // e.denominator for e in exact]
    ranked = sorted(range(len(weights)), key=lambda i: (floors[i] - exact[i], i))
    for i in ranked[:total - sum(floors)]:
        floors[i] += 1
    return floors


def _key(position: int, seed: int) -> int:
    return splitmix64((position + splitmix64(seed)) & M64)


def _output(out: Path, split: str) -> list[tuple[str, list[int]]]:
    table = pq.read_table(sorted((out / split).glob("part-*.parquet")))
    return list(zip(table.column("id").to_pylist(), table.column("input_ids").to_pylist()))


def _check_mix(out: Path, folders: list[Path], weights: list[Fraction], total: int, seed: int,
               split: str = "train") -> dict[int, Counter[int]]:
    """Every property docs/mix.md states, for one split; returns each source's documents per epoch."""
    docs = [_source_docs(f, split) for f in folders]
    rows = _output(out, split)
    targets = _targets(total, weights)
    realised = [0] * len(folders)
    per_epoch: dict[int, Counter[int]] = defaultdict(Counter)
    taken: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    cut = Counter()
    for doc_id, ids in rows:
        source, epoch, original = doc_id.split("/", 2)
        i, e = int(source), int(epoch)
        full = docs[i][1][original]
        assert ids == full[:len(ids)] and ids, doc_id  # the source document's tokens (a prefix when cut)
        cut[i] += len(ids) < len(full)
        realised[i] += len(ids)
        per_epoch[i][e] += 1
        assert original not in taken[i, e], f"{doc_id} twice in one epoch"
        taken[i, e][original] = len(ids)
    assert realised == targets and sum(realised) == total
    bases, base = {}, 0
    for i, (order, _) in enumerate(docs):
        source_tokens = sum(len(t) for t in docs[i][1].values())
        full_epochs, rest = divmod(targets[i], source_tokens)
        assert cut[i] <= 1
        for e in range(full_epochs):  # a whole epoch: every document once, whole
            assert taken[i, e] == {d: len(docs[i][1][d]) for d in order}
        if rest:
            # The partial epoch: whole documents in its seeded order, the last cut to the tokens left.
            epoch_seed = _key((i << 32) | full_epochs, seed)
            ranked = sorted(range(len(order)), key=lambda r: _key(r, epoch_seed))
            expected, left = {}, rest
            for r in ranked:
                n = len(docs[i][1][order[r]])
                expected[order[r]] = min(n, left)
                left -= expected[order[r]]
                if not left:
                    break
            assert taken[i, full_epochs] == expected
        epochs = full_epochs + (1 if rest else 0)
        for e in range(epochs):
            bases[i, e] = base
            base += len(order)
    # The output order: occurrences sorted by splitmix64(base(i, e) + r + splitmix64(seed)).
    positions = {(i, e, d): bases[i, e] + r for i, (order, _) in enumerate(docs) for e in range(10)
                 if (i, e) in bases for r, d in enumerate(order)}
    keys = []
    for doc_id, _ in rows:
        source, epoch, original = doc_id.split("/", 2)
        keys.append(_key(positions[int(source), int(epoch), original], seed))
    assert keys == sorted(keys)
    return per_epoch


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def test_mix_gives_each_source_its_exact_share(sources: dict[str, Path], tmp_path: Path) -> None:
    folders = [sources["en"], sources["ja"], sources["zh"]]
    weights = [Fraction(5), Fraction(3), Fraction(2)]
    out = tmp_path / "mix"
    # A budget that takes zh (the smallest) past 2 epochs: whole epochs, then a partial one.
    zh_tokens = sum(len(t) for t in _source_docs(sources["zh"], "train")[1].values())
    total = int(zh_tokens * 2.5 * 10 / 2) + 7
    mix(list(zip(map(str, folders), ["5", "3", "2"])), out, MixOptions(tokens=total, max_epochs=5, seed=11))
    per_epoch = _check_mix(out, folders, weights, total, seed=11)
    assert sorted(per_epoch[2]) == [0, 1, 2]  # zh: two whole epochs and a partial third
    manifest = _manifest(out)
    recorded = manifest["mix"]["sources"]
    targets = _targets(total, weights)
    for i, entry in enumerate(recorded):
        train = entry["splits"]["train"]
        assert (train["tokens_asked"], train["tokens"]) == (targets[i], targets[i])
        assert train["documents"] == sum(per_epoch[i].values())
        assert train["epochs"] == pytest.approx(targets[i] / train["source_tokens"], abs=1e-6)
    assert recorded[2]["splits"]["train"]["epochs"] > 2
    assert manifest["splits"]["train"]["tokens"] == total == manifest["totals"]["tokens"] - \
        manifest["splits"]["val"]["tokens"]
    assert verify_tokenized(out, manifest) == []
    # val: every source has one, mixed with the same weights and no repetition.
    val_tokens = [sum(len(t) for t in _source_docs(f, "val")[1].values()) for f in folders]
    val_total = min(t * sum(weights) // w for t, w in zip(val_tokens, weights))
    val_epochs = _check_mix(out, folders, weights, int(val_total), seed=11, split="val")
    assert all(set(c) == {0} for c in val_epochs.values())


def test_default_budget_is_the_most_one_epoch_allows(sources: dict[str, Path], tmp_path: Path) -> None:
    folders = [sources["en"], sources["zh"]]
    weights = [Fraction(1), Fraction(1)]
    tokens = [sum(len(t) for t in _source_docs(f, "train")[1].values()) for f in folders]
    out = tmp_path / "mix"
    mix({str(folders[0]): 1, str(folders[1]): 1.0}, out)
    total = min(t * 2 for t in tokens)  # the smaller source taken whole, the other as much
    _check_mix(out, folders, weights, total, seed=0)
    epochs = [s["splits"]["train"]["epochs"] for s in _manifest(out)["mix"]["sources"]]
    assert max(epochs) == 1.0 and min(epochs) < 1.0


def test_megatron_pair_and_data_path_agree_with_the_parquet(sources: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "mix"
    mix([(str(sources["en"]), "0.7"), (str(sources["ja"]), "0.3")], out, MixOptions(seed=3))
    for split in ("train", "val"):
        rows = _output(out, split)
        _, docs = read_megatron(out / "megatron" / split)
        assert [d.tolist() for d in docs] == [ids for _, ids in rows]
        documents = pq.read_table(out / "documents" / f"{split}.parquet")
        assert documents.column("id").to_pylist() == [i for i, _ in rows]
        assert documents.column("length").to_pylist() == [len(ids) for _, ids in rows]
    words = (out / "megatron" / "train.data_path.txt").read_text(encoding="utf-8").split()
    assert words == ["0.7", str((sources["en"] / "megatron" / "train").resolve()),
                     "0.3", str((sources["ja"] / "megatron" / "train").resolve())]
    assert all(Path(p + ".idx").is_file() for p in words[1::2])
    assert (out / "megatron" / "val.data_path.txt").read_text(encoding="utf-8").split() == \
        ["0.7", str((sources["en"] / "megatron" / "val").resolve()),
         "0.3", str((sources["ja"] / "megatron" / "val").resolve())]
    # Every reader of a tokenize output opens it.
    assert ds.dataset(out / "train").to_table().num_rows == len(_output(out, "train"))
    import datasets

    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
    assert loaded["train"]["id"] == [i for i, _ in _output(out, "train")]
    assert loaded["validation"].num_rows == len(_output(out, "val"))


def test_same_seed_same_bytes_and_another_seed_another_order(sources: dict[str, Path], tmp_path: Path) -> None:
    pairs = [(str(sources["en"]), 2), (str(sources["ja"]), 1), (str(sources["zh"]), 1)]
    options = MixOptions(tokens=150_000, max_epochs=4, seed=7, shard_size=32 << 10)
    mix(pairs, tmp_path / "a", options)
    # Spilled to many key ranges (a tiny buffer): the same bytes.
    mix(pairs, tmp_path / "b", MixOptions(tokens=150_000, max_epochs=4, seed=7, shard_size=32 << 10,
                                          shuffle_buffer=64 << 10))
    assert len(list((tmp_path / "a" / "train").glob("part-*.parquet"))) > 1
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    mix(pairs, tmp_path / "c", MixOptions(tokens=150_000, max_epochs=4, seed=8, shard_size=32 << 10))
    a, c = _output(tmp_path / "a", "train"), _output(tmp_path / "c", "train")
    assert [i for i, _ in a] != [i for i, _ in c]
    _check_mix(tmp_path / "c", [sources["en"], sources["ja"], sources["zh"]], [Fraction(2), Fraction(1), Fraction(1)],
               150_000, seed=8)


def test_rerun_and_killed_run(sources: dict[str, Path], tmp_path: Path) -> None:
    pairs = [(str(sources["en"]), 1), (str(sources["zh"]), 1)]
    out = tmp_path / "mix"
    expected = tmp_path / "whole"
    small = 16 << 10  # small shards: some are published before the kill

    class Killed(Exception):
        pass

    def kill_at(share: float):  # type: ignore[no-untyped-def]
        def kill(update) -> None:  # type: ignore[no-untyped-def]
            if update.done > share * update.total:
                raise Killed
        return kill

    # Killed while choosing documents, then while writing (shards already published).
    for share in (0.01, 0.9):
        with pytest.raises(Killed):
            mix(pairs, out, MixOptions(seed=5, shard_size=small), progress=kill_at(share))
        assert not (out / "manifest.json").exists() and (out / ".tokpipe" / "run.json").exists()
    assert list((out / "train").glob("part-*.parquet"))  # what the killed run had published
    assert mix(pairs, out, MixOptions(seed=5, shard_size=small)).written
    mix(pairs, expected, MixOptions(seed=5, shard_size=small))
    assert digest(out) == digest(expected)
    assert not (out / ".tokpipe").exists()
    assert not mix(pairs, out, MixOptions(seed=5, shard_size=small)).written  # finished: nothing redone
    with pytest.raises(OutputConflictError):
        mix(pairs, out, MixOptions(seed=6))
    mix(pairs, out, MixOptions(seed=6, overwrite=True))
    assert _manifest(out)["mix"]["seed"] == 6
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's file", encoding="utf-8")
    with pytest.raises(OutputConflictError, match="not empty and holds no tokpipe run"):
        mix(pairs, mine, MixOptions(seed=5))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


@pytest.fixture(scope="module")
def gpt2_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mix-gpt2")
    _write_jsonl(root / "en.jsonl", "g", _chunks((CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")
                                                  .splitlines(keepends=True)[:200], 10))
    tokenize_corpus([str(root / "en.jsonl")], root / "out", TokenizeOptions(tokenizer=str(VOCAB / "gpt2_encoder.json")),
                    run_options())
    return root / "out"


def test_bad_sources_fail_before_any_work(sources: dict[str, Path], gpt2_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "never"
    en, zh = str(sources["en"]), str(sources["zh"])
    cases = [
        ([(str(tmp_path / "missing"), 1), (zh, 1)], "missing: no such folder"),
        ([(str(sources["en"] / "train"), 1), (zh, 1)], "not a tokpipe tokenize output"),
        ([(en, 1), (str(gpt2_source), 1)], "mixed sources must share one tokenizer"),
        ([(en, 0), (zh, 1)], "weight 0 must be positive"),
        ([(en, -2), (zh, 1)], "weight -2 must be positive"),
        ([(en, "lots"), (zh, 1)], "weight 'lots' is not a number"),
        ([(en, "nan"), (zh, 1)], "weight 'nan' is not a number"),
        ([(en, 1), (en, 2)], "listed twice"),
    ]
    for pairs, message in cases:
        with pytest.raises(ConfigError, match=message) as raised:
            mix(pairs, out)
        assert "\n" not in str(raised.value)
    zh_tokens = _manifest(sources["zh"])["splits"]["train"]["tokens"]
    with pytest.raises(ConfigError, match=rf"{sources['zh']}: .* tokens asked of its {zh_tokens:,} train tokens "
                                          r"need 2\.\d+ epochs, more than --max-epochs 2"):
        mix([(en, 1), (zh, 1)], out, MixOptions(tokens=5 * zh_tokens, max_epochs=2))
    assert not out.exists()
    with pytest.raises(ConfigError, match="expected SOURCE=WEIGHT"):
        parse_source(en)
    assert parse_source("s3://b/k=v/tok=0.25") == ("s3://b/k=v/tok", Fraction(1, 4))


@pytest.fixture(scope="module")
def other_writes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """cl100k outputs written otherwise: documents cut at 65 tokens, and packed rows."""
    root = tmp_path_factory.mktemp("mix-other")
    _write_jsonl(root / "en.jsonl", "t", _chunks((CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")
                                                 .splitlines(keepends=True)[:300], 10))
    made = {}
    for name, options in (("truncated", TokenizeOptions(tokenizer=CL100K, seq_len=64, truncate=True)),
                          ("packed", TokenizeOptions(tokenizer=CL100K, seq_len=64, pack=True))):
        tokenize_corpus([str(root / "en.jsonl")], root / name, options, run_options())
        made[name] = root / name
    return made


def test_sources_written_otherwise_are_refused(sources: dict[str, Path], other_writes: dict[str, Path],
                                               tmp_path: Path) -> None:
    en = str(sources["en"])
    with pytest.raises(ConfigError, match=rf"{other_writes['truncated']}: documents truncated at 64, unlike .*"
                                          r"\(not truncated\)"):
        mix([(en, 1), (str(other_writes["truncated"]), 1)], tmp_path / "out")
    with pytest.raises(ConfigError, match=rf"{other_writes['packed']}: written with --pack"):
        mix([(en, 1), (str(other_writes["packed"]), 1)], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_clean_output_is_not_a_source(sources: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "clean"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format": "tokpipe-dataset"}), encoding="utf-8")
    with pytest.raises(ConfigError, match="manifest format 'tokpipe-dataset'.*tokenize it first"):
        mix([(str(folder), 1), (str(sources["en"]), 1)], tmp_path / "out")


def test_bad_sizes_fail_before_the_output_is_touched(sources: dict[str, Path], tmp_path: Path) -> None:
    # A zero shuffle buffer used to divide by zero once the mix had begun, leaving a run folder.
    out = tmp_path / "never"
    for option in ("shard_size", "shuffle_buffer"):
        with pytest.raises(ConfigError, match=f"--{option.replace('_', '-')} must be at least 1 byte, not 0"):
            mix([(str(sources["en"]), 1), (str(sources["zh"]), 1)], out, MixOptions(**{option: 0}))
    assert not out.exists()


def test_an_output_that_is_or_holds_a_source_is_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    # --overwrite clears the output folder: a source there would be deleted before it is read.
    import shutil

    parent = tmp_path / "parent"
    copy = parent / "zh"
    shutil.copytree(sources["zh"], copy)
    for out in (copy, parent, copy / ".." / "zh"):
        with pytest.raises(ConfigError, match="the output folder is, or holds, the source") as raised:
            mix([(str(sources["en"]), 1), (str(copy), 1)], out, MixOptions(overwrite=True))
        assert "\n" not in str(raised.value)
        assert (copy / "manifest.json").is_file() and list((copy / "train").glob("part-*.parquet"))
    # A folder beside the sources, or inside one, is fine.
    assert mix([(str(sources["en"]), 1), (str(copy), 1)], copy / "mixed", MixOptions(overwrite=True)).written


def test_sources_and_output_in_a_bucket_give_the_local_bytes(sources: dict[str, Path], bucket: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))  # the local staging of the remote output
    s3 = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    for name in ("en", "zh"):
        s3.put(str(sources[name]), f"{bucket}/{name}", recursive=True)
    options = MixOptions(tokens=90_000, max_epochs=2, seed=2)
    mix([(str(sources["en"]), 1), (str(sources["zh"]), 1)], tmp_path / "local", options)
    mix([(f"s3://{bucket}/en", 1), (f"s3://{bucket}/zh", 1)], f"s3://{bucket}/mixed", options)
    s3.get(f"{bucket}/mixed", str(tmp_path / "remote"), recursive=True)
    local = {k: v for k, v in digest(tmp_path / "local").items() if not k.endswith("data_path.txt")}
    remote = {k: v for k, v in digest(tmp_path / "remote").items() if not k.endswith("data_path.txt")}
    assert local == remote and len(local) > 8
    assert not (tmp_path / "remote" / ".tokpipe").exists() and not list((tmp_path / "cache").rglob("*.json"))
    assert (tmp_path / "remote" / "megatron" / "train.data_path.txt").read_text(encoding="utf-8").split() == \
        ["0.5", f"s3://{bucket}/en/megatron/train", "0.5", f"s3://{bucket}/zh/megatron/train"]
    assert verify_tokenized(f"s3://{bucket}/mixed", _manifest(tmp_path / "remote")) == []
