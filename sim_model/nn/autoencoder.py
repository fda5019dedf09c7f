"""Encoder to a unit-norm 2D latent, consistency decoder back to pixels, and the state head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sim_model.config import AutoencoderConfig
from sim_model.nn.blocks import Downsample, ResBlock, TimeEmbedding, Upsample, group_norm


def unit_norm(z: torch.Tensor, dim: int = -3) -> torch.Tensor:
    """Project every latent pixel's channel vector to unit length (channels at `dim`)."""
    return F.normalize(z.float(), dim=dim, eps=1e-6)


class Encoder(nn.Module):
    """(N, 3, H, W) in [-1, 1] -> (N, C, H/4, W/4) unit-norm latent. No normalisation layers."""

    def __init__(self, cfg: AutoencoderConfig) -> None:
        super().__init__()
        c0, c1 = cfg.encoder_channels
        self.net = nn.Sequential(
            nn.Conv2d(3, c0, 3, padding=1), nn.SiLU(),
            nn.Conv2d(c0, c0, 4, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(c0, c1, 3, padding=1), nn.SiLU(),
            nn.Conv2d(c1, c1, 4, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(c1, c1, 3, padding=1), nn.SiLU(),
            nn.Conv2d(c1, cfg.latent_channels, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return unit_norm(self.net(x), dim=1)


class ConsistencyDecoder(nn.Module):
    """U-Net D(x_t, t, z, view) -> clean frame x_0: a jump from any noise level to the image.

    The latent enters at the input (upsampled, concatenated) and again at every lower level
    (projected and added), ControlNet-style; t and the view index enter every block by FiLM.
    """

    def __init__(self, cfg: AutoencoderConfig, views: int) -> None:
        super().__init__()
        chans, lat = cfg.decoder_channels, cfg.latent_channels
        self.time = TimeEmbedding(cfg.cond_dim)
        self.view = nn.Embedding(views, cfg.cond_dim)
        self.stem = nn.Conv2d(3 + lat, chans[0], 3, padding=1)
        self.inject = nn.ModuleList(nn.Conv2d(lat, c, 3, padding=1) for c in chans[1:])
        self.down: list[nn.ModuleList] = nn.ModuleList()  # type: ignore[assignment]
        self.downsample = nn.ModuleList()
        for i, c in enumerate(chans):
            self.down.append(nn.ModuleList(ResBlock(c, c, cfg.cond_dim) for _ in range(cfg.decoder_blocks)))
            if i + 1 < len(chans):
                self.downsample.append(Downsample(c, chans[i + 1]))
        self.mid = ResBlock(chans[-1], chans[-1], cfg.cond_dim)
        self.up: list[nn.ModuleList] = nn.ModuleList()  # type: ignore[assignment]
        self.upsample = nn.ModuleList()
        for i in reversed(range(len(chans))):
            c = chans[i]
            blocks = [ResBlock(2 * c, c, cfg.cond_dim)]
            blocks += [ResBlock(c, c, cfg.cond_dim) for _ in range(cfg.decoder_blocks - 1)]
            self.up.append(nn.ModuleList(blocks))
            if i > 0:
                self.upsample.append(Upsample(c, chans[i - 1]))
        self.out = nn.Sequential(group_norm(chans[0]), nn.SiLU(), nn.Conv2d(chans[0], 3, 3, padding=1))

    def forward(self, x_t: torch.Tensor, t: torch.Tensor, z: torch.Tensor,
                view: torch.Tensor) -> torch.Tensor:
        # x_t (N, 3, H, W), t (N,), z (N, C, H/4, W/4), view (N,) long -> x_0 (N, 3, H, W)
        cond = self.time(t) + self.view(view)
        h = self.stem(torch.cat([x_t, F.interpolate(z, size=x_t.shape[-2:], mode="nearest")], 1))
        skips = []
        for i, blocks in enumerate(self.down):
            if i > 0:
                h = h + self.inject[i - 1](F.interpolate(z, size=h.shape[-2:], mode="nearest"))
            for block in blocks:
                h = block(h, cond)
            skips.append(h)
            if i < len(self.downsample):
                h = self.downsample[i](h)
        h = self.mid(h, cond)
        for i, blocks in enumerate(self.up):
            h = torch.cat([h, skips.pop()], 1)
            for block in blocks:
                h = block(h, cond)
            if i < len(self.upsample):
                h = self.upsample[i](h)
        return self.out(h)


class StateHead(nn.Module):
    """All views' latents (B, V*C, h, w) -> normalised proprioceptive state (B, S)."""

    def __init__(self, in_channels: int, hidden: int, state_dim: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, hidden, 3, padding=1), nn.SiLU(),
            nn.Conv2d(hidden, hidden, 3, stride=2, padding=1), nn.SiLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.mlp = nn.Sequential(nn.Flatten(), nn.Linear(hidden * 16, hidden), nn.SiLU(),
                                 nn.Linear(hidden, state_dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.conv(z))
