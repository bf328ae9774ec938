"""``minhash_dedup``: the two near-duplicate notes of ``zh_notes`` cluster with character
shingles, planted near-duplicates of real documents are found and unrelated documents are not
merged (against exact Jaccard similarities computed here), and the local executor gives the
same clusters for 1 and 2 workers, with ``dup_cluster`` and ``duplicate_of`` filled in."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokpipe.pipeline as pipeline
from tokpipe import _core
from tests.conftest import CORPORA
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.base import DecideContext
from tokpipe.pipeline.stages import MinhashDedup


def batch(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array([str(i) for i in range(len(texts))], pa.string()),
                            "text": pa.array(texts, pa.string())})


def keepers(stage: MinhashDedup, tasks: list[list[str]]) -> list[int]:
    batches = [batch(t) for t in tasks]
    return np.concatenate(stage.decide([stage.keys(b) for b in batches], DecideContext.of_batches(batches))).tolist()


def shingle_set(text: str, kind: str, n: int = 5) -> set[str]:
    """The documented shingles, built here: windows of the whitespace-normalised lowercase text."""
    normalised = " ".join(text.lower().split())
    units = normalised.split(" ") if kind == "word" else list(normalised)
    joiner = " " if kind == "word" else ""
    return {joiner.join(units[i:i + n]) for i in range(max(1, len(units) - n + 1))}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


def test_zh_near_duplicate_notes_end_in_one_cluster() -> None:
    files = sorted((CORPORA / "text" / "zh_notes").glob("*.txt"))
    texts = [f.read_text(encoding="utf-8") for f in files]
    assert files[0].name.startswith("000_") and files[2].name.startswith("002_")
    sets = [shingle_set(t, "char") for t in texts]
    # 002 is 000 grown to twice its length: they share about half their character 5-grams,
    # any other pair a few percent.
    assert 0.45 < jaccard(sets[0], sets[2]) < 0.6
    assert max(jaccard(sets[i], sets[j]) for i in range(5) for j in range(i) if {i, j} != {0, 2}) < 0.05
    for shingle in ("char", "auto"):  # auto picks characters: the notes are mostly Han
        assert keepers(MinhashDedup(threshold=0.3, shingle=shingle), [texts[:2], texts[2:]]) == [0, 1, 0, 3, 4]


def real_documents(words: int = 400, count: int = 60) -> list[str]:
    """Unrelated documents of ``words`` words cut from two real English books."""
    docs = []
    for name in ("botchan.txt", "tinyshakespeare.txt"):
        tokens = (CORPORA / "text" / name).read_text(encoding="utf-8").split()
        docs += [" ".join(tokens[i:i + words]) for i in range(0, len(tokens) - words, words * 7)]
    assert len(docs) >= count
    return docs[:count]


def plant(doc: str, rng: random.Random, donor: str) -> str:
    """``doc`` with about 10% of its words edited: one run replaced by a donor's words."""
    words, other = doc.split(), donor.split()
    run = len(words) // 10
    start = rng.randrange(len(words) - run)
    words[start:start + run] = other[:run]
    return " ".join(words)


@pytest.fixture(scope="module")
def planted() -> tuple[list[str], list[int]]:
    """60 real documents then 20 near-copies; for each document, the original's index."""
    rng = random.Random(5)
    docs = real_documents()
    sources = rng.sample(range(len(docs)), 20)
    copies = [plant(docs[s], rng, docs[(s + 1) % len(docs)]) for s in sources]
    return docs + copies, list(range(len(docs))) + sources


def test_planted_near_duplicates_are_found_and_unrelated_documents_are_not(planted: tuple[list[str], list[int]]) -> None:
    texts, origin = planted
    sets = [shingle_set(t, "word") for t in texts]
    originals = len(set(origin))
    # Exact Jaccard (word 5-grams): planted pairs around 0.8, unrelated pairs near 0.
    planted_j = [jaccard(sets[i], sets[origin[i]]) for i in range(originals, len(texts))]
    assert min(planted_j) > 0.7
    unrelated = [jaccard(sets[i], sets[j]) for i in range(originals) for j in range(i)]
    assert max(unrelated) < 0.1
    tasks = [texts[:30], texts[30:65], texts[65:]]
    # threshold 0.5: 25 bands of 5 rows; a pair at 0.7 shares a band with probability > 0.999.
    assert keepers(MinhashDedup(threshold=0.5), tasks) == origin
    assert keepers(MinhashDedup(threshold=0.5, verify=False), tasks) == origin
    # At 0.95 the edits are too many: nothing is merged.
    assert keepers(MinhashDedup(threshold=0.95), tasks) == list(range(len(texts)))


