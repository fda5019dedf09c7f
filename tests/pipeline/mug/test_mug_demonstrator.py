"""The pixel-only mug demonstrator (pipeline.mug.demonstrator) picks the mug up closed loop in the
task's ground truth (pipeline.mug.truth: MuJoCo from the starts a mug store recorded)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.mug.demonstrator import MugDemonstrator
from pipeline.mug.features import mug_features
from pipeline.mug.truth import evaluate_in_mug, initial_states
from schemas import CameraSpec, EpisodeSpec, SpecError
from sim_model.data.store import EpisodeStore


def test_the_demonstrator_lifts_the_mug_in_the_ground_truth(tmp_path) -> None:
    out = tmp_path / "mug.zarr"
    assert main(["collect", "mug", "--episodes", "2", "--steps", "3", "--seed", "20000", "--workers", "1",
                 "--resolution", "48", "--out", str(out), "--no-progress"]) == 0
    specs = [EpisodeSpec(job_id="e", index=i, episode_id=f"e-{i}", seed=i, init_ref=f"{out}#{i}:1",
                         action_source="demo", horizon=80) for i in range(2)]
    recorded = EpisodeStore.open(str(out), "r").episode(0)
    start = initial_states(specs)[0]  # frame 1 as recorded
    assert np.allclose(start.mug_pos, recorded.extras["mug_pose"][1][:3])
    features = mug_features(48)
    scores, videos = evaluate_in_mug(MugDemonstrator(features), specs, features, horizon=80,
                                     batch_size=2, videos=1)
    assert [s.success for s in scores] == [True, True] and all(s.score > 0.5 for s in scores)
    assert len(videos) == 1 and videos[0].shape == (81, 48, 48, 3)


def test_a_model_without_the_fixed_views_is_refused() -> None:
    features = mug_features(32).model_copy(update={"cameras": (CameraSpec(name="wrist", height=32, width=32),)})
    with pytest.raises(SpecError, match="'front' and 'side'"):
        MugDemonstrator(features)
    with pytest.raises(SpecError, match="--ground-truth mug needs a mug-like model"):
        evaluate_in_mug(MugDemonstrator(mug_features(32)), [], features, 2, 1, 0)
