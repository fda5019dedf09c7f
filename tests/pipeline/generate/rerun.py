"""What a fresh replica makes for every group of a job: the reference a distributed run must
match byte for byte, whatever faults it went through."""

from __future__ import annotations

from pathlib import Path

from pipeline.generate.expand import job_groups
from pipeline.generate.preflight import preflight
from schemas import JobSpec
from workers.replica import WorldModelReplica


def rerolled_checksums(spec: JobSpec, scratch: Path) -> dict[str, str]:
    """Episode id -> checksum, rolled in this process into `scratch` with one torch thread (as in
    a Ray actor, whose OMP_NUM_THREADS follows its num_cpus)."""
    import torch

    plan = preflight(spec.model_copy(update={"output": spec.output.model_copy(update={"path": str(scratch)})}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        replica = WorldModelReplica(plan.spec.model_dump_json(), plan.spec.output.path)
        return {r.episode_id: r.checksum for g in job_groups(plan.spec, plan.episodes)
                for r in replica.roll_group(g)}
    finally:
        torch.set_num_threads(threads)
