"""The pixel-based PushT demonstrator in real gym-pusht, and its planner's physics model."""

import numpy as np
import pytest

from pipeline.pusht.demonstrator import PushTDemonstrator
from pipeline.pusht.env import CLEARANCE, PushTSim, distance_to_block
from pipeline.pusht.features import pusht_features
from pipeline.pusht.push_planner import PushPlanner, pose_error, route
from pipeline.pusht.scorer import GOAL_POSE
from pipeline.pusht.truth import InitialState, roll_pusht
from schemas import EpisodeSpec, FeatureSpec, SpecError
from schemas.job import PolicySource
from workers.actions import Observation
from workers.actions.policy import make_policy_source


def _specs(n: int, horizon: int) -> list[EpisodeSpec]:
    return [EpisodeSpec(job_id="t", index=i, episode_id=f"t-{i}", seed=i, init_ref="gym",
                        action_source="demo", horizon=horizon + 1) for i in range(n)]


def test_planned_push_happens_as_predicted():
    """The planner's private physics is gym-pusht's: executing a plan lands where it said."""
    pose = GOAL_POSE + np.array([40.0, -25.0, 0.35])
    push = PushPlanner().plan(np.array([100.0, 420.0]), pose)
    assert push is not None and pose_error(push.predicted) < pose_error(pose) - 5
    sim = PushTSim(resolution=16)
    sim.reset_to(push.start, pose)
    for target in push.targets:
        obs = sim.step(target)
    assert np.abs(obs.block_pose[:2] - push.predicted[:2]).max() < 1.0
    assert abs(obs.block_pose[2] - push.predicted[2]) < 0.02


def test_pushes_the_t_onto_the_goal_from_pixels():
    """From a start near the goal it succeeds (coverage > 0.95) within 150 steps in gym-pusht."""
    state = InitialState(np.array([420.0, 420.0]), GOAL_POSE + np.array([30.0, -20.0, 0.3]))
    policy = PushTDemonstrator(pusht_features(96))
    result = roll_pusht(policy, _specs(1, 150), [state], 150, 96)
    assert result.success[0], result.coverage[0, ::10]
    assert result.final[0] > 0.9  # it does not push the T off again


def test_rows_do_not_depend_on_the_batch():
    states = [InitialState(np.array([100.0, 100.0]), np.array([300.0, 300.0, 1.0])),
              InitialState(np.array([400.0, 120.0]), np.array([200.0, 320.0, -2.0]))]
    together = roll_pusht(PushTDemonstrator(pusht_features(48)), _specs(2, 12), states, 12, 48)
    alone = roll_pusht(PushTDemonstrator(pusht_features(48)), _specs(2, 12)[1:], states[1:], 12, 48)
    np.testing.assert_array_equal(together.actions[1], alone.actions[0])
    assert np.ptp(together.actions[0], axis=0).max() > 20  # it moved toward the T


def test_loads_through_the_generation_policy_source():
    features = pusht_features(48)
    source = make_policy_source(PolicySource(policy="pipeline.pusht.demonstrator:PushTDemonstrator"), features)
    sim = PushTSim(48)
    frames = np.stack([sim.reset(s).frame for s in (1, 2, 3)])[:, None]  # (3, 1, 48, 48, 3)
    observation = Observation(frames, None)  # no state: the agent is found in the pixels
    source.reset(_specs(3, 5), observation)
    actions = source.actions(0, observation)
    assert actions.shape == (3, 2) and actions.dtype == np.float32
    assert (actions >= 0).all() and (actions <= 512).all()
    assert source.describe(0) == "policy:pipeline.pusht.demonstrator:PushTDemonstrator"


def test_clear_errors():
    bad = FeatureSpec(**{**pusht_features(32).model_dump(), "action_dim": 3, "action_low": None,
                         "action_high": None, "action_names": None})
    with pytest.raises(SpecError, match="action_dim is 3"):
        PushTDemonstrator(bad)
    policy = PushTDemonstrator(pusht_features(32))
    with pytest.raises(SpecError, match="call reset"):
        policy.actions(0, Observation(np.zeros((2, 1, 32, 32, 3), np.uint8), None))


def test_routes_out_of_a_t_the_agent_starts_inside():
    """gym-pusht may place the agent overlapping the T; the demonstrator still finds a way out."""
    pose = np.array([222.0, 216.4, -0.823])
    agent = np.array([228.0, 265.0])
    assert distance_to_block(agent, pose) < CLEARANCE
    path = route(agent, np.array([100.0, 100.0]), pose)
    assert path is not None and np.allclose(path[-1], [100.0, 100.0])
    assert distance_to_block(path[0], pose) >= CLEARANCE
