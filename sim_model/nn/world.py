"""All trainable parts of a world model in one module (one state dict, one safetensors file)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from schemas import FeatureSpec
from schemas.errors import SpecError
from sim_model.config import ModelConfig
from sim_model.nn import sampler
from sim_model.nn.autoencoder import ConsistencyDecoder, Encoder, StateHead
from sim_model.nn.dynamics import DynamicsNet

NoiseFn = Callable[..., torch.Tensor]  # (*shape) -> (B, *shape) standard normal


def frame_size(features: FeatureSpec) -> tuple[int, int]:
    """All cameras share one encoder/decoder, so they must share one resolution."""
    sizes = {(c.height, c.width) for c in features.cameras}
    if len(sizes) != 1:
        raise SpecError(f"cameras have different resolutions {sorted(sizes)}; the world model needs "
                        "one resolution for all views. Resize them to a common size.")
    (h, w), = sizes
    if h % 4 or w % 4:
        raise SpecError(f"frames are {h}x{w}; both sides must be divisible by 4 (latent is H/4 x W/4).")
    return h, w


class WorldModelNet(nn.Module):
    def __init__(self, cfg: ModelConfig, features: FeatureSpec) -> None:
        super().__init__()
        h, w = frame_size(features)
        self.views = len(features.cameras)
        self.latent_shape = (cfg.autoencoder.latent_channels, h // 4, w // 4)
        self.encoder = Encoder(cfg.autoencoder)
        self.decoder = ConsistencyDecoder(cfg.autoencoder, self.views)
        self.dynamics = DynamicsNet(cfg.dynamics, features.action_dim, self.views,
                                    cfg.autoencoder.latent_channels, h // 4, w // 4)
        self.state_head = (StateHead(self.views * cfg.autoencoder.latent_channels,
                                     cfg.autoencoder.state_hidden, features.state_dim)
                           if features.state_dim else None)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """(..., V, 3, H, W) in [-1, 1] -> unit-norm latents (..., V, C, h, w) float32."""
        lead = images.shape[:-3]
        return self.encoder(images.flatten(0, -4)).float().reshape(*lead, *self.latent_shape)

    def decode(self, z: torch.Tensor, noise: NoiseFn, steps: int) -> torch.Tensor:
        """Latents (B, V, C, h, w) -> images (B, V, 3, H, W) in [-1, 1] by few-step consistency sampling.

        noise(*shape) returns (B, *shape): per-row generators keep rows independent.
        """
        b, v = z.shape[:2]
        flat = z.flatten(0, 1)
        view = torch.arange(v, device=z.device).repeat(b)
        size = (3, flat.shape[-2] * 4, flat.shape[-1] * 4)
        x0 = sampler.sample(lambda x_t, t: self.decoder(x_t, t, flat, view).float().clamp(-1, 1),
                            lambda: noise(v, *size).flatten(0, 1), (b * v,), steps, z.device)
        return x0.reshape(b, v, *size)

    def state(self, z: torch.Tensor) -> torch.Tensor | None:
        """Latents (B, V, C, h, w) -> normalised state (B, S), or None without a state head."""
        if self.state_head is None:
            return None
        return self.state_head(z.flatten(1, 2)).float()


def to_images(frames: torch.Tensor) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> float (..., 3, H, W) in [-1, 1]."""
    return frames.movedim(-1, -3).float() / 127.5 - 1


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """float (..., 3, H, W) in [-1, 1] -> uint8 (..., H, W, 3)."""
    return ((images.float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).movedim(-3, -1)
