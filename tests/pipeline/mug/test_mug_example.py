"""examples/mug_generate.yaml runs as written (with a small random mug model in place of the
bundled one): scripted and demonstrator episodes, all three cameras in both output formats,
LeRobot's loader opens it, and the DP export keeps one array per camera."""

from __future__ import annotations

from pathlib import Path

from pipeline.cli import main
from pipeline.mug.features import mug_features
from schemas import RunManifest
from sim_model.data.formats import open_dataset
from tests.fixtures.ray_cluster import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "mug_generate.yaml"


def test_the_mug_example_job_generates_and_exports(tmp_path: Path, ray_cluster) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from sim_model.world_model import WorldModel

    model = WorldModel.random(mug_features(96), preset="tiny", seed=0).save(tmp_path / "model")
    out = tmp_path / "out"
    assert main(["generate", str(EXAMPLE), "--model", str(model), "--output", str(out),
                 "--set", "episodes=4", "--set", "horizon=3", "--set", "replicas=1",
                 "--set", "batch_size=2", "--no-progress"]) == 0
    manifest = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert manifest.episodes_committed == 4 and manifest.frames == 12
    dataset = open_dataset(manifest.datasets["zarr"])
    assert {dataset.meta(i).source.split(":")[0] for i in range(len(dataset))} == {"scripted", "policy"}
    episode = dataset.episode(0)
    assert {name: frames.shape for name, frames in episode.frames.items()} == {
        name: (3, 96, 96, 3) for name in ("front", "side", "wrist")}
    assert episode.action.shape == (3, 4)
    lerobot = LeRobotDataset("iws/mug-demo", root=out / "lerobot")
    assert len(lerobot) == 12
    assert {key for key in lerobot[0] if key.startswith("observation.images.")} == {
        f"observation.images.{name}" for name in ("front", "side", "wrist")}
    import zarr

    dest = tmp_path / "mug_dp.zarr"
    assert main(["export", "zarr-dp", str(out / "dataset"), str(dest)]) == 0
    root = zarr.open_group(str(dest), mode="r", zarr_format=2)  # what DP's zarr 2.x opens
    for name in ("front", "side", "wrist"):
        assert root[f"data/{name}"].shape == (12, 96, 96, 3), name
    assert root["data/action"].shape == (12, 4)
