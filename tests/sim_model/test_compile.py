"""The step's pieces: eager ones replay the network's own sampling bit for bit (noise drawn up
front in the sampler's order); compiled ones agree within bf16 rounding; a failed compile
falls back to eager once, with a warning."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from sim_model.compile import CompiledPieces, compile_unavailable
from sim_model.config import preset_config
from sim_model.nn.dynamics import next_latent
from sim_model.nn.world import to_uint8
from sim_model.noise import RowNoise
from sim_model.precision import autocast
from sim_model.world_model import WorldModel
from tests.fixtures.model import square_features


def _model(compile: str, precision: str = "bf16") -> WorldModel:
    """A tiny 16x16 model with two flow steps and two decoder steps, so noise order matters."""
    features = square_features(16)
    cfg = preset_config("tiny", features)
    cfg = cfg.model_copy(update={
        "dynamics": cfg.dynamics.model_copy(update={"head": "flow", "sample_steps": 2}),
        "autoencoder": cfg.autoencoder.model_copy(update={"decode_steps": 2})})
    return WorldModel.random(features, config=cfg, precision=precision, compile=compile)  # type: ignore[arg-type]


def _roll(wm: WorldModel, steps: int = 6) -> tuple[np.ndarray, torch.Tensor]:
    rng = np.random.default_rng(0)
    wm.reset(rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8), seeds=[3, 4])
    frames = [wm.step(rng.uniform(0, 16, (2, 2)).astype(np.float32)).frames for _ in range(steps)]
    assert wm._z is not None
    return np.stack(frames), wm._z.clone()


@torch.inference_mode()
def test_eager_pieces_match_the_networks_own_sampling() -> None:
    """One step through WorldModel.step equals the network driven directly, noise drawn lazily
    by the sampler itself: pre-drawing the noise changes no bit."""
    wm = _model("off")
    rng = np.random.default_rng(0)
    wm.reset(rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8), seeds=[3, 4])
    assert wm._z is not None and wm._z_prev is not None
    z, z_prev, window = wm._z, wm._z_prev, wm._window
    raw = rng.uniform(0, 16, (2, 2)).astype(np.float32)
    a = wm.norm.action(torch.as_tensor(raw))
    noise, run, dyn = RowNoise(2, [3, 4], wm.device), wm._run, wm.config.model.dynamics
    with autocast(wm.device, wm.bf16):
        level = torch.full((2, 1), dyn.context_noise_infer)
        window.push(run.dynamics.encode_context(z[:, None], a[:, None], level))
        z_next = next_latent(run.dynamics, dyn.head, dyn.sample_steps, z[:, None], z_prev[:, None], a[:, None],
                             window.context(), window.offsets(), lambda: noise(*z.shape[1:])[:, None])[:, 0]
        expected = to_uint8(run.decode(z_next, noise, wm.config.model.autoencoder.decode_steps))[:, 0]
    wm.reset(np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8), seeds=[3, 4])
    out = wm.step(raw)
    assert torch.equal(wm._z, z_next)
    np.testing.assert_array_equal(out.frames, expected.numpy())


def test_failed_compile_falls_back_to_eager_once(caplog: pytest.LogCaptureFixture) -> None:
    reference, _ = _roll(_model("off"))
    wm = _model("on")
    assert isinstance(wm._pieces, CompiledPieces)

    def broken(*args: object) -> None:
        raise RuntimeError("no compiler today")

    wm._pieces._compiled = dict.fromkeys(wm._pieces._compiled, broken)
    with caplog.at_level(logging.WARNING, logger="sim_model.compile"):
        frames, _ = _roll(wm)
    np.testing.assert_array_equal(frames, reference)
    assert [r.message for r in caplog.records] == [
        "torch.compile failed (RuntimeError: no compiler today); the world model runs eagerly"]


@pytest.mark.slow  # compiles three graphs: 1-3 min on 2 busy cores
@pytest.mark.skipif(compile_unavailable(torch.device("cpu")) is not None,
                    reason=f"torch.compile cannot run here: {compile_unavailable(torch.device('cpu'))}")
def test_compiled_step_matches_eager_within_bf16_rounding() -> None:
    """Inductor fuses and reorders bf16 arithmetic, so bits differ; frames stay within a few
    uint8 levels and latents within bf16 precision over a short rollout."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        eager_frames, eager_z = _roll(_model("off"))
        compiled = _model("on")
        frames, z = _roll(compiled)
    finally:
        torch.set_num_threads(threads)
    assert isinstance(compiled._pieces, CompiledPieces) and compiled._pieces.failed is None
    difference = np.abs(frames.astype(int) - eager_frames.astype(int))
    assert difference.max() <= 4 and difference.mean() < 0.5, (difference.max(), difference.mean())
    torch.testing.assert_close(z, eager_z, atol=3e-2, rtol=0)
