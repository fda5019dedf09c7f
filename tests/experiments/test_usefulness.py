"""The usefulness experiment's synthetic side on a tiny model, its training through the LeRobot
export, and its results table."""

import json

import numpy as np

from experiments import usefulness
from experiments.bc_policy import from_unit, load_demos
from experiments.usefulness import collect_synthetic, exported, summary, write_results
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel
from tests.fixtures.store import build_tiny_pusht_store


def test_synthetic_side_fills_the_unfiltered_control(tiny_checkpoint, tiny_pusht_store, tmp_path, monkeypatch):
    monkeypatch.setattr(usefulness, "CHUNK", 2)  # several chunks: episode ids stay unique across them
    model = WorldModel.load(tiny_checkpoint)
    kept, unfiltered, used = collect_synthetic(tmp_path / "syn.zarr", tmp_path / "all.zarr", model,
                                               tiny_pusht_store, n=3, attempts=3, horizon=4,
                                               plausible_path=tmp_path / "plausible.zarr",
                                               plausibility_min=0.5)
    # A random tiny model never shows the T on the goal: nothing passes the success filter, every
    # attempt runs to the end, and the control keeps them whole.
    assert used == 3 and len(kept) == 0 and len(unfiltered) == 3
    assert [unfiltered.meta(i).episode_id for i in range(3)] == [f"synthetic-{i:04d}" for i in range(3)]
    episode = unfiltered.episode(0)
    assert len(episode) == 5 and episode.state is not None
    assert episode.meta.info["success"] is False and episode.meta.model_hash == model.checkpoint_hash
    # Each attempt carries PushT's plausibility check; a random tiny model shows no rigid T, so
    # none reaches 0.5 and the plausible side stays empty.
    checks = [unfiltered.meta(i).info for i in range(3)]
    assert all(0.0 <= c["plausibility"] <= c["rigid_shape"] <= 1.0 and "visible" in c for c in checks)
    assert len(EpisodeStore.open(tmp_path / "plausible.zarr")) == 0
    first = tiny_pusht_store.episode(0).frames["top"][0]
    assert np.array_equal(episode.frames["top"][0], first)  # starts from the real demo's first frame
    # Rerunning resumes from the recorded attempts instead of rolling again.
    again = collect_synthetic(tmp_path / "syn.zarr", tmp_path / "all.zarr", model, tiny_pusht_store,
                              n=3, attempts=3, horizon=4)
    assert again[2] == 3 and len(EpisodeStore.open(tmp_path / "all.zarr")) == 3


def test_the_plausible_side_takes_the_first_attempts_that_pass(tiny_checkpoint, tiny_pusht_store, tmp_path):
    model = WorldModel.load(tiny_checkpoint)
    collect_synthetic(tmp_path / "syn.zarr", tmp_path / "all.zarr", model, tiny_pusht_store, n=2,
                      attempts=2, horizon=3, plausible_path=tmp_path / "plausible.zarr", plausibility_min=0.0)
    plausible, unfiltered = EpisodeStore.open(tmp_path / "plausible.zarr"), EpisodeStore.open(tmp_path / "all.zarr")
    # at MIN 0 every attempt passes: the same episodes, in order, as the control's
    assert len(plausible) == 2
    assert [plausible.meta(i).episode_id for i in range(2)] == [unfiltered.meta(i).episode_id for i in range(2)]


def test_results_table_reports_ratios_and_a_missing_side(tmp_path):
    def rows(best):
        return {"best": best, "final": [b / 2 for b in best], "seeds": list(range(len(best)))}

    scores = {"real": summary(rows([0.4, 0.6, 0.96, 0.2])), "unfiltered": summary(rows([0.2, 0.3, 0.1, 0.2]))}
    meta = {"real_demos": 40, "synthetic_demos": 0, "unfiltered_demos": 40, "synthetic_attempts": 40}
    table = write_results(tmp_path, meta, scores)
    assert "plausibility check" not in table  # a run without --plausibility-min has no such row
    assert scores["real"]["success"] == 0.25 and abs(scores["real"]["mean_best"] - 0.54) < 1e-9
    lines = table.splitlines()
    assert "no demonstration passed the filter in 40 attempts" in lines[3]
    assert lines[4].split("|")[6].strip() == f"{0.2 / 0.54:.2f}"  # coverage ratio to real
    assert json.loads((tmp_path / "usefulness.json").read_text())["unfiltered_demos"] == 40
    assert (tmp_path / "usefulness.png").stat().st_size > 0


def test_bc_trains_on_the_lerobot_export(tmp_path):
    """The policy learns from what a user would train on: the LeRobot export of the demos, read
    with lerobot's LeRobotDataset (decoded video frames), not from the iws store."""
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    demos = build_tiny_pusht_store(tmp_path)  # tmp_path/store.zarr
    policy = usefulness._trained(demos, tmp_path / "bc_real", steps=2, save_at=[2])
    config = json.loads((policy / "policy.json").read_text())
    assert config["data"] == "store_lerobot" and config["format"] == "lerobot"
    assert config["episodes"] == 3 and config["frames"] == demos.n_frames
    root = tmp_path / "store_lerobot"
    meta = LeRobotDatasetMetadata("iws/store_lerobot", root=root)
    assert "observation.image" in meta.features  # the key lerobot-eval's pusht env feeds
    frames, agent, actions, ends = load_demos(str(root))
    arrays, store_ends = demos.load_all()
    assert ends.tolist() == store_ends.tolist()
    np.testing.assert_allclose(from_unit(actions), arrays["action"], atol=1e-3)
    np.testing.assert_allclose(from_unit(agent), arrays["state"], atol=1e-3)
    pixels = frames.permute(0, 2, 3, 1).numpy().astype(np.float64)
    error = np.abs(pixels - arrays["top"])
    assert 0 < error.mean() <= 6  # decoded from the lossy video: close to, not equal to, the store
    assert exported(demos, root) == root  # an up-to-date export is reused, not written again
