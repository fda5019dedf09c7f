"""experiments/reanchor.py: the re-anchored rollout, its arm parsing, and a scored report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments import reanchor
from experiments.fidelity_diagnosis import snap_to_palette
from schemas import FeatureSpec, SpecError
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel
from tests.fixtures.store import make_pusht_episode


def _start(features: FeatureSpec, batch: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    cam = features.cameras[0]
    frames = rng.integers(0, 256, (batch, len(features.cameras), cam.height, cam.width, 3), dtype=np.uint8)
    actions = rng.uniform(100, 400, (batch, 6, features.action_dim)).astype(np.float32)
    return frames, actions


@pytest.mark.parametrize("mode", reanchor.MODES)
def test_the_newest_latent_is_the_re_encoded_frame_on_re_anchored_steps_only(
        tiny_checkpoint: Path, tiny_features: FeatureSpec, mode: str) -> None:
    model = reanchor.ReanchoredWorldModel.load(tiny_checkpoint, compile="off")
    assert isinstance(model, reanchor.ReanchoredWorldModel)
    model.mode, model.every = mode, 3
    plain = WorldModel.load(tiny_checkpoint, compile="off")
    frames, actions = _start(tiny_features)
    model.reset(frames, seeds=[0, 1])
    plain.reset(frames, seeds=[0, 1])
    for t in range(actions.shape[1]):
        out = model.step(actions[:, t])
        expected = plain.step(actions[:, t])
        if t < 3:  # until the first re-anchor both run the same latents
            np.testing.assert_array_equal(out.frames, expected.frames)
        seen = snap_to_palette(out.frames) if mode == "snapped" else out.frames
        re_encoded, newest = model.encode(seen), model._z
        assert newest is not None
        if (t + 1) % 3 == 0:
            torch.testing.assert_close(newest, re_encoded)
        else:
            assert not torch.allclose(newest, re_encoded)
    assert not np.array_equal(out.frames, expected.frames)  # re-anchoring changed the rollout


@pytest.mark.parametrize("text", ["x=snapped", "x=blurred:10", "x=snapped:0", "=decoded:3", "snapped:3"])
def test_a_malformed_variant_says_what_is_expected(text: str) -> None:
    with pytest.raises(SpecError, match="NAME=MODE:EVERY"):
        reanchor.parse_variant(text)


def test_a_variant_may_not_take_the_control_name(tiny_checkpoint: Path) -> None:
    with pytest.raises(SpecError, match="distinct names"):
        reanchor.parse_args(["--checkpoint", str(tiny_checkpoint), "--control", "a", "--variant", "a=decoded:2",
                             "--data", "d", "--out", "o"])


def test_a_scored_report_pairs_each_variant_with_the_plain_rollout(
        tmp_path: Path, tiny_checkpoint: Path, tiny_features: FeatureSpec) -> None:
    store = EpisodeStore.create(tmp_path / "store.zarr", tiny_features)
    for index in range(2):
        store.append(make_pusht_episode(tiny_features, index, 30))
    code = reanchor.main(["--checkpoint", str(tiny_checkpoint), "--variant", "every1=decoded:1",
                          "--variant", "never=snapped:1000", "--data", str(tmp_path / "store.zarr"),
                          "--episodes", "2", "--horizons", "1,10", "--long-steps", "20",
                          "--long-seeds", "1", "--threads", "1", "--out", str(tmp_path / "r")])
    assert code == 0
    arms = {a["name"]: a for a in json.loads((tmp_path / "r.json").read_text())["arms"]}
    assert list(arms) == ["plain", "every1", "never"]
    at10 = {name: next(h for h in arm["horizons"] if h["horizon"] == 10) for name, arm in arms.items()}
    # re-anchoring every 1,000 steps never fires in 10: the same rollout as the plain model
    assert at10["never"]["psnr"] == at10["plain"]["psnr"]
    assert at10["every1"]["psnr"]["mean"] != at10["plain"]["psnr"]["mean"]
    assert (tmp_path / "r.md").read_text().count("every1") >= 2
