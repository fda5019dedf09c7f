"""The fidelity diagnosis: its statistics, a deterministic stand-in model with known answers, and
the whole CLI end to end on a tiny random model and a tiny synthetic PushT store."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from experiments import fidelity_diagnosis as fd
from experiments.fidelity_diagnosis_report import (
    AE,
    CONCLUSION,
    ONE_STEP,
    OPEN_LOOP,
    SECTIONS,
    SNAP,
    Row,
    bootstrap,
    conclude,
    episode_mean,
    verdict,
)
from pipeline.pusht.features import pusht_features
from pipeline.pusht.vision import PALETTE
from sim_model.data.store import EpisodeStore
from sim_model.world_model import WorldModel
from tests.fixtures.store import make_pusht_episode


class RepeatModel:
    """Identity autoencoder whose every step repeats the newest frame: deterministic, and its
    one-step prediction is exactly the 'repeat frame t' baseline."""

    def __init__(self, context: int) -> None:
        self.config = SimpleNamespace(model=SimpleNamespace(dynamics=SimpleNamespace(context=context)))
        self._z: torch.Tensor | None = None

    def encode(self, frames):
        return torch.as_tensor(np.asarray(frames)).float()

    def decode(self, latents, seeds=None):
        return latents.round().to(torch.uint8).numpy()

    def reset(self, frames, *, actions=None, seeds=None):
        frames = np.asarray(frames)
        self._z = self.encode(frames[:, -1] if actions is not None else frames)

    def step(self, actions):
        return SimpleNamespace(frames=self.decode(self._z))


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    """4 synthetic PushT episodes of 14 frames at 32x32 (the T drifts and turns every step)."""
    features = pusht_features(resolution=32)
    path = tmp_path_factory.mktemp("heldout") / "heldout.zarr"
    store = EpisodeStore.create(path, features)
    for index in range(4):
        store.append(make_pusht_episode(features, index, 14))
    return path


@pytest.fixture(scope="module")
def heldout(store_path):
    return fd.load_heldout(EpisodeStore.open(store_path, mode="r"), 3, 8)


def test_bootstrap_interval_and_missing_episodes():
    values = np.random.default_rng(0).uniform(0, 1, 12)
    est = bootstrap(values, resamples=500)
    assert est.low <= est.mean <= est.high and est.n == 12
    assert est.mean == pytest.approx(values.mean()) and est.high - est.low < 0.5
    constant = bootstrap([0.7] * 5)
    assert constant.low == constant.mean == constant.high == pytest.approx(0.7)
    partial = bootstrap([0.2, np.nan, 0.4])  # an episode with no frame of that kind
    assert partial.n == 2 and partial.mean == pytest.approx(0.3)
    assert np.isnan(bootstrap([np.nan]).mean)
    per_frame = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert episode_mean(per_frame).tolist() == [2.0, 5.0]
    kept = episode_mean(per_frame, per_frame > 2.5)
    assert kept[0] == 3.0 and kept[1] == 5.0
    assert np.isnan(episode_mean(per_frame, per_frame > 9)).all()


def test_snap_to_palette_keeps_palette_colours_and_picks_the_nearest():
    palette = PALETTE.astype(np.uint8)[None]  # (1, 7, 3) as a tiny image
    assert np.array_equal(fd.snap_to_palette(palette), palette)
    near = np.array([[[250, 252, 249], [120, 137, 150], [70, 110, 220]]], np.uint8)
    assert fd.snap_to_palette(near).tolist() == [[[255, 255, 255], [119, 136, 153], [65, 105, 225]]]


def test_deterministic_repeat_model_has_known_answers(heldout):
    model = RepeatModel(context=3)
    targets = fd.pick_targets(heldout.frames.shape[1], 3, 5)
    assert targets[0] == 2 and targets[-1] == heldout.frames.shape[1] - 2
    real = heldout.frames[:, targets + 1]
    recon = fd.autoencode(model, real, seed=0)  # a perfect autoencoder: the ceiling is 1
    assert fd.t_iou(recon, real).min() == 1.0 and fd.frame_psnr(recon, real).min() == 100.0
    assert np.array_equal(fd.shape_scores(recon), fd.shape_scores(real))
    pred = fd.one_step(model, heldout, targets, seed=0)
    assert np.array_equal(pred, heldout.frames[:, targets])  # model == repeat-frame-t baseline
    spread = fd.spread_at(model, heldout, int(targets[1]), seeds=4, seed=0)
    for name in ("model frame std", "model latent std", "decoder-only frame std (real latent)"):
        assert np.all(spread[name] == 0.0), name
    assert np.all(spread["real latent one-step change (mean abs z(t+1)-z(t))"] > 0)  # the T drifts


def test_flow_head_samples_differ_across_seeds(tiny_checkpoint, heldout):
    wm = WorldModel.load(tiny_checkpoint)
    spread = fd.spread_at(wm, heldout, 4, seeds=3, seed=0)
    assert np.all(spread["model latent std"] > 0) and np.all(spread["model frame std"] > 0)


def test_context_noise_copy_changes_only_that_label(tiny_checkpoint):
    wm = WorldModel.load(tiny_checkpoint)
    noisy = fd.with_context_noise(wm, 0.2)
    assert noisy.config.model.dynamics.context_noise_infer == 0.2
    assert wm.config.model.dynamics.context_noise_infer == 0.0
    assert noisy.checkpoint_hash != wm.checkpoint_hash  # the label is part of the architecture hash
    assert all(torch.equal(a, b) for a, b in zip(noisy.net.state_dict().values(),
                                                   wm.net.state_dict().values(), strict=True))


def _rows(ceiling: float, step: float, final: float, episodes: int = 6) -> list[Row]:
    jitter = np.linspace(-0.01, 0.01, episodes)
    make = lambda section, quantity, x: Row(  # noqa: E731
        section=section, quantity=quantity, estimate=bootstrap(x + jitter, 200))
    return [make(AE, "T-IoU", ceiling), make(ONE_STEP, "T-IoU model", step),
            make(ONE_STEP, "T-IoU repeat frame t", 0.9), make(OPEN_LOOP, "@50 T-IoU model", final),
            make(ONE_STEP, "T moving: T-IoU model", step),
            make(ONE_STEP, "T moving: T-IoU autoencoder ceiling", ceiling),
            make(ONE_STEP, "T moving: T-IoU repeat frame t", 0.8),
            make(ONE_STEP, "share of frames with the T moving", 0.4),
            make(ONE_STEP, "rigid shape model", 0.8), make(AE, "rigid shape, reconstruction", 0.9),
            make(AE, "rigid shape, real frame", 0.97), make(OPEN_LOOP, "@50 rigid shape model", 0.5)]


@pytest.mark.parametrize(("step", "final", "kind"), [
    (0.60, 0.55, "per-step"), (0.93, 0.30, "accumulated"), (0.70, 0.30, "both"), (0.94, 0.93, "neither")])
def test_conclusion_follows_the_numbers(step, final, kind):
    lines = conclude(_rows(0.95, step, final), horizon=50, resamples=200)
    expected = {"per-step": "The T is lost PER STEP", "accumulated": "The T is lost by ACCUMULATION",
                "both": "The T is lost BOTH", "neither": "No T loss"}[kind]
    assert lines[0].startswith(expected)
    assert f"one step {step:.3f}" in lines[0] and f"@50 {final:.3f}" in lines[0]


def test_verdict_needs_an_interval_that_excludes_zero():
    wide = bootstrap([-0.3, 0.5, 0.1, 0.3])  # mean 0.15 but the interval reaches below 0
    assert wide.low < 0 and verdict(wide, bootstrap([0.0] * 4)) == "neither"


def test_cli_end_to_end_on_a_tiny_model(tiny_checkpoint, store_path, tmp_path):
    out = tmp_path / "results" / "diag"
    argv = ["--model", str(tiny_checkpoint), "--data", str(store_path), "--episodes", "3",
            "--out", str(out), "--horizons", "1,3,6", "--one-step-frames", "4", "--spread-frames",
            "2", "--spread-seeds", "3", "--noise-levels", "0,0.1", "--noise-horizon", "3",
            "--resamples", "200"]
    assert fd.main(argv) == 0
    text = out.with_suffix(".md").read_text()
    for section in (*SECTIONS, CONCLUSION):
        assert f"## {section}" in text
    report = fd.DiagnosisReport.model_validate_json(out.with_suffix(".json").read_text())
    assert report.setup["episodes"] == [0, 1, 2] and report.setup["context"] == 4
    for row in report.rows:
        est = row.estimate
        assert est.n == 0 or est.low <= est.mean <= est.high, row
        assert len(est.values) == 3
    assert report.get(SNAP, "@6 T-IoU real frame snapped (reference)").mean == 1.0
    assert report.get(OPEN_LOOP, "@1 T-IoU repeat first frame").mean < 1.0  # the T drifts
    assert report.get(ONE_STEP, "share of frames with the T moving").mean == 1.0
    assert {r.quantity for r in report.rows if r.section.startswith("5.")} == {
        "T-IoU @3, context_noise_infer=0", "T-IoU @3, context_noise_infer=0.1"}
    assert report.conclusion[0].startswith(("The T is lost", "No T loss"))
    assert json.loads(out.with_suffix(".json").read_text())["conclusion"] == report.conclusion
