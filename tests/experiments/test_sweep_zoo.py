"""The sweep zoo's demonstrations: both cameras recorded from fresh piles, an export lerobot opens."""

import numpy as np

from experiments import sweep_zoo


def test_demos_record_both_cameras_and_export_for_lerobot(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_zoo, "BATCH", 2)
    store = sweep_zoo.collect_demos(tmp_path / "demos.zarr", 3, 4)
    assert len(store) == 3 and store.features.camera_names == ("top", "side")
    episode = store.episode(2)
    assert episode.frames["top"].shape == (4, 96, 96, 3) and episode.action.shape == (4, 4)
    assert not np.array_equal(episode.frames["top"], episode.frames["side"])
    # the recorded state is where the pushers were when the action was chosen
    assert not np.array_equal(episode.state[0], episode.state[-1])
    assert len(sweep_zoo.collect_demos(tmp_path / "demos.zarr", 3, 4)) == 3  # resumed: nothing added

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = sweep_zoo.exported(store, tmp_path / "demos_lerobot")
    dataset = LeRobotDataset("iws/demos_lerobot", root=root)
    item = dataset[5]
    assert len(dataset) == 12
    assert item["observation.images.top"].shape == item["observation.images.side"].shape == (3, 96, 96)
    assert sweep_zoo.policy_arguments(tmp_path)[1::2] == [f"experiments.sweep_zoo:{n}" for n in sweep_zoo.ZOO]
