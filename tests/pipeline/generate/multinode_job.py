"""Run a generation job on a multi-node Ray cluster on this machine and take a node away mid-job.

    python -m tests.pipeline.generate.multinode_job JOB.json    # prints one JSON line last

A head (1 CPU, no GPU) and three worker nodes (1 CPU, 1 fake GPU each) from
ray.cluster_utils.Cluster. With `replicas: 2` and `num_gpus: 1` per replica the two replicas must
sit on two different worker nodes; the third is room for a replacement. Once the first episode is
committed, the worker node that made it is removed (its raylet and every process on it killed),
and the job must still end with every episode committed exactly once.

test_multinode.py runs this in a subprocess: a Cluster needs a ray.init of its own, and a process
holds one Ray connection, which in the test process belongs to the session's `ray_cluster`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

from schemas import JobSpec
from sim_model.data.shards import read_index
from workers.parts import committed_records

WORKER_NODES = 3
TIMEOUT_S = 240.0
log = logging.getLogger("multinode_job")


def _remove_first_committer(cluster: Any, workers: list[Any], out: str, result: dict[str, Any]) -> None:
    """Wait for the first commit, then remove the worker node its marker names."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        records = committed_records(out)
        if records:
            first = min(records.values(), key=lambda r: r.index)
            node = next(n for n in workers if n.node_id == first.node_id)
            result.update(node=node.node_id, committed_before=len(records))
            cluster.remove_node(node, allow_graceful=False)  # fault: the node is lost mid-job
            result["removed_at_s"] = time.monotonic()
            log.warning("removed node %s after %d commits", node.node_id[:8], len(records))
            return
        time.sleep(0.05)


def main(job_file: str) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from pipeline.generate import run_job

    spec = JobSpec.model_validate_json(Path(job_file).read_text())
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        workers = [cluster.add_node(num_cpus=1, num_gpus=1) for _ in range(WORKER_NODES)]
        ray.init(address=cluster.address, logging_level="WARNING")
        cluster.wait_for_nodes()
        up_s = time.monotonic() - started
        removed: dict[str, Any] = {}
        killer = threading.Thread(target=_remove_first_committer,
                                  args=(cluster, workers, spec.output.path, removed), daemon=True)
        killer.start()
        job_started = time.monotonic()
        manifest = run_job(spec)
        finished = time.monotonic()
        killer.join(timeout=1)
        return {"cluster_up_s": up_s, "job_s": finished - job_started,
                "removed": {**removed, "before_end": removed.get("removed_at_s", finished) < finished},
                "workers": [n.node_id for n in workers], "head": cluster.head_node.node_id,
                "records": [dataclasses.asdict(r) for r in read_index(manifest.datasets["zarr"])[0]],
                "committed": manifest.episodes_committed}
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(main(sys.argv[1])), flush=True)
