"""examples/sweep_generate.yaml runs as written (with a small random sweep model in place of
the bundled one): both cameras, the 4-D action, scripted and demonstrator episodes, and both
output formats."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.cli import main
from pipeline.sweep.features import sweep_features
from schemas import RunManifest
from sim_model.data.formats import open_dataset
from tests.fixtures.lerobot_v21 import check_converts_and_loads, check_groot_contract
from tests.fixtures.ray_cluster import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "sweep_generate.yaml"


def test_the_sweep_example_job_generates_both_cameras_and_exports(tmp_path: Path, ray_cluster) -> None:
    from sim_model.world_model import WorldModel

    model = WorldModel.random(sweep_features(96), preset="tiny", seed=0).save(tmp_path / "model")
    out = tmp_path / "out"
    assert main(["generate", str(EXAMPLE), "--model", str(model), "--output", str(out),
                 "--set", "episodes=4", "--set", "horizon=3", "--set", "replicas=1",
                 "--set", "batch_size=2", "--no-progress"]) == 0
    manifest = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert manifest.episodes_committed == 4 and manifest.frames == 12
    dataset = open_dataset(manifest.datasets["zarr"])
    assert {dataset.meta(i).source.split(":")[0] for i in range(len(dataset))} == {"scripted", "policy"}
    episode = open_dataset(out / "dataset").episode(0)
    assert set(episode.frames) == {"top", "side"} and episode.frames["side"].shape == (3, 96, 96, 3)
    assert episode.action.shape == (3, 4) and episode.meta.task == "Sweep the pile into the goal"
    info = json.loads((out / "lerobot" / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 4
    assert {"observation.images.top", "observation.images.side"} <= set(info["features"])
    # both cameras as LeRobot v2.1, read by lerobot's converter and loader, and as GR00T reads it
    assert main(["export", "lerobot", str(out / "dataset"), str(tmp_path / "v21"), "--codebase", "v2.1",
                 "--groot"]) == 0
    check_converts_and_loads(open_dataset(out / "dataset"), tmp_path / "v21", tmp_path, max_error=None)
    modality = check_groot_contract(tmp_path / "v21")
    for group in ("state", "action"):  # the actions are the pushers' targets: grouped the same
        assert {name: (e["start"], e["end"]) for name, e in modality[group].items()} == {
            "pusher0": (0, 2), "pusher1": (2, 4)}
    assert set(modality["video"]) == {"top", "side"}
