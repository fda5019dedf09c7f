"""One rollout step as three functions of tensors, run eagerly or through torch.compile.

A step is: the newest latent's context pass (keys/values for the window), the next latent
(`next_latent`: the dynamics head's flow or regression pass) and its rendering (decoder, uint8
conversion, state head). Noise is drawn by the caller and passed in, in the order the eager
sampler would draw it, so the per-row generators stay outside the graphs and both paths
consume them identically. The eager pieces run exactly the ops WorldModel always ran; the
compiled ones (inductor, static shapes: one graph per batch size) fuse the pointwise work and
casts around the convolutions and drop the per-op dispatch, which is what the profile in
benchmarks/results/model_profile.md shows a step spends its time on. Their results agree with
eager within bf16 rounding, not bit for bit.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from typing import Any, Literal

import torch

from schemas.errors import SpecError
from sim_model.config import ModelConfig
from sim_model.nn.dynamics import next_latent
from sim_model.nn.temporal import KV
from sim_model.nn.world import WorldModelNet, to_uint8

log = logging.getLogger(__name__)

CompileMode = Literal["auto", "off", "on", "cudagraphs"]
MODES = ("auto", "off", "on", "cudagraphs")


class StepPieces:
    """The step's three pieces over one network: plain functions of tensors."""

    def __init__(self, net: WorldModelNet, cfg: ModelConfig) -> None:
        self.net, self.cfg = net, cfg

    def context(self, z: torch.Tensor, action: torch.Tensor, level: torch.Tensor) -> list[KV]:
        """Newest latent (B, V, C, h, w), the action taken there (B, A), its noise level (B, 1)
        -> per temporal layer (k, v), each (B, 1, P, heads, d)."""
        return self.net.dynamics.encode_context(z[:, None], action[:, None], level)

    def predict(self, z: torch.Tensor, z_prev: torch.Tensor, action: torch.Tensor, context: list[KV],
                offsets: torch.Tensor, noises: list[torch.Tensor]) -> torch.Tensor:
        """Unit-norm next latent (B, V, C, h, w); `noises`: one (B, 1, V, C, h, w) draw per flow step."""
        dyn = self.cfg.dynamics
        draws = iter(noises)
        z_hat = next_latent(self.net.dynamics, dyn.head, dyn.sample_steps, z[:, None], z_prev[:, None],
                            action[:, None], context, offsets, lambda: next(draws))
        return z_hat[:, 0]

    def render(self, z: torch.Tensor, noises: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Latent (B, V, C, h, w) -> uint8 frames (B, V, H, W, 3) and normalised state (B, S) or
        None; `noises`: one (B, V, 3, H, W) draw per decoder step."""
        draws = iter(noises)
        images = self.net.decode(z, lambda *shape: next(draws), self.cfg.autoencoder.decode_steps)
        return to_uint8(images), self.net.state(z)


class CompiledPieces(StepPieces):
    """StepPieces whose functions go through torch.compile; the first call of each compiles it
    for that batch size (seconds). If compilation fails, that is logged once and every piece
    runs eagerly from then on."""

    def __init__(self, net: WorldModelNet, cfg: ModelConfig, cudagraphs: bool = False) -> None:
        super().__init__(net, cfg)
        self.cudagraphs = cudagraphs
        # freezing: weights become constants, so oneDNN gets them pre-packed once, not per call
        inductor: dict[str, Any] = {"freezing": True, "triton.cudagraphs": cudagraphs}
        options: dict[str, Any] = {"dynamic": False, "fullgraph": True, "options": inductor}
        eager = StepPieces(net, cfg)
        self._eager: dict[str, Callable[..., Any]] = {
            "context": eager.context, "predict": eager.predict, "render": eager.render}
        self._compiled = {name: torch.compile(fn, **options) for name, fn in self._eager.items()}
        self.failed: str | None = None

    def _call(self, name: str, *args: Any) -> Any:
        if self.failed is None:
            try:
                return self._compiled[name](*args)
            except Exception as error:  # inductor raises many kinds; any of them means: run eagerly
                self.failed = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                log.warning("torch.compile failed (%s); the world model runs eagerly", self.failed)
        return self._eager[name](*args)

    def context(self, z: torch.Tensor, action: torch.Tensor, level: torch.Tensor) -> list[KV]:
        if self.cudagraphs:  # a step starts here: earlier replays' outputs may now be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        return self._call("context", z, action, level)

    def predict(self, z: torch.Tensor, z_prev: torch.Tensor, action: torch.Tensor, context: list[KV],
                offsets: torch.Tensor, noises: list[torch.Tensor]) -> torch.Tensor:
        z_hat = self._call("predict", z, z_prev, action, context, offsets, noises)
        # a CUDA graph's outputs are overwritten by its next replay; the latent is kept two steps
        return z_hat.clone() if self.cudagraphs else z_hat

    def render(self, z: torch.Tensor, noises: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self._call("render", z, noises)


def compile_unavailable(device: torch.device) -> str | None:
    """Why torch.compile cannot run here, or None. Inductor builds C++ kernels on CPU."""
    if device.type == "cpu" and shutil.which("c++") is None and shutil.which("g++") is None:
        return "no C++ compiler on PATH (inductor builds its CPU kernels with one)"
    return None


def make_pieces(net: WorldModelNet, cfg: ModelConfig, device: torch.device,
                mode: CompileMode) -> StepPieces:
    """Eager or compiled pieces for `mode` (already resolved from 'auto')."""
    if mode == "off":
        return StepPieces(net, cfg)
    reason = compile_unavailable(device)
    if reason is not None:
        log.warning("torch.compile unavailable (%s); the world model runs eagerly", reason)
        return StepPieces(net, cfg)
    if mode == "cudagraphs" and device.type != "cuda":
        raise SpecError(f"compile='cudagraphs' needs a CUDA device, not {device}; use 'on' or 'off'.")
    return CompiledPieces(net, cfg, cudagraphs=mode == "cudagraphs")


def resolve_compile(mode: CompileMode, device: torch.device) -> CompileMode:
    """'auto' -> $IWS_COMPILE when set (how CLI commands and Ray replicas are switched), else
    the default measured for this device. On CPU that is 'off': compiling costs 3-25 s per
    batch size with inductor's on-disk cache warm and 40-160 s cold on a busy 2-core machine,
    for 1.15-1.4x per step (benchmarks/results/model.md): a teleop session or the README's job
    never earns that back. CUDA stays 'off' until
    benchmarks/gpu_burst.sh has measured it."""
    if mode == "auto":
        mode = os.environ.get("IWS_COMPILE", "off")  # type: ignore[assignment]
    if mode not in MODES:
        raise SpecError(f"compile mode {mode!r} is not one of {', '.join(MODES)} (check IWS_COMPILE).")
    return mode
