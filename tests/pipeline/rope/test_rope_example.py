"""examples/rope_generate.yaml runs as written (with a small random rope model in place of the
bundled one): scripted and demonstrator episodes, both output formats, LeRobot's loader opens it."""

from __future__ import annotations

from pathlib import Path

from pipeline.cli import main
from pipeline.rope.features import rope_features
from schemas import RunManifest
from sim_model.data.formats import open_dataset
from tests.fixtures.ray_cluster import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "rope_generate.yaml"


def test_the_rope_example_job_generates_and_exports(tmp_path: Path, ray_cluster) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from sim_model.world_model import WorldModel

    model = WorldModel.random(rope_features(96), preset="tiny", seed=0).save(tmp_path / "model")
    out = tmp_path / "out"
    assert main(["generate", str(EXAMPLE), "--model", str(model), "--output", str(out),
                 "--set", "episodes=4", "--set", "horizon=3", "--set", "replicas=1",
                 "--set", "batch_size=2", "--no-progress"]) == 0
    manifest = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert manifest.episodes_committed == 4 and manifest.frames == 12
    dataset = open_dataset(manifest.datasets["zarr"])
    assert {dataset.meta(i).source.split(":")[0] for i in range(len(dataset))} == {"scripted", "policy"}
    episode = open_dataset(out / "dataset").episode(0)
    assert episode.frames["top"].shape == (3, 96, 96, 3) and episode.action.shape == (3, 2)
    lerobot = LeRobotDataset("iws/rope-demo", root=out / "lerobot")
    assert len(lerobot) == 12 and lerobot[0]["observation.images.top"].shape == (3, 96, 96)
