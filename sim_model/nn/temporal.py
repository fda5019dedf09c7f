"""Causal temporal attention with a cache-friendly split between context and target frames.

Context frames (past latents) are processed on their own: in every temporal-attention layer
a context frame attends only to itself and emits its keys/values. Target frames (the noisy
next latent being denoised) attend, per latent position, to the emitted keys/values of the
context frames at the same layer plus themselves. A context frame's features therefore never
depend on other frames, so each one is computed once, cached, and reused for as long as it
stays in the window: inference costs the same at step 10 and at step 10,000, and training
(many targets per window in parallel) matches inference exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

KV = tuple[torch.Tensor, torch.Tensor]  # keys, values: (B, T, P, heads, d), P = V*h*w


@dataclass
class TemporalPass:
    """What the temporal layers of one U-Net pass need to know and what they leave behind.
    Each layer knows its own place among the net's temporal layers (`TemporalAttention.index`,
    given by the net that builds them), so nothing here counts calls.

    mode "context": frames are past latents; layer i stores its (k, v) as `emitted[i]`.
    mode "target": layer i reads `context[i]` and masks/biases it with `offsets`
    (Tq, Tc) long: how many steps target q lies after context k (1..window), -1 = not visible.
    """

    mode: str
    batch: int
    frames: int
    views: int
    context: list[KV] = field(default_factory=list)
    offsets: torch.Tensor | None = None
    emitted: dict[int, KV] = field(default_factory=dict)

    def emitted_in_order(self, layers: int) -> list[KV]:
        """The context pass's keys/values, layer 0 first (ValueError if a layer left none)."""
        if sorted(self.emitted) != list(range(layers)):
            raise ValueError(f"temporal layers {sorted(self.emitted)} emitted keys/values, expected 0..{layers - 1}")
        return [self.emitted[i] for i in range(layers)]


class TemporalAttention(nn.Module):
    """Per-position attention over time with a learned bias per head and step offset. `index`
    is its place among the temporal layers of its net: the entry of the context cache it
    writes (context pass) and reads (target pass)."""

    def __init__(self, channels: int, heads: int, window: int) -> None:
        super().__init__()
        self.index = -1  # set by the net that places it (DynamicsNet); not a weight
        self.heads, self.window = heads, window
        self.norm = nn.LayerNorm(channels)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.rel_bias = nn.Parameter(torch.zeros(heads, window + 1))  # offset 0 = self
        nn.init.zeros_(self.proj.weight)  # starts as the identity
        nn.init.zeros_(self.proj.bias)

    def forward(self, x: torch.Tensor, tp: TemporalPass) -> torch.Tensor:
        n, c, h, w = x.shape
        b, t, v = tp.batch, tp.frames, tp.views
        # (B*T*V, C, h, w) -> (B, T, P, C) with P = V*h*w
        tokens = x.reshape(b, t, v, c, h * w).permute(0, 1, 2, 4, 3).reshape(b, t, v * h * w, c)
        q, k, val = self.qkv(self.norm(tokens)).reshape(b, t, -1, 3, self.heads, c // self.heads).unbind(3)
        if tp.mode == "context":
            tp.emitted[self.index] = (k, val)
            out = val  # attending only to itself
        else:
            out = self._attend(q, k, val, tp.context[self.index], tp.offsets)
        out = self.proj(out.reshape(b, t, -1, c))
        out = out.reshape(b, t, v, h * w, c).permute(0, 1, 2, 4, 3).reshape(n, c, h, w)
        return x + out

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: KV,
                offsets: torch.Tensor | None) -> torch.Tensor:
        kc, vc = ctx  # (B, Tc, P, H, d)
        scale = q.shape[-1] ** -0.5
        self_score = (q * k).sum(-1, keepdim=True).float() * scale + self.rel_bias[:, 0, None]
        if kc.shape[1] == 0 or offsets is None:
            return v
        # scores (B, Tq, P, H, Tc)
        ctx_score = torch.einsum("bqphd,bkphd->bqphk", q, kc.to(q.dtype)).float() * scale
        bias = self.rel_bias[:, offsets.clamp(min=0, max=self.window)]  # (H, Tq, Tc)
        bias = bias.permute(1, 0, 2)[None, :, None]  # (1, Tq, 1, H, Tc)
        visible = (offsets >= 1) & (offsets <= self.window)
        ctx_score = (ctx_score + bias).masked_fill(~visible[None, :, None, None, :], float("-inf"))
        weights = torch.softmax(torch.cat([ctx_score, self_score], dim=-1), dim=-1).to(q.dtype)
        out = torch.einsum("bqphk,bkphd->bqphd", weights[..., :-1], vc.to(q.dtype))
        return out + weights[..., -1:] * v
