"""Multi-node: replicas spread over nodes, and a node lost mid-job costs nothing.

The cluster (ray.cluster_utils.Cluster: a head and three worker nodes with fake GPUs) lives in a
subprocess, tests/pipeline/generate/multinode_job.py, because it needs a ray.init of its own and the test
process's Ray belongs to the session's `ray_cluster`. The subprocess gets the S3 credentials in its
environment, so every node does, as on a real cluster; the job writes to s3://.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.generate import load_job
from sim_model import storage
from tests.fixtures.ray_cluster import REPO_ROOT
from tests.fixtures.s3 import S3Bucket
from tests.pipeline.generate.rerun import rerolled_checksums
from tests.workers.jobs import job_dict, write_job
from workers.parts import committed_records

EPISODES = 8


def test_replicas_spread_over_nodes_and_a_lost_node_loses_nothing(
        s3_env: S3Bucket, tmp_path: Path, tiny_checkpoint: Path, tiny_pusht_store, monkeypatch) -> None:
    monkeypatch.setenv("IWS_CACHE_DIR", str(tmp_path / "cache"))
    out = s3_env.url("multinode")
    path = write_job(tmp_path / "job.yaml", job_dict(
        tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=EPISODES, horizon=5,
        replicas=2, resources={"num_cpus": 0.25, "num_gpus": 1}, device="cpu",
        action_sources={"walk": {"kind": "scripted"}}))
    spec = load_job(path)
    (tmp_path / "job.json").write_text(spec.model_dump_json())
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "-m", "tests.pipeline.generate.multinode_job", str(tmp_path / "job.json")],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])

    removed = result["removed"]
    assert removed.get("node") in result["workers"], f"no node was removed: {result}"
    assert removed["before_end"] and removed["committed_before"] < EPISODES, "removed after the job"
    records = {r["episode_id"]: r for r in result["records"]}
    assert sorted(r["index"] for r in records.values()) == list(range(EPISODES))
    nodes = {r["node_id"] for r in records.values()}
    assert len(nodes) >= 2 and nodes <= set(result["workers"]), nodes  # spread; never the GPU-less head
    assert any(n != removed["node"] for n in nodes), "nothing was made after the node was lost"

    markers = committed_records(out)  # the truth on storage, not what the driver was told
    assert {k: r.checksum for k, r in markers.items()} == {k: r["checksum"] for k, r in records.items()}
    assert result["committed"] == EPISODES
    assert storage.list_names(f"{out}/episodes") == []  # every upload released into the datasets
    assert rerolled_checksums(spec, tmp_path / "again") == {k: r.checksum for k, r in markers.items()}
    print(f"\ncluster up {result['cluster_up_s']:.1f}s, job {result['job_s']:.1f}s, "
          f"nodes {sorted(n[:8] for n in nodes)}, removed {removed['node'][:8]} after "
          f"{removed['committed_before']} commits")
