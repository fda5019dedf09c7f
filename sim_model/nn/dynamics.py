"""Latent dynamics network: per-frame U-Net with FiLM actions, causal temporal attention and a
global spatial transformer at the bottleneck; a flow/consistency head predicts the clean next
latent from noise.

Shapes: latents (B, T, V, C, h, w); actions (B, T, A) normalised to [-1, 1]; noise levels
(B, T) in [0, 1]. Inside the U-Net, frames and views are flattened into the batch:
(B*T*V, C, h, w).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from sim_model.config import DynamicsConfig
from sim_model.nn import sampler
from sim_model.nn.blocks import (
    Downsample,
    ResBlock,
    SpatialAttention,
    TimeEmbedding,
    Upsample,
    group_norm,
    zero_init,
)
from sim_model.nn.temporal import KV, TemporalAttention, TemporalPass


class _Stage(nn.Module):
    """ResBlocks, each followed by temporal attention when `temporal`."""

    def __init__(self, cin: int, cout: int, cfg: DynamicsConfig, temporal: bool = True) -> None:
        super().__init__()
        self.res = nn.ModuleList(
            ResBlock(cin if i == 0 else cout, cout, cfg.cond_dim) for i in range(cfg.blocks))
        self.temporal = nn.ModuleList(
            TemporalAttention(cout, cfg.heads, cfg.context) for _ in range(cfg.blocks * temporal))

    def forward(self, h: torch.Tensor, cond: torch.Tensor, tp: TemporalPass) -> torch.Tensor:
        for i, res in enumerate(self.res):
            h = res(h, cond)
            if self.temporal:
                h = self.temporal[i](h, tp)
        return h


class DynamicsNet(nn.Module):
    def __init__(self, cfg: DynamicsConfig, action_dim: int, views: int, latent_channels: int,
                 height: int, width: int) -> None:
        super().__init__()
        chans, cd = cfg.channels, cfg.cond_dim
        self.views = views
        # Stems also see (y, x) coordinate planes so convs can relate positions to actions
        # given in image coordinates (CoordConv).
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
        self.coords: torch.Tensor
        self.register_buffer("coords", torch.stack([ys, xs])[None], persistent=False)  # (1, 2, h, w)
        self.ctx_stem = nn.Conv2d(latent_channels + 2, chans[0], 3, padding=1)
        self.recency = cfg.recency
        self.tgt_stem = nn.Conv2d((3 if cfg.recency else 2) * latent_channels + 2, chans[0], 3, padding=1)
        # Action field: a per-pixel MLP of (action, y, x), so where an action acts in the image
        # (e.g. a target position of the end effector) is one small learned function away.
        self.action_field = nn.Sequential(nn.Conv2d(action_dim + 2, cd // 2, 1), nn.SiLU(),
                                          nn.Conv2d(cd // 2, chans[0], 1))
        self.action = nn.Sequential(nn.Linear(action_dim, cd), nn.SiLU(), nn.Linear(cd, cd))
        self.time = TimeEmbedding(cd)
        self.view = nn.Embedding(views, cd)
        self.role = nn.Embedding(2, cd)  # 0 = context frame, 1 = target frame
        self.down = nn.ModuleList(_Stage(c, c, cfg) for c in chans)
        self.downsample = nn.ModuleList(Downsample(a, b) for a, b in zip(chans[:-1], chans[1:], strict=True))
        bottom = 2 ** (len(chans) - 1)
        self.mid_in = ResBlock(chans[-1], chans[-1], cd)
        self.spatial = nn.ModuleList(
            SpatialAttention(chans[-1], cfg.heads, views, height // bottom, width // bottom)
            for _ in range(cfg.spatial_layers))
        self.mid_out = _Stage(chans[-1], chans[-1], cfg)
        # Time is mixed on the way down and at the bottleneck only, so a context frame's pass
        # stops at the bottleneck: the up path serves the target frame alone.
        self.up = nn.ModuleList(_Stage(2 * c, c, cfg, temporal=False) for c in reversed(chans))
        self.upsample = nn.ModuleList(Upsample(b, a) for a, b in reversed(list(zip(chans[:-1], chans[1:], strict=True))))
        out_conv = nn.Conv2d(chans[0], latent_channels, 3, padding=1)
        self.out = nn.Sequential(group_norm(chans[0]), nn.SiLU(), out_conv)
        zero_init(out_conv)  # starts as "repeat the last latent"
        # Each temporal layer's entry in the context cache: its place in the pass (down, then mid).
        self.temporal_layers = [t for stage in (*self.down, self.mid_out) for t in stage.temporal]
        for index, layer in enumerate(self.temporal_layers):
            layer.index = index

    def _cond(self, actions: torch.Tensor, levels: torch.Tensor, role: int) -> torch.Tensor:
        # actions (B, T, A), levels (B, T) -> (B*T*V, cond_dim)
        b, t, _ = actions.shape
        emb = self.action(actions) + self.time(levels.reshape(-1)).reshape(b, t, -1)
        emb = emb + self.role.weight[role]
        emb = emb[:, :, None] + self.view.weight[None, None]
        return emb.reshape(b * t * self.views, -1)

    def _with_coords(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.contiguous(), self.coords.to(x.dtype).expand(x.shape[0], -1, -1, -1)], 1)

    def _field(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions (B, T, A) -> (B*T*V, C0, h, w) action field, the same for every view."""
        b, t, a = actions.shape
        planes = actions.reshape(b * t, a, 1, 1).expand(-1, -1, *self.coords.shape[-2:])
        field = self.action_field(self._with_coords(planes.to(self.coords.dtype)))
        return field.repeat_interleave(self.views, dim=0)

    def _unet(self, h: torch.Tensor, cond: torch.Tensor, tp: TemporalPass) -> torch.Tensor:
        skips = []
        for i, stage in enumerate(self.down):
            h = stage(h, cond, tp)
            skips.append(h)
            if i < len(self.downsample):
                h = self.downsample[i](h)
        h = self.mid_in(h, cond)
        for layer in self.spatial:
            h = layer(h)
        h = self.mid_out(h, cond, tp)
        if tp.mode == "context":
            return h
        for i, stage in enumerate(self.up):
            h = stage(torch.cat([h, skips.pop()], 1), cond, tp)
            if i < len(self.upsample):
                h = self.upsample[i](h)
        return h

    def encode_context(self, z: torch.Tensor, actions: torch.Tensor, levels: torch.Tensor) -> list[KV]:
        """Keys/values of context frames z (B, T, V, C, h, w) at every temporal layer."""
        b, t, v = z.shape[:3]
        tp = TemporalPass("context", b, t, v)
        h = self.ctx_stem(self._with_coords(z.flatten(0, 2))) + self._field(actions)
        self._unet(h, self._cond(actions, levels, 0), tp)
        return tp.emitted_in_order(len(self.temporal_layers))

    def predict(self, x_t: torch.Tensor, t: torch.Tensor, z_prev: torch.Tensor, actions: torch.Tensor,
                context: list[KV], offsets: torch.Tensor, z_prev2: torch.Tensor | None = None) -> torch.Tensor:
        """Clean next latents (B, Tq, V, C, h, w) from noisy ones x_t at noise levels t (B, Tq).

        z_prev: the latent each target follows; z_prev2: the one before it (needed with
        `recency`; pass z_prev where there is none); actions: the action taken at z_prev
        (B, Tq, A); context/offsets: see TemporalPass. The output is not yet unit-normalised.
        """
        b, tq, v = x_t.shape[:3]
        tp = TemporalPass("target", b, tq, v, context=context, offsets=offsets)
        inp = self._with_coords(torch.cat([x_t, z_prev], dim=3).flatten(0, 2))
        if self.recency:  # appended last: a checkpoint without it widens by zero-weight inputs
            if z_prev2 is None:
                raise ValueError("this dynamics net has `recency`: pass z_prev2")
            inp = torch.cat([inp, (z_prev - z_prev2.to(z_prev.dtype)).flatten(0, 2)], 1)
        h = self.tgt_stem(inp) + self._field(actions)
        h = self._unet(h, self._cond(actions, t, 1), tp)
        # contiguous: a channels-last view reshaped to 6-D has strides that later crash
        # oneDNN's bf16 convolution backward when the result is fed back as context
        delta = self.out(h).contiguous().reshape(z_prev.shape)
        return z_prev + delta.to(z_prev.dtype)


def next_latent(dyn: DynamicsNet, head: str, steps: int, z_prev: torch.Tensor, z_prev2: torch.Tensor,
                actions: torch.Tensor, context: list[KV], offsets: torch.Tensor,
                noise: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Unit-norm next latents (B, Tq, V, C, h, w): one regression pass, or `steps` flow steps
    from noise() (a fresh (B, Tq, V, C, h, w) draw per call) through sim_model.nn.sampler. The
    one sampler of training and inference."""
    b, tq = z_prev.shape[:2]
    if head == "regression":
        ones = torch.ones(b, tq, device=z_prev.device)
        pred = dyn.predict(torch.zeros_like(z_prev), ones, z_prev, actions, context, offsets, z_prev2)
        return F.normalize(pred.float(), dim=-3)

    def denoise(x_t: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        pred = dyn.predict(x_t, level, z_prev, actions, context, offsets, z_prev2)
        return F.normalize(pred.float(), dim=-3)

    return sampler.sample(denoise, noise, (b, tq), steps, z_prev.device)


def previous(z: torch.Tensor) -> torch.Tensor:
    """Along time (dim 1), each frame's predecessor; the first frame stands in for its own."""
    return torch.cat([z[:, :1], z[:, :-1]], 1)

