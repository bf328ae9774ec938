"""The Ray engine with nothing shared but a bucket: a local Ray cluster of a head without
CPUs and two worker nodes (so every work unit runs on a worker node), inputs and output on the
local S3 server, gives the local engine's output byte for byte; the run's state lives in the
bucket (``OUT/.tokpipe``), and the driver keeps none on its disk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

import tokpipe.pipeline as pipeline
from tests.pipeline.engines.test_ray import CONFIG, planted  # noqa: F401 - the corpus fixture
from tests.pipeline.test_object_storage import local_files, remote_files, s3, upload


@pytest.fixture(scope="module")
def two_node_cluster(s3_endpoint: str) -> Iterator[Cluster]:
    """Started after the S3 server, so its nodes inherit the endpoint and the test
    credentials, as nodes of a real cluster get them from their own environment."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow  # three Ray nodes take ~2 minutes: CI runs it (`-m slow`)
def test_ray_on_two_nodes_sharing_only_a_bucket_gives_the_local_output(
        two_node_cluster: Cluster, planted: tuple[Path, Any], bucket: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, _ = planted
    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    assert sum(node["Resources"].get("CPU", 0) for node in ray.nodes() if node["Alive"]) == 2
    source = upload(corpus, bucket, "in")
    pipeline.run([corpus], tmp_path / "local", config=CONFIG, workers=2)
    # The staging kept, to see below where it went.
    result = pipeline.run([source], f"s3://{bucket}/out", config=CONFIG, workers=2, engine="ray", keep_staging=True)
    assert remote_files(f"s3://{bucket}/out") == local_files(tmp_path / "local")
    assert result.rejected_rows > 0
    manifest = json.loads(s3().cat_file(f"{bucket}/out/manifest.json"))
    local = json.loads((tmp_path / "local" / "manifest.json").read_text(encoding="utf-8"))
    assert [s["sha256"] for s in manifest["shards"]] == [s["sha256"] for s in local["shards"]]
    # The workers' state went to the bucket, where every node finds it; none is on local disk.
    assert s3().glob(f"{bucket}/out/.tokpipe/seg0/*.json")
    assert not (tmp_path / "cache" / "runs").exists()
