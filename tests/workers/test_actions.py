"""Action sources: scripted, replay (Zarr / JSONL / LeRobot parquet), callable policies, mixing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.pusht.features import pusht_features
from schemas import EpisodeSpec, SpecError
from schemas.job import PolicySource, ReplaySource, ScriptedSource
from workers.actions import GroupActions, Observation, make_action_source
from workers.actions.replay import stretch
from workers.actions.scripted import MOTIONS, follow_path

FEATURES = pusht_features(resolution=32)
LOW, HIGH = np.array(FEATURES.action_low), np.array(FEATURES.action_high)


def specs(n: int, horizon: int = 30, source: str = "s", first: int = 0) -> list[EpisodeSpec]:
    return [EpisodeSpec(job_id="t", index=i, episode_id=f"t-{i}", seed=1000 + i, init_ref="x.png",
                        action_source=source, horizon=horizon) for i in range(first, first + n)]


def obs(b: int, state: np.ndarray | None = None) -> Observation:
    return Observation(np.zeros((b, 1, 32, 32, 3), np.uint8), state)


def run(source, episodes: list[EpisodeSpec], observation: Observation | None = None) -> np.ndarray:
    """(B, T, A) actions of a whole open-loop rollout (observations held fixed)."""
    observation = observation or obs(len(episodes))
    source.reset(episodes, observation)
    return np.stack([source.actions(t, observation) for t in range(episodes[0].horizon)], axis=1)


@pytest.mark.parametrize("motion", [*MOTIONS, "mix"])
def test_scripted_motions_stay_in_range_and_move(motion: str) -> None:
    source = make_action_source(ScriptedSource(motion=motion, speed=0.03), FEATURES)
    actions = run(source, specs(4))
    assert actions.shape == (4, 30, 2) and actions.dtype == np.float32
    assert (actions >= LOW).all() and (actions <= HIGH).all()
    steps = np.linalg.norm(np.diff(actions, axis=1), axis=-1)
    assert steps.max() > 0, "the motion should move"
    assert steps.max() <= 2 * 0.03 * 512 * np.sqrt(2) + 1e-3, "steps are bounded by the speed"
    assert source.describe(0).startswith("scripted:")


@pytest.mark.parametrize("motion", ["push", "waypoints", "sweep"])
def test_scripted_motions_keep_acting_until_the_horizon(motion: str) -> None:
    # One push lasts ~30 steps at this speed; the episode chains pushes instead of holding.
    actions = run(make_action_source(ScriptedSource(motion=motion, speed=0.015), FEATURES),
                  specs(4, horizon=100))
    held = np.linalg.norm(np.diff(actions, axis=1), axis=-1) < 1e-6  # (B, T-1)
    assert held.mean() < 0.05, held.mean(axis=1)
    assert not held[:, -20:].all(axis=1).any(), "an episode idles at its end"


def test_scripted_rows_depend_only_on_their_own_seed() -> None:
    source = make_action_source(ScriptedSource(motion="mix"), FEATURES)
    batch = run(source, specs(5))
    alone = run(source, specs(1, first=3))
    np.testing.assert_array_equal(batch[3], alone[0])
    again = run(source, specs(5))
    np.testing.assert_array_equal(batch, again)
    assert not np.array_equal(batch[0], batch[1])


def test_scripted_starts_at_the_initial_state() -> None:
    state = np.array([[100.0, 400.0], [300.0, 50.0]], np.float32)
    source = make_action_source(ScriptedSource(motion="waypoints"), FEATURES)
    actions = run(source, specs(2), obs(2, state))
    np.testing.assert_allclose(actions[:, 0], state, atol=1e-3)


def test_follow_path_reaches_points_at_constant_speed() -> None:
    path = follow_path(np.zeros(2), [np.array([1.0, 0.0])], speed=0.25, steps=8)
    np.testing.assert_allclose(path[:5, 0], [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(path[5:], [[1.0, 0.0]] * 3)


def test_scripted_needs_an_action_range() -> None:
    unbounded = FEATURES.model_copy(update={"action_low": None, "action_high": None})
    with pytest.raises(SpecError, match="action_low/action_high"):
        make_action_source(ScriptedSource(), unbounded)


def test_replay_from_episode_store_plain_and_augmented(tiny_pusht_store) -> None:
    plain = make_action_source(ReplaySource(path=tiny_pusht_store.path), FEATURES)
    episodes = specs(3, horizon=10)
    actions = run(plain, episodes)
    for k in range(3):  # episode k replays stream k, holding the last action past its end
        start, stop = tiny_pusht_store.episode_range(k)
        stream = tiny_pusht_store.window(k, 0, stop - start, keys=["action"])["action"]
        n = min(10, len(stream))
        np.testing.assert_allclose(actions[k, :n], stream[:n], rtol=1e-6)
        np.testing.assert_allclose(actions[k, n:], np.repeat(stream[-1:], 10 - n, axis=0), rtol=1e-6)
    assert plain.describe(1) == "replay:1"

    aug = make_action_source(ReplaySource(path=tiny_pusht_store.path, episodes=[1], noise_std=0.01,
                                          offset_std=0.02, time_stretch=(0.5, 2.0)), FEATURES)
    a1, a2 = run(aug, episodes), run(aug, episodes)
    np.testing.assert_array_equal(a1, a2)  # augmentation is seeded per episode
    assert not np.allclose(a1[0], a1[1])  # different seeds, different augmentation
    assert (a1 >= LOW).all() and (a1 <= HIGH).all()


def test_time_stretch_resamples_linearly() -> None:
    stream = np.arange(5, dtype=np.float32)[:, None]
    np.testing.assert_allclose(stretch(stream, 2.0, 6)[:, 0], [0, 0.5, 1, 1.5, 2, 2.5])
    np.testing.assert_allclose(stretch(stream, 0.5, 4)[:, 0], [0, 2, 4, 4])


def test_replay_from_jsonl_both_layouts(tmp_path) -> None:
    per_episode = tmp_path / "teleop.jsonl"
    per_episode.write_text("\n".join(json.dumps({"action": [[i, 2 * i]] * 3}) for i in range(2)))
    per_step = tmp_path / "steps.jsonl"
    per_step.write_text("\n".join(json.dumps({"episode": e, "action": [e * 10 + t, t]})
                                  for e in range(2) for t in range(4)))
    a = run(make_action_source(ReplaySource(path=str(per_episode)), FEATURES), specs(2, horizon=3))
    np.testing.assert_array_equal(a[1], [[1, 2]] * 3)
    b = run(make_action_source(ReplaySource(path=str(per_step)), FEATURES), specs(2, horizon=4))
    np.testing.assert_array_equal(b[1, :, 0], [10, 11, 12, 13])


def test_replay_errors_name_the_problem(tmp_path, tiny_pusht_store) -> None:
    with pytest.raises(SpecError, match="out of range"):
        make_action_source(ReplaySource(path=tiny_pusht_store.path, episodes=[7]), FEATURES)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"action": [[1, 2, 3]]}\n')
    with pytest.raises(SpecError, match="3-D actions but the model takes 2-D"):
        make_action_source(ReplaySource(path=str(bad)), FEATURES)
    bad.write_text("not json\n")
    with pytest.raises(SpecError, match="bad.jsonl:1"):
        make_action_source(ReplaySource(path=str(bad)), FEATURES)
    with pytest.raises(SpecError, match="does not exist"):
        make_action_source(ReplaySource(path=str(tmp_path / "missing")), FEATURES)


def test_replay_from_lerobot_parquet(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "lr"
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text("{}")
    (root / "data" / "chunk-000").mkdir(parents=True)
    table = pa.table({"episode_index": [1, 0, 0, 1], "frame_index": [0, 1, 0, 1],
                      "action": [[5.0, 5.0], [1.0, 1.0], [0.0, 0.0], [6.0, 6.0]]})
    pq.write_table(table, root / "data" / "chunk-000" / "file-000.parquet")
    a = run(make_action_source(ReplaySource(path=str(root)), FEATURES), specs(2, horizon=2))
    np.testing.assert_array_equal(a[:, :, 0], [[0, 1], [5, 6]])


def test_callable_policies_function_and_class() -> None:
    fn = make_action_source(PolicySource(policy="tests.workers.policies:brightness_policy"), FEATURES)
    frames = np.full((2, 1, 32, 32, 3), 50, np.uint8)
    frames[1] = 100
    fn.reset(specs(2), Observation(frames, None))
    np.testing.assert_allclose(fn.actions(3, Observation(frames, None)), [[100, 30], [200, 30]])
    cls = make_action_source(PolicySource(policy="tests.workers.policies:StatefulPolicy"), FEATURES)
    actions = run(cls, specs(2, horizon=3))
    np.testing.assert_allclose(actions[0, :, 0], [105, 110, 115])
    assert cls.describe(0) == "policy:tests.workers.policies:StatefulPolicy"


@pytest.mark.parametrize("ref, message", [
    ("tests.workers.nope:fn", "cannot import module"),
    ("tests.workers.policies:missing", "has no attribute"),
    ("tests.workers.policies:NOT_CALLABLE", "not callable"),
    ("no/such/dir", "neither 'package.module:function' nor an existing"),
])
def test_policy_reference_errors(ref: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        make_action_source(PolicySource(policy=ref), FEATURES)


def test_policy_returning_the_wrong_shape_is_reported() -> None:
    source = make_action_source(PolicySource(policy="tests.workers.policies:wrong_shape_policy"), FEATURES)
    source.reset(specs(2), obs(2))
    with pytest.raises(SpecError, match=r"shape \(2, 7\); expected \(2, 2\)"):
        source.actions(0, obs(2))


def test_group_actions_mix_sources_row_by_row() -> None:
    sources = {"a": make_action_source(ScriptedSource(motion="push"), FEATURES),
               "b": make_action_source(PolicySource(policy="tests.workers.policies:StatefulPolicy"),
                                       FEATURES)}
    episodes = [*specs(1, source="a"), *specs(1, source="b", first=1), *specs(1, source="a", first=2)]
    group = GroupActions(sources, action_dim=2)
    actions = run(group, episodes)
    np.testing.assert_allclose(actions[1, :3, 0], [105, 110, 115])
    alone = run(make_action_source(ScriptedSource(motion="push"), FEATURES), [episodes[2]])
    np.testing.assert_array_equal(actions[2], alone[0])
    assert [group.describe(r) for r in range(3)] == ["scripted:push", "policy:tests.workers.policies:"
                                                     "StatefulPolicy", "scripted:push"]


def save_tiny_act(directory, image_key: str = "observation.images.top") -> None:
    """A randomly initialised, tiny ACT policy for 32x32 PushT, saved the way lerobot-train does."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    torch.manual_seed(0)
    cfg = ACTConfig(
        input_features={image_key: PolicyFeature(type=FeatureType.VISUAL, shape=(3, 32, 32)),
                        "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(2,))},
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(2,))},
        chunk_size=4, n_action_steps=2, dim_model=32, dim_feedforward=64, n_heads=2,
        n_encoder_layers=1, n_decoder_layers=1, use_vae=False, pretrained_backbone_weights=None,
        device="cpu")
    stats = {"observation.state": {"mean": torch.full((2,), 256.0), "std": torch.full((2,), 100.0)},
             "action": {"mean": torch.full((2,), 256.0), "std": torch.full((2,), 100.0)},
             image_key: {"mean": torch.zeros(3, 1, 1), "std": torch.ones(3, 1, 1)}}
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    for part in (ACTPolicy(cfg), pre, post):
        part.save_pretrained(directory)


