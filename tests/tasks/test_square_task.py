"""A task added as a task is meant to be added: its own folder (tests/tasks/square/) and one
registry line - and `iws collect`, `iws eval` and a generation job's filter take it from there."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.tasks.registry import TASKS
from schemas import JobSpec
from sim_model.data.formats import open_dataset
from sim_model.data.store import EpisodeStore
from tests.tasks.square.task import RIGHT, Square, score
from tests.workers.jobs import job_dict, write_job
from workers.writer import committed_records


@pytest.fixture
def square(monkeypatch: pytest.MonkeyPatch) -> Square:
    task = Square()
    monkeypatch.setitem(TASKS, task.name, task)  # the registry line
    return task


@pytest.fixture
def collected(square: Square, tmp_path: Path) -> Path:
    out = tmp_path / "square.zarr"
    assert main(["collect", "square", "--episodes", "3", "--steps", "6", "--jitter", "1.0",
                 "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture
def model(square: Square, tmp_path: Path) -> Path:
    from sim_model.world_model import WorldModel

    return WorldModel.random(square.features(), preset="tiny", seed=0).save(tmp_path / "model")


def test_collect_takes_the_task_and_its_own_flags(capsys, square: Square, collected: Path) -> None:
    store = EpisodeStore.open(collected)
    assert store.features == square.features() and len(store) == 3
    assert "3 square episodes" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["collect", "square", "--episodes", "1", "--out", "x", "--mix", "push=1"])  # PushT's flag


def test_eval_policy_scores_with_the_tasks_scorer_and_ground_truth(
        square: Square, collected: Path, model: Path, tmp_path: Path, one_torch_thread) -> None:
    out = tmp_path / "eval"
    assert main(["eval", "policy", "--model", str(model), "--policy", square.demonstrator,
                 "--init", str(collected), "--episodes", "2", "--horizon", "6", "--batch-size", "2",
                 "--ground-truth", "square", "--scorer", "square_right", "--videos", "1",
                 "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "metrics.json").read_text())
    assert report["ground_truth_env"] == "square" and report["scorer"] == "square_right"
    # In the square world, six pushes of 2 px bring every start (x >= 2) to the right edge.
    truth = [e["ground_truth"] for e in report["episodes"]]
    assert all(t["success"] and t["score"] > RIGHT for t in truth)
    assert all(0.0 <= e["world_model"]["score"] <= 1.0 for e in report["episodes"])


def test_fidelity_takes_the_tasks_object_mask(square: Square, collected: Path, model: Path,
                                              tmp_path: Path, one_torch_thread) -> None:
    out = tmp_path / "fid"
    assert main(["eval", "fidelity", "--model", str(model), "--data", str(collected),
                 "--horizons", "1,3", "--object-mask", "square", "--batch-size", "3",
                 "--videos", "0", "--out", str(out), "--no-progress"]) == 0
    assert (out / "metrics.json").is_file()


def test_a_generation_job_filters_with_the_task_scorer_on_ray_replicas(
        square: Square, collected: Path, model: Path, tmp_path: Path, ray_cluster) -> None:
    """The job names the scorer 'square_right'; the replicas (Ray actors, which never see this
    test's registry line) get the scorer from the driver."""
    out = tmp_path / "out"
    job = job_dict(model, {"dataset": str(collected)}, out, episodes=4, horizon=5,
                   action_sources={"right": {"kind": "policy", "policy": square.demonstrator}},
                   filter={"scorer": "square_right", "mode": "label"})
    JobSpec.model_validate(job)
    assert main(["generate", str(write_job(tmp_path / "job.yaml", job)), "--no-progress"]) == 0
    records = committed_records(str(out))
    assert len(records) == 4
    dataset = open_dataset(out / "dataset")  # mode 'label': every episode, in index order
    for record in records.values():
        assert (record.score, record.success) == score(dataset.episode(record.index))
    assert np.isfinite([r.score for r in records.values()]).all()
