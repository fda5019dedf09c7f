"""The job's first group is split so its first episodes commit early, and that leaves every
episode's bytes as they were: the same checksums as rolling the unsplit groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.generate.expand import LEAD_GROUP, groups, job_groups
from pipeline.generate.preflight import preflight
from schemas import JobSpec
from tests.workers.jobs import job_dict
from workers.replica import WorldModelReplica

EXAMPLE_INIT = Path(__file__).resolve().parents[3] / "examples" / "pusht_init"


def _spec(model: str, out: Path, images: list[str] | None = None, **overrides: object) -> JobSpec:
    images = images or sorted(str(p) for p in EXAMPLE_INIT.glob("*.png"))
    job = job_dict(model, {"images": images}, out,
                   action_sources={"play": {"kind": "scripted", "motion": "mix", "weight": 3},
                                   "pushes": {"kind": "scripted", "motion": "push"}},
                   episodes=12, horizon=5, batch_size=8)
    job.update(overrides)
    return JobSpec.model_validate(job)


def test_first_group_is_split_only_where_it_keeps_the_bytes(tmp_path: Path) -> None:
    episodes = list(range(20))
    spec = _spec("pusht", tmp_path)
    assert [len(g) for g in job_groups(spec, episodes)] == [LEAD_GROUP, 8 - LEAD_GROUP, 8, 4]
    for batch in (1, 2, 3):  # no sub-group of one (a batch of one takes other kernels)
        small = _spec("pusht", tmp_path, batch_size=batch)
        assert job_groups(small, episodes) == groups(episodes, batch)
    with_policy = _spec("pusht", tmp_path, action_sources={
        "pol": {"kind": "policy", "policy": "tests.workers.policies:brightness_policy"}})
    assert job_groups(with_policy, episodes) == groups(episodes, 8)  # a policy sees the whole batch


def _checksums(spec: JobSpec, out: Path, split: bool) -> dict[str, str]:
    import torch

    plan = preflight(spec.model_copy(update={"output": spec.output.model_copy(update={"path": str(out)})}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a replica with num_cpus <= 1
    try:
        replica = WorldModelReplica.with_model(plan.spec, plan.spec.output.path, plan.model)
        rolled = job_groups(plan.spec, plan.episodes) if split else groups(plan.episodes, spec.batch_size)
        return {r.episode_id: r.checksum for g in rolled for r in replica.roll_group(g)}
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("model", ["pusht", "tiny"])
def test_split_groups_make_the_same_bytes(tmp_path: Path, model: str, tiny_checkpoint: Path) -> None:
    """The bundled model (what the main job rolls) and the tests' tiny one."""
    spec = (_spec("pusht", tmp_path / "unused") if model == "pusht"
            else _spec(str(tiny_checkpoint), tmp_path / "unused", _tiny_images(tmp_path)))
    assert _checksums(spec, tmp_path / "split", True) == _checksums(spec, tmp_path / "whole", False)


def _tiny_images(tmp_path: Path) -> list[str]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(3)
    paths = [tmp_path / f"init{i}.png" for i in range(3)]
    for p in paths:
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(p)
    return [str(p) for p in paths]