def test_lerobot_pretrained_policy_directory(tmp_path) -> None:
    save_tiny_act(tmp_path / "act")
    source = make_action_source(PolicySource(policy=str(tmp_path / "act")), FEATURES)
    frames = np.random.default_rng(0).integers(0, 255, (3, 1, 32, 32, 3), dtype=np.uint8)
    observation = Observation(frames, np.full((3, 2), 200.0, np.float32))
    actions = run(source, specs(3, horizon=3), observation)
    assert actions.shape == (3, 3, 2) and np.isfinite(actions).all()
    # The unnormalizer maps the policy's output back to raw pixel units around the action mean.
    assert np.abs(actions - 256).max() < 2000
    np.testing.assert_array_equal(actions, run(source, specs(3, horizon=3), observation))
    assert source.describe(0) == "policy:act"
    no_state = Observation(frames, None)
    source.reset(specs(3), no_state)
    with pytest.raises(SpecError, match="needs observation.state"):
        source.actions(0, no_state)


def test_lerobot_policy_trained_on_gym_pushts_camera_key(tmp_path) -> None:
    """A policy trained on `iws export lerobot --camera-key observation.image` (what
    lerobot-eval --env.type=pusht feeds) also runs inside the world model."""
    save_tiny_act(tmp_path / "act", image_key="observation.image")
    source = make_action_source(PolicySource(policy=str(tmp_path / "act")), FEATURES)
    frames = np.random.default_rng(0).integers(0, 255, (2, 1, 32, 32, 3), dtype=np.uint8)
    actions = run(source, specs(2, horizon=3), Observation(frames, np.full((2, 2), 200.0, np.float32)))
    assert actions.shape == (2, 3, 2) and np.isfinite(actions).all()
