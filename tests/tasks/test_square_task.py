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
from workers.parts import committed_records

MIN_PLAUSIBLE = 0.5  # filter.plausibility.min of the job below


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


def test_a_generation_job_records_the_tasks_plausibility_and_drops_below_its_min(
        square: Square, collected: Path, model: Path, tmp_path: Path, ray_cluster,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """filter.plausibility: every episode gets the task's check (records, index, summary);
    mode 'drop' leaves those below `min` out of the datasets. (The square's own check scores a
    random model's frames ~0.04 each; one by episode index splits the episodes.)"""
    import pyarrow.parquet as pq

    from tests.workers.policies import thirds_plausibility

    monkeypatch.setattr(square, "plausibility", lambda: thirds_plausibility)
    out = tmp_path / "out"
    job = job_dict(model, {"dataset": str(collected)}, out, episodes=6, horizon=5, batch_size=3,
                   action_sources={"walk": {"kind": "scripted", "motion": "random_walk"}},
                   filter={"scorer": "square_right", "mode": "label",
                           "plausibility": {"min": MIN_PLAUSIBLE, "mode": "drop"}})
    assert main(["generate", str(write_job(tmp_path / "job.yaml", job)), "--no-progress"]) == 0
    records = sorted(committed_records(str(out)).values(), key=lambda r: r.index)
    kept = [r.episode_id for r in records if r.plausibility is not None and r.plausibility >= MIN_PLAUSIBLE]
    assert [r.plausibility for r in records] == [0.0, 0.5, 1.0] * 2
    assert [r.checks for r in records] == [thirds_plausibility(_indexed(i)) for i in range(6)]
    dataset = open_dataset(out / "dataset")
    assert [dataset.meta(i).episode_id for i in range(len(dataset))] == kept == \
        [r.episode_id for r in records if r.index % 3]
    index = pq.read_table(out / "dataset" / "index.parquet").to_pylist()
    assert [row["plausible"] for row in index] == [r.episode_id in kept for r in records]
    assert [row["plausibility"] for row in index] == [r.plausibility for r in records]
    summary = (out / "summary.md").read_text()
    assert "## Plausibility" in summary
    assert f"{len(records) - len(kept)} of {len(records)} below {MIN_PLAUSIBLE:g}, left out of the datasets" in summary


def _indexed(index: int):  # an Episode with only what thirds_plausibility reads
    from schemas import EpisodeMeta
    from sim_model.data.episode import Episode

    return Episode(frames={"top": np.zeros((1, 2, 2, 3), np.uint8)}, action=np.zeros((1, 2), np.float32),
                   meta=EpisodeMeta(episode_id="e", length=1, info={"index": index}))
