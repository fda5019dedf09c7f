"""Helpers that build small job specs for the generation tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def job_dict(model: Path | str, init: dict[str, Any], out: Path | str, **overrides: Any) -> dict[str, Any]:
    """A tiny job: 6 episodes x 4 steps in groups of 2, three kinds of action source."""
    job: dict[str, Any] = {
        "name": "tiny",
        "model": str(model),
        "task": "Push the T onto the target",
        "init": init,
        "action_sources": {
            "walk": {"kind": "scripted", "motion": "mix", "weight": 2},
            "pol": {"kind": "policy", "policy": "tests.workers.policies:brightness_policy"},
        },
        "episodes": 6,
        "horizon": 4,
        "batch_size": 2,
        "replicas": 1,
        "resources": {"num_cpus": 0.25},
        "output": {"path": str(out)},
        "seed": 7,
    }
    job.update(overrides)
    return job


def write_job(path: Path, job: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path
