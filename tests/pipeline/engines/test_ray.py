"""The Ray engine against the local one: the same pipeline (exact_dedup, gopher_quality,
minhash_dedup) over real documents from ``../shared/corpora``, with planted exact and near
duplicates, run on a local Ray (2 CPUs) and on local processes, gives the same kept documents
and texts, the same rejected documents with the same reasons, and the same clusters."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray

import tokpipe.pipeline as pipeline
from tests.cli.test_clean import run
from tests.conftest import CORPORA
from tests.pipeline.stages.test_pii import PIPELINE, corpus_of, expected_id, fake_people, outputs

CONFIG = {"stages": [{"type": "exact_dedup"}, {"type": "gopher_quality"}, {"type": "minhash_dedup"}]}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def real_documents() -> list[dict[str, str]]:
    docs = []
    for name in ("cc_en_head-0091.jsonl.gz", "cc_en_head-0174.jsonl.gz"):
        with gzip.open(CORPORA / "web" / name, "rt", encoding="utf-8") as f:
            docs += [{"id": d["id"], "text": d["text"]} for d in map(json.loads, f)]
    for name in ("botchan.txt", "tinyshakespeare.txt"):
        words = (CORPORA / "text" / name).read_text(encoding="utf-8").split()
        docs += [{"id": f"{name}:{i}", "text": " ".join(words[i:i + 400])} for i in range(0, 40_000, 2_000)]
    for path in sorted((CORPORA / "text" / "zh_notes").glob("*.txt")):
        docs.append({"id": path.name, "text": path.read_text(encoding="utf-8")})
    return docs


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Real documents, then exact copies of some and near copies of others (a run of 20 of a
    book passage's 400 words replaced: Jaccard ~0.88), spread over four JSONL files (four
    tasks). Also gives each near copy's source."""
    rng = random.Random(3)
    sources = {}
    docs = real_documents()
    english = [d for d in docs if d["id"].startswith(("botchan.txt:", "tinyshakespeare.txt:"))]
    for n, d in enumerate(rng.sample(docs, 6)):
        docs.append({"id": f"exact-copy-{n}", "text": d["text"]})
    for n, d in enumerate(rng.sample(english, 6)):
        words = d["text"].split()
        start = rng.randrange(len(words) - 20)
        words[start:start + 20] = [f"edit{k}" for k in range(20)]
        docs.append({"id": f"near-copy-{n}", "text": " ".join(words)})
        sources[f"near-copy-{n}"] = d["id"]
    rng.shuffle(docs)
    root = tmp_path_factory.mktemp("corpus")
    for part in range(4):
        lines = [json.dumps(d, ensure_ascii=False) + "\n" for d in docs[part::4]]
        (root / f"part{part}.jsonl").write_text("".join(lines), encoding="utf-8")
    return root, sources


@pytest.fixture(scope="module")
def corpus(planted: tuple[Path, dict[str, str]]) -> Path:
    return planted[0]


def outcome(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    kept = pq.read_table(sorted(out.glob("data/part-*.parquet")), columns=["id", "text", "dup_cluster"]).to_pylist()
    rejected = pq.read_table(sorted(out.glob("rejected/part-*.parquet")),
                             columns=["id", "reason", "stage", "duplicate_of"]).to_pylist()
    return sorted(kept, key=lambda r: r["id"]), sorted(rejected, key=lambda r: r["id"])


def test_ray_engine_gives_the_local_engines_output(local_ray: None, planted: tuple[Path, dict[str, str]],
                                                  tmp_path: Path) -> None:
    corpus, sources = planted
    updates = []
    local = pipeline.run([corpus], tmp_path / "local", config=CONFIG, workers=2)
    on_ray = pipeline.run([corpus], tmp_path / "ray", config=CONFIG, workers=2, engine="ray",
                          progress=updates.append)
    assert outcome(tmp_path / "ray") == outcome(tmp_path / "local")
    kept, rejected = outcome(tmp_path / "ray")
    reasons = {(r["stage"], r["reason"]) for r in rejected}
    # Every stage had work: the copies and near copies went, and so did some real pages.
    assert ("exact_dedup", "duplicate") in reasons and ("minhash_dedup", "duplicate") in reasons
    assert any(stage == "gopher_quality" for stage, _ in reasons)
    # Of each near copy and its source, whichever comes later in the corpus is dropped as a
    # duplicate of the other.
    dropped = {r["id"]: r["duplicate_of"] for r in rejected if r["stage"] == "minhash_dedup"}
    for copy, source in sources.items():
        assert dropped.get(copy) == source or dropped.get(source) == copy
    for name, stats in local.stats.items():
        ours = on_ray.stats[name].as_dict()
        theirs = stats.as_dict()
        for key in ("in", "kept", *[k for k in theirs if k.startswith("dropped_")]):
            assert ours[key] == theirs[key], (name, key)
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text(encoding="utf-8"))
    assert [s["rows"] for s in manifest["shards"]] == [
        s["rows"] for s in json.loads((tmp_path / "local" / "manifest.json").read_text(encoding="utf-8"))["shards"]]
    phases = {u.phase for u in updates}
    assert {"exact_dedup: key join (ray)", "minhash_dedup: band join (ray)", "writing shards"} <= phases


