"""The small BC policy of the usefulness experiment: targets, training, checkpoints, acting."""

import json

import numpy as np
import pytest
import torch

from experiments.bc_policy import CHUNK, EXECUTE, BCPolicy, chunk_targets, from_unit, to_unit, train
from pipeline.pusht.features import pusht_features
from pipeline.pusht.truth import roll_pusht, seeded_states
from schemas import EpisodeMeta, EpisodeSpec, SpecError
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore
from workers.actions import Observation


def test_chunk_targets_stop_at_each_episode_end():
    actions = torch.arange(10, dtype=torch.float32)[:, None].repeat(1, 2)  # episodes [0, 6), [6, 10)
    targets = chunk_targets(actions, np.array([6, 10]))
    assert targets.shape == (10, CHUNK, 2)
    assert targets[0, :, 0].tolist() == [0, 1, 2, 3, 4, 5, 5, 5]  # padded with episode 0's last
    assert targets[6, :, 0].tolist() == [6, 7, 8, 9, 9, 9, 9, 9]  # never crosses into episode 0
    assert targets[9, :, 0].tolist() == [9] * CHUNK


def test_unit_scaling_round_trips_the_canvas():
    canvas = np.array([[0.0, 512.0], [256.0, 100.0]], np.float32)
    assert to_unit(canvas).tolist() == [[-1.0, 1.0], [0.0, 100 / 256 - 1]]
    assert np.allclose(from_unit(to_unit(canvas)), canvas)


def test_trains_saves_and_acts_in_gym_pusht(tiny_pusht_store, tmp_path):
    written = train(tiny_pusht_store.path, tmp_path / "bc", steps=6, save_at=[3, 6], batch_size=4)
    assert [p.name for p in written] == ["step-3", "step-6"]
    config = json.loads((written[-1] / "policy.json").read_text())
    assert config["steps"] == 6 and config["resolution"] == 32 and config["episodes"] == 3
    assert not list(tmp_path.rglob("*.pt")) and not list(tmp_path.rglob("*.pkl"))

    policy = BCPolicy(written[-1])
    specs = [EpisodeSpec(job_id="t", index=i, episode_id=f"t-{i}", seed=i, init_ref="gym", action_source="bc",
                         horizon=6) for i in range(2)]
    result = roll_pusht(policy, specs, seeded_states([0, 1]), horizon=5, resolution=32)
    assert result.actions.shape == (2, 6, 2)
    assert np.all((result.actions >= 0) & (result.actions <= 512))
    # The chunk is executed open loop: the network looks once every EXECUTE steps, and the
    # targets in between are the chunk's next entries.
    obs = Observation(np.zeros((2, 1, 32, 32, 3), np.uint8), np.full((2, 2), 256.0, np.float32))
    looks = []
    forward = policy.net.forward
    policy.net.forward = lambda *a: looks.append(1) or forward(*a)  # type: ignore[method-assign]
    policy.reset(specs, obs)
    acted = np.stack([policy.actions(t, obs) for t in range(2 * EXECUTE)], 1)  # (2, 2*EXECUTE, 2)
    assert len(looks) == 2
    with torch.no_grad():
        chunk = from_unit(forward(torch.zeros(2, 3, 32, 32), to_unit(obs.state)))
    assert np.allclose(acted[:, :EXECUTE], chunk[:, :EXECUTE], atol=1e-4)
    assert policy.describe(0) == "bc:bc/step-6"


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(SpecError, match="not a BC policy checkpoint"):
        BCPolicy(tmp_path)


def test_refuses_data_without_the_agent_position(tmp_path):
    features = pusht_features(32).model_copy(update={"state_dim": 0, "state_names": (), "extras": ()})
    store = EpisodeStore.create(tmp_path / "no_state.zarr", features)
    store.append(Episode(frames={"top": np.zeros((4, 32, 32, 3), np.uint8)},
                         action=np.zeros((4, 2), np.float32), meta=EpisodeMeta(episode_id="e", length=4)))
    with pytest.raises(SpecError, match="2-D state and action"):
        train(store.path, tmp_path / "bc", steps=1, save_at=[1])