def test_keep_longest_and_explicit_bands() -> None:
    docs = real_documents(count=3)
    longer = docs[1] + " " + " ".join(docs[2].split()[:10])
    stage = MinhashDedup(bands=16, rows=8, keep="longest")
    assert stage.lsh_params() == (16, 8)
    assert keepers(stage, [[docs[0], docs[1]], [longer, "", "  "]]) == [0, 2, 2, 3, 4]
    assert keepers(MinhashDedup(bands=16, rows=8), [[docs[0], docs[1]], [longer, "", "  "]]) == [0, 1, 1, 3, 4]


@pytest.mark.parametrize("params", [{"threshold": 0}, {"num_perm": 1}, {"scheme": "affine64"}, {"shingle": "line"},
                                    {"keep": "last"}, {"bands": 4}, {"bands": 20, "rows": 20}, {"seed": -1}])
def test_bad_parameters_are_refused(params: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        MinhashDedup(**params)  # type: ignore[arg-type]


def test_same_clusters_for_1_and_2_workers(planted: tuple[list[str], list[int]], tmp_path: Path) -> None:
    texts, origin = planted
    ids = [f"doc{i}" for i in range(len(texts))]
    root = tmp_path / "in"
    root.mkdir()
    order = list(range(len(texts)))
    for n in range(4):  # originals and copies spread over files
        lines = [json.dumps({"id": ids[i], "text": texts[i]}) + "\n" for i in order[n::4]]
        (root / f"part{n}.jsonl").write_text("".join(lines), encoding="utf-8")
    config = {"stages": [{"type": "minhash_dedup", "threshold": 0.5}]}
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        result = pipeline.run([root], out, config=config, workers=workers)
        kept = pq.read_table(sorted(out.glob("data/part-*.parquet")), columns=["id", "dup_cluster"]).to_pylist()
        rejected = pq.read_table(sorted(out.glob("rejected/part-*.parquet")),
                                 columns=["id", "reason", "duplicate_of", "dup_cluster"]).to_pylist()
        outputs.append((sorted(kept, key=str), sorted(rejected, key=str)))
        stats = result.stats["minhash_dedup"].as_dict()
        assert stats["dropped_duplicate"] == len(rejected) == 20 and stats["clusters"] == 20
    assert outputs[0] == outputs[1]
    kept, rejected = outputs[0]
    # Files are read in order part0..part3, rows in order: the first member of each cluster
    # in that order is kept.
    position = {ids[i]: p for p, i in enumerate(i for n in range(4) for i in order[n::4])}
    clusters: dict[int, list[str]] = {}
    for i, o in enumerate(origin):
        clusters.setdefault(o, []).append(ids[i])
    expected_keeper = {m: min(members, key=position.__getitem__) for members in clusters.values() for m in members
                       if len(members) > 1}
    for row in rejected:
        assert row["reason"] == "duplicate"
        assert row["duplicate_of"] == row["dup_cluster"] == expected_keeper[row["id"]]
    for row in kept:
        assert row["dup_cluster"] == expected_keeper.get(row["id"])


def test_spilled_band_keys_give_the_same_clusters(planted: tuple[list[str], list[int]], tmp_path: Path) -> None:
    """A budget of a few hundred bytes spills every task's band keys to sorted runs; the
    clusters are those of the in-memory join, and the scratch files are gone afterwards."""
    texts, origin = planted
    stage = MinhashDedup(threshold=0.5)
    bands, rows = stage.lsh_params()
    keys = [stage.keys(batch(texts[i:i + 7])) for i in range(0, len(texts), 7)]
    results = []
    for budget in (1 << 30, 512):
        scratch = tmp_path / f"scratch{budget}"
        scratch.mkdir()
        index = _core.LshIndex(scratch, stage.num_perm, bands, rows, "signature", 0.5, "first", budget)
        for k in keys:
            index.add(np.frombuffer(k.buffers()[1], dtype=np.uint8))
        assert len(index) == len(texts)
        left = [index.join_band() for _ in range(bands)]
        assert left == list(range(bands - 1, -1, -1))
        raw, candidates, rejected, spilled, clusters = index.finish()
        assert list(scratch.iterdir()) == []
        keeper = np.frombuffer(raw, dtype=np.uint32).tolist()
        assert clusters == sum(1 for i, k in enumerate(keeper) if k == i and keeper.count(i) > 1)
        results.append((keeper, candidates, rejected, spilled > 0))
    assert results[0][0] == origin
    assert results[0][:3] == results[1][:3]
    assert (results[0][3], results[1][3]) == (False, True)


class PiecesOnly(Sequence[pa.Array]):
    """Keys handed over only in pieces of 3 documents (``PiecewiseKeys``): asking for a whole
    task's fails the test."""

    def __init__(self, keys: list[pa.Array]) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        raise AssertionError("a whole task's keys were asked for")

    def pieces(self, task: int) -> Iterator[pa.Array]:
        keys = self.keys[task]
        return (keys.slice(start, 3) for start in range(0, len(keys), 3))


def test_decide_takes_the_keys_a_piece_at_a_time(planted: tuple[list[str], list[int]]) -> None:
    texts, origin = planted
    stage = MinhashDedup(threshold=0.5)
    batches = [batch(texts[i:i + 20]) for i in range(0, len(texts), 20)]
    keys = [stage.keys(b) for b in batches]
    decided = stage.decide(PiecesOnly(keys), DecideContext.of_batches(batches))
    assert [len(d) for d in decided] == [len(k) for k in keys]
    assert np.concatenate(decided).tolist() == origin


def test_decide_reports_each_phase(planted: tuple[list[str], list[int]], tmp_path: Path) -> None:
    texts, origin = planted
    stage = MinhashDedup(threshold=0.5)
    bands, _ = stage.lsh_params()
    calls: list[tuple[str, int, int]] = []
    batches = [batch(texts[:40]), batch(texts[40:])]
    context = DecideContext.of_batches(batches, tmp_path / "scratch")
    context.progress = lambda *update: calls.append(update)
    decided = stage.decide([stage.keys(b) for b in batches], context)
    assert np.concatenate(decided).tolist() == origin
    assert [c for c in calls if c[0] == "signatures"] == [("signatures", i, 2) for i in range(3)]
    assert [c for c in calls if c[0] == "bands"] == [("bands", i, bands) for i in range(bands + 1)]
    checks = [c for c in calls if c[0] == "exact check"]
    assert checks[0][1] == 0 and checks[-1][1] == checks[-1][2] >= 20
    assert list((tmp_path / "scratch").iterdir()) == []
    with pytest.raises(InvalidArgumentError, match="column reader"):
        stage.decide([stage.keys(b) for b in batches])


def test_exact_verification_follows_exact_jaccard(tmp_path: Path) -> None:
    """Copies of real documents with a growing share of words replaced: with ``verify="exact"``
    a copy joins its original exactly when the exact Jaccard similarity of their word
    5-gram sets (computed here) reaches the threshold; signature verification only
    estimates it. Bands are made generous (20 x 5) so every pair near 0.8 is a candidate."""
    rng = random.Random(11)
    originals = real_documents(words=300, count=40)
    copies, similarity = [], []
    for i, doc in enumerate(originals):
        words = doc.split()
        replaced = 0.002 * i + 0.005  # 0.5% to 8.3% of the words
        for at in rng.sample(range(len(words)), max(1, round(replaced * len(words)))):
            words[at] = f"edit{rng.randrange(10**6)}"
        copies.append(" ".join(words))
        similarity.append(jaccard(shingle_set(doc, "word"), shingle_set(copies[-1], "word")))
    assert min(similarity) < 0.7 and max(similarity) > 0.9
    assert sum(0.75 <= s < 0.85 for s in similarity) >= 5  # pairs near the threshold
    n = len(originals)
    expected = list(range(n)) + [i if similarity[i] >= 0.8 else n + i for i in range(n)]
    stage = MinhashDedup(threshold=0.8, shingle="word", bands=20, rows=5)
    assert keepers(stage, [originals, copies]) == expected
    # Pairs just under the threshold were candidates, checked and turned down.
    assert sum(0.7 < s < 0.8 for s in similarity) >= 3
    assert stage.stats.extra["candidates_rejected"] >= 1
