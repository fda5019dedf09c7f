"""The inference API: load a checkpoint, reset from initial frames, step with actions, roll out.

    wm = WorldModel.load("runs/pusht/model")          # or WorldModel.random(features)
    wm.reset(frames, seeds=[0, 1])                    # frames uint8 (B, V, H, W, 3) or (B, H, W, 3)
    res = wm.step(actions)                            # actions (B, A) raw units -> res.frames uint8
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from schemas import FeatureSpec
from schemas.errors import SpecError
from sim_model import checkpoint as ckpt
from sim_model.compile import CompileMode, StepPieces, make_pieces, resolve_compile
from sim_model.config import CheckpointConfig, ModelConfig, Precision, Provenance, preset_config
from sim_model.context import ContextWindow
from sim_model.inputs import FrameLayout, as_actions, parse_frames
from sim_model.nn.world import WorldModelNet, to_images, to_uint8
from sim_model.noise import RowNoise
from sim_model.normalize import Normalizer, fit_normalization
from sim_model.precision import autocast, resolve_precision

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    frames: np.ndarray  # uint8, shaped like one frame of the reset input: (B, V, H, W, 3) or (B, H, W, 3)
    state: np.ndarray | None  # (B, S) float32 in raw units, or None without a state head


@dataclass
class RolloutResult:
    frames: np.ndarray  # uint8 (B, T, V, H, W, 3); the V axis is kept even for one camera
    state: np.ndarray | None  # (B, T, S) float32, or None


class WorldModel:
    """An action-conditioned world model; holds the rollout state of one batch of episodes.

    compile: 'off' runs the step eagerly; 'on' through torch.compile (inductor, a graph per
    batch size, built on first use); 'cudagraphs' adds CUDA graphs on a GPU; 'auto' reads
    $IWS_COMPILE, else the device's measured default (see sim_model/compile.py).
    """

    def __init__(self, net: WorldModelNet, config: CheckpointConfig, device: str | torch.device = "cpu",
                 precision: Precision | None = None, compile: CompileMode = "auto") -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise SpecError(f"device '{device}' was asked for but torch sees no CUDA device; use 'cpu'.")
        self.net = net.to(self.device).eval()  # fp32 master: what save() and checkpoint_hash see
        self.config = config
        self.bf16 = resolve_precision(precision or config.model.precision, self.device)
        # Inference runs on a copy: in bf16 (autocast would otherwise re-cast every weight on every
        # call, a fifth of CPU time at batch 1; autocast stays on to keep norms/softmax in fp32)
        # and channels-last (oneDNN's native layout: ~15% faster convs on CPU).
        self._run = copy.deepcopy(self.net).to(torch.bfloat16 if self.bf16 else torch.float32)
        self._run = self._run.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.compile = resolve_compile(compile, self.device)
        self._pieces: StepPieces = make_pieces(self._run, config.model, self.device, self.compile)
        self.norm = Normalizer(config.normalization, self.device)
        self._window = ContextWindow(config.model.dynamics.context)
        self._z: torch.Tensor | None = None  # newest latent (B, V, C, h, w)
        self._z_prev: torch.Tensor | None = None  # the one before it (itself right after a 1-frame reset)
        self._layout: FrameLayout | None = None
        self._noise: RowNoise | None = None
        self._hash: str | None = None
        self.state: np.ndarray | None = None  # last known proprioceptive state (B, S), raw units

    # ---- construction and persistence -------------------------------------------------------
    @classmethod
    def random(cls, features: FeatureSpec, preset: str = "tiny", seed: int = 0, device: str = "cpu",
               *, config: ModelConfig | None = None, precision: Precision | None = None,
               compile: CompileMode = "auto") -> WorldModel:
        """A randomly initialised model (tests, benchmarks); `config` overrides the preset."""
        model_cfg = config or preset_config(preset, features)
        with torch.random.fork_rng(devices=[]):  # seeded init without touching the caller's RNG
            torch.manual_seed(seed)
            net = WorldModelNet(model_cfg, features)
        cfg = CheckpointConfig(features=features, model=model_cfg,
                               normalization=fit_normalization(features),
                               provenance=Provenance(source="random", seed=seed))
        return cls(net, cfg, device, precision, compile)

    @classmethod
    def load(cls, path_or_name: str | os.PathLike[str], device: str = "cpu",
             precision: Precision | None = None, compile: CompileMode = "auto") -> WorldModel:
        """Open a checkpoint directory (model.safetensors + config.json) or a bundled name ('pusht')."""
        directory = ckpt.resolve(path_or_name)
        config = ckpt.read_config(directory)
        tensors = ckpt.read_weights(directory)
        try:
            net = WorldModelNet(config.model, config.features)
        except (ValueError, RuntimeError) as error:
            raise SpecError(f"{directory / ckpt.CONFIG} describes a model that cannot be built: {error}") from None
        ckpt.check_shapes(directory, net.state_dict(), tensors)
        net.load_state_dict(tensors)
        log.info("loaded world model (%s preset) from %s onto %s", config.model.preset, directory, device)
        return cls(net, config, device, precision, compile)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write model.safetensors + config.json atomically (replaces `directory`)."""
        return ckpt.write_checkpoint(directory, self.config, self.net.state_dict())

    # ---- facts -------------------------------------------------------------------------------
    @property
    def features(self) -> FeatureSpec:
        return self.config.features

    @property
    def has_state(self) -> bool:
        return self.net.state_head is not None

    @property
    def checkpoint_hash(self) -> str:
        """sha256 (16 hex) of architecture, features, normalisation and every weight."""
        if self._hash is None:
            digest = hashlib.sha256()
            digest.update(self.config.model_dump_json(include={"features", "model", "normalization"}).encode())
            for name, tensor in sorted(self.net.state_dict().items()):
                digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
                digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
            self._hash = digest.hexdigest()[:16]
        return self._hash

    # ---- inference ---------------------------------------------------------------------------
    @torch.inference_mode()
    def encode(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """uint8 (..., V, H, W, 3) -> unit-norm latents (..., V, C, H/4, W/4) float32."""
        with autocast(self.device, self.bf16):
            return self._run.encode(to_images(torch.as_tensor(frames, device=self.device)))

    @torch.inference_mode()
    def decode(self, latents: torch.Tensor, seeds: Sequence[int] | None = None) -> np.ndarray:
        """Latents (B, V, C, h, w) -> uint8 frames (B, V, H, W, 3)."""
        noise = RowNoise(latents.shape[0], seeds, self.device)
        with autocast(self.device, self.bf16):
            images = self._run.decode(latents.to(self.device), noise, self.config.model.autoencoder.decode_steps)
        return to_uint8(images).cpu().numpy()

    @torch.inference_mode()
    def reset(self, frames: np.ndarray | torch.Tensor, *, actions: np.ndarray | None = None,
              state: np.ndarray | None = None, seeds: Sequence[int] | None = None) -> None:
        """Start a batch of rollouts.

        frames: uint8 (B, V, H, W, 3), or (B, H, W, 3) for a one-camera model. With `actions`
        (B, T0-1, A) the frames carry a history (B, T0, [V,] H, W, 3) that fills the context window.
        state: (B, S) initial proprioceptive state; checked and kept as `self.state`, not fed to the
        dynamics (the state head reads it off the latent). seeds: one int per row.
        """
        images, history, self._layout = parse_frames(frames, actions, self.features)
        b, t0 = images.shape[:2]
        if seeds is not None and len(seeds) != b:
            raise SpecError(f"got {len(seeds)} seeds for a batch of {b}; pass one seed per row.")
        if state is not None and np.shape(state) != (b, self.features.state_dim):
            raise SpecError(f"state has shape {np.shape(state)}; expected ({b}, {self.features.state_dim}).")
        self.state = None if state is None else np.asarray(state, dtype=np.float32)
        self._noise = RowNoise(b, seeds, self.device)
        self._window.clear()
        with autocast(self.device, self.bf16):
            z = self._run.encode(to_images(images.to(self.device)))  # (B, T0, V, C, h, w)
            for i in range(t0 - 1):
                self._push_context(z[:, i], self.norm.action(history[:, i].to(self.device)))
        self._z, self._z_prev = z[:, -1], z[:, max(0, t0 - 2)]

    def _push_context(self, z: torch.Tensor, action: torch.Tensor) -> None:
        level = torch.full((z.shape[0], 1), self.config.model.dynamics.context_noise_infer, device=self.device)
        self._window.push(self._pieces.context(z, action, level))

    @torch.inference_mode()
    def step(self, actions: np.ndarray | torch.Tensor) -> StepResult:
        """Advance every row by one action (B, A) in raw units; returns the predicted frames."""
        if self._z is None or self._z_prev is None or self._noise is None or self._layout is None:
            raise RuntimeError("call reset(frames) before step(actions)")
        b = self._z.shape[0]
        a = self.norm.action(as_actions(actions, b, self.features.action_dim, self.device))
        model, noise = self.config.model, self._noise
        with autocast(self.device, self.bf16):
            self._push_context(self._z, a)
            # noise drawn in the order the sampler uses it: dynamics flow steps, then decoder steps
            flow = [noise(*self._z.shape[1:])[:, None]
                    for _ in range(model.dynamics.sample_steps if model.dynamics.head == "flow" else 0)]
            z = self._pieces.predict(self._z, self._z_prev, a, self._window.context(), self._window.offsets(), flow)
            self._z, self._z_prev = z, self._z
            size = (3, z.shape[-2] * 4, z.shape[-1] * 4)
            frames_t, state = self._pieces.render(
                z, [noise(z.shape[1], *size) for _ in range(model.autoencoder.decode_steps)])
        frames = self._layout.restore(frames_t).cpu().numpy()
        raw_state = None if state is None else self.norm.state_raw(state).cpu().numpy()
        if raw_state is not None:
            self.state = raw_state
        return StepResult(frames=frames, state=raw_state)

    @torch.inference_mode()
    def rollout(self, frames: np.ndarray | torch.Tensor, actions: np.ndarray | torch.Tensor, *,
                seeds: Sequence[int] | None = None) -> RolloutResult:
        """reset(frames) then step through actions (B, T, A): frames (B, T, V, H, W, 3) uint8."""
        actions = torch.as_tensor(actions, dtype=torch.float32)
        if actions.dim() != 3:
            raise SpecError(f"rollout actions must be (B, T, A); got shape {tuple(actions.shape)}.")
        self.reset(frames, seeds=seeds)
        b, t = actions.shape[:2]
        height, width = self.features.cameras[0].height, self.features.cameras[0].width
        out = np.empty((b, t, len(self.features.cameras), height, width, 3), dtype=np.uint8)
        states = np.empty((b, t, self.features.state_dim), dtype=np.float32) if self.has_state else None
        for i in range(t):
            res = self.step(actions[:, i])
            out[:, i] = res.frames.reshape(out[:, i].shape)
            if states is not None and res.state is not None:
                states[:, i] = res.state
        return RolloutResult(frames=out, state=states)