def test_signature_verification_decides_on_the_driver(local_ray: None, corpus: Path, tmp_path: Path) -> None:
    config = {"stages": [{"type": "minhash_dedup", "verify": "signature", "threshold": 0.7}]}
    pipeline.run([corpus], tmp_path / "local", config=config, workers=1)
    pipeline.run([corpus], tmp_path / "ray", config=config, workers=2, engine="ray")
    assert outcome(tmp_path / "ray") == outcome(tmp_path / "local")


@pytest.mark.slow  # a second Ray cluster from the command line: CI runs it (`-m slow`)
def test_cli_engine_ray_joins_a_running_cluster_and_without_ray_exits_2(local_ray: None, corpus: Path,
                                                                        tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG), encoding="utf-8")
    # --ray-address auto: the CLI joins the Ray this test process started.
    result = run("clean", str(corpus), "-o", str(tmp_path / "out"), "-c", str(config), "--engine", "ray",
                 "--ray-address", "auto", "-w", "2")
    assert result.returncode == 0, result.stderr
    assert "minhash_dedup" in result.stderr  # the stats table
    assert outcome(tmp_path / "out") == outcome_of_local(corpus, tmp_path / "local")
    # Without Ray installed (hidden from the import system here), a usage error with the hint.
    hidden = subprocess.run([sys.executable, "-c", "import sys; sys.modules['ray'] = None; "
                             "from tokpipe.cli import main; main()", "clean", str(corpus), "-o", str(tmp_path / "out2"),
                             "--engine", "ray"], capture_output=True, text=True, encoding="utf-8")
    assert hidden.returncode == 2
    assert "pip install 'tokpipe[ray]'" in hidden.stderr
    result = run("clean", str(corpus), "-o", str(tmp_path / "out3"), "--ray-address", "auto")
    assert result.returncode == 2 and "--engine ray" in result.stderr


def outcome_of_local(corpus: Path, out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pipeline.run([corpus], out, config=CONFIG, workers=2)
    return outcome(out)


@pytest.mark.slow  # CI runs it (`-m slow`); the output comparison above runs by default
def test_pii_scrubs_what_earlier_stages_rejected_on_ray_as_locally(local_ray: None, tmp_path: Path) -> None:
    # length_filter and exact_dedup drop documents before the pii stage: on Ray too, they
    # reach rejected/ scrubbed, ids hashed and duplicate_of naming the kept copy's new id.
    people = fake_people(8, seed=5)
    corpus = corpus_of(tmp_path / "in", people)
    on_ray = outputs(pipeline.run([corpus], tmp_path / "ray", config=PIPELINE, workers=2, engine="ray").out_dir)
    assert on_ray == outputs(pipeline.run([corpus], tmp_path / "local", config=PIPELINE, workers=1).out_dir)
    kept, rejected = on_ray
    assert {r["reason"]: (r["id"], r["duplicate_of"]) for r in rejected} == {
        "too_short": (expected_id(people[0]["alt"]), None),
        "duplicate": (expected_id(people[3]["alt"]), expected_id(people[0]["email"]))}
    assert {r["id"] for r in kept} == {expected_id(p["email"]) for p in people}


def test_per_stage_rejected_folders_on_ray_are_the_local_engines(local_ray: None, corpus: Path,
                                                                 tmp_path: Path) -> None:
    """The engines share the pack step: with rejected_by_stage, the same files, byte for byte."""
    for engine in ("local", "ray"):
        pipeline.run([corpus], tmp_path / engine, config=CONFIG, workers=2, engine=engine, rejected_by_stage=True)
    local = sorted(p.relative_to(tmp_path / "local").as_posix() for p in (tmp_path / "local").glob("rejected/*/*"))
    assert {name.split("/")[1] for name in local} == {"exact_dedup", "gopher_quality", "minhash_dedup"}
    assert local == sorted(p.relative_to(tmp_path / "ray").as_posix() for p in (tmp_path / "ray").glob("rejected/*/*"))
    for name in local:
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
