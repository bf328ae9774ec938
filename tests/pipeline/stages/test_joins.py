"""The group-by a global stage describes (``GlobalStage.join``, a ``GroupJoin``) gives the
stage's own decision: the grouping is done here as the ``GroupJoin`` docstring says an engine
does it (plain Python over the rows the stage makes), without Ray, and ``finish`` must then
return what ``decide`` returns, for ``exact_dedup`` and ``minhash_dedup``."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from tests.conftest import CORPORA
from tokpipe.pipeline.base import DecideContext, GlobalStage, GroupJoin
from tokpipe.pipeline.stages import ExactDedup, MinhashDedup


def documents() -> list[list[str]]:
    """Three tasks of book passages, with exact copies, near copies (10 of 300 words
    replaced), an empty document and a copy of it, across and within tasks."""
    words = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").split()
    passages = [" ".join(words[i:i + 300]) for i in range(0, 30_000, 1_000)]
    rng = random.Random(5)
    docs = list(passages)
    for p in rng.sample(passages, 6):
        docs.append(p.upper())  # an exact copy once lowercased
    for p in rng.sample(passages, 6):
        cut = p.split()
        start = rng.randrange(0, 280)
        cut[start:start + 10] = ["replaced"] * 10
        docs.append(" ".join(cut))
    docs += ["", ""]
    rng.shuffle(docs)
    return [docs[:15], docs[15:30], docs[30:]]


def grouped(join: GroupJoin, keys: list[pa.Array]) -> np.ndarray:
    """What an engine finds for ``join``, by the ``GroupJoin`` contract."""
    sizes = [len(k) for k in keys]
    starts = np.cumsum([0, *sizes])
    rows = pa.concat_tables([join.rows(k, np.arange(s, s + len(k), dtype=np.int64)) for k, s in zip(keys, starts)])
    columns = [rows.column(name).to_pylist() for name in join.by]
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for i, position in enumerate(rows.column("pos").to_pylist()):
        groups[tuple(column[i] for column in columns)].append(position)
    if join.representatives is None:
        keeper = np.arange(int(starts[-1]), dtype=np.int64)
        for members in groups.values():
            keeper[members] = min(members)
        return keeper
    pairs = set()
    for members in groups.values():
        members = sorted(members)
        for rank in range(1, len(members)):
            pairs.update((first, members[rank]) for first in members[:min(rank, join.representatives)])
    return np.array(sorted(pairs), dtype="<u4").reshape(-1, 2)


@pytest.mark.parametrize("stage", [ExactDedup(), MinhashDedup(verify="exact"), MinhashDedup(verify="none"),
                                   MinhashDedup(shingle="word", keep="longest", num_perm=64)],
                         ids=["exact_dedup", "minhash_exact", "minhash_none", "minhash_longest"])
def test_the_join_a_stage_describes_gives_its_decision(stage: GlobalStage) -> None:
    tasks = documents()
    batches = [pa.record_batch({"id": pa.array([f"{t}-{i}" for i in range(len(docs))]), "text": pa.array(docs)})
               for t, docs in enumerate(tasks)]
    keys = [stage.keys(b) for b in batches]
    expected = stage.decide(keys, DecideContext.of_batches(batches))
    join = stage.join()
    assert join is not None
    found = join.finish(grouped(join, keys), keys, [len(k) for k in keys], DecideContext.of_batches(batches))
    assert [np.asarray(f).tolist() for f in found] == [np.asarray(e).tolist() for e in expected]
    # The corpus has duplicates for the join to find.
    assert sum(int((np.asarray(e) != np.arange(s, s + len(e))).sum())
               for e, s in zip(expected, np.cumsum([0, *map(len, expected)]))) >= 6


def test_signature_verification_describes_no_join() -> None:
    """Signature checks depend on the order within a bucket, which a distributed grouping
    does not keep: such a stage decides on the driver."""
    assert MinhashDedup(verify="signature").join() is None
