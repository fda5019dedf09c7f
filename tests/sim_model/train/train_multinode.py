"""Train a stage on a multi-node Ray cluster on this machine, lose a node mid-run, then resume a
run whose local files are gone from its s3:// checkpoints.

    python -m tests.sim_model.train.train_multinode STORE OUT STORAGE CONFIG   # prints one JSON line last

A head with no CPUs (no training worker lands there) and three worker nodes of 1 CPU each, from
ray.cluster_utils.Cluster; `--workers 2` at one CPU a worker puts the two workers on two nodes,
the third is room for a replacement. Once the first checkpoint is published and training has gone
on past it, a node running a worker is removed (its raylet and every process on it killed); Ray
Train must restart the group and finish. Then the stage's local directory is deleted and a longer
run must continue from the checkpoint in STORAGE (s3://), not from scratch.

test_train_distributed.py runs this in a subprocess: a Cluster needs a ray.init of its own.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

WORKER_NODES = 3
TIMEOUT_S = 180.0


def _runs_a_train_worker(node: Any) -> bool:
    raylet = node.all_processes["raylet"][0].process.pid
    for process in psutil.Process(raylet).children(recursive=True):
        try:
            if process.cmdline()[:1] and process.cmdline()[0].startswith("ray::RayTrainWorker"):
                return True
        except psutil.Error:
            continue
    return False


def _lose_a_node(cluster: Any, nodes: list[Any], stage_dir: Path, result: dict[str, Any]) -> None:
    """After the first checkpoint and two more logged steps, remove a node with a train worker."""
    metrics = stage_dir / "metrics.jsonl"
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        state = stage_dir / "state" / "trainer.json"
        logged = [json.loads(line)["step"] for line in metrics.read_text().splitlines()] if metrics.is_file() else []
        saved = json.loads(state.read_text())["step"] if state.is_file() else 0
        if saved > 0 and max(logged, default=0) >= saved + 2:
            busy = [n for n in nodes if _runs_a_train_worker(n)]
            result.update(busy_nodes=len(busy), step=max(logged))
            cluster.remove_node(busy[-1], allow_graceful=False)
            return
        time.sleep(0.05)


def main(store: str, out: str, storage: str, config: str) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from pipeline.train.cluster import train_on_cluster

    stage_dir = Path(out) / "autoencoder"
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        nodes = [cluster.add_node(num_cpus=1) for _ in range(WORKER_NODES)]
        ray.init(address=cluster.address, logging_level="WARNING")
        cluster.wait_for_nodes()
        result: dict[str, Any] = {"cluster_up_s": time.monotonic() - started}
        removed: dict[str, Any] = {}
        killer = threading.Thread(target=_lose_a_node, args=(cluster, nodes, stage_dir, removed), daemon=True)
        killer.start()
        began = time.monotonic()
        train_on_cluster("autoencoder", store, out, workers=2, storage=storage, config_file=config,
                         max_failures=2, progress=False)
        result["first_s"] = time.monotonic() - began
        killer.join(timeout=1)
        result["removed"] = removed
        result["first_step"] = json.loads((stage_dir / "state" / "trainer.json").read_text())["step"]
        shutil.rmtree(stage_dir)  # the local copy is gone: only the s3:// checkpoints remain
        began = time.monotonic()
        path = train_on_cluster("autoencoder", store, out, workers=2, storage=storage,
                                steps=result["first_step"] + 3, progress=False)
        result["second_s"] = time.monotonic() - began
        result["path"] = str(path)
        result["steps_logged"] = [json.loads(line)["step"]
                                  for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]
        return result
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
