"""Building blocks shared by the decoder and the dynamics network."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def group_norm(channels: int) -> nn.GroupNorm:
    groups = math.gcd(channels, 8)
    return nn.GroupNorm(groups, channels)


def zero_init(*layers: nn.Linear | nn.Conv2d) -> None:
    for layer in layers:
        nn.init.zeros_(layer.weight)
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)


class TimeEmbedding(nn.Module):
    """Sinusoidal embedding of a noise level t in [0, 1] followed by an MLP: (N,) -> (N, dim)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, device=t.device) / half)
        angles = (t.float() * 1000.0)[:, None] * freqs[None]
        emb = torch.cat([angles.sin(), angles.cos()], dim=-1)
        if emb.shape[-1] < self.dim:
            emb = F.pad(emb, (0, self.dim - emb.shape[-1]))
        return self.mlp(emb)


class ResBlock(nn.Module):
    """Pre-norm residual conv block; the conditioning vector enters by FiLM (scale, shift)."""

    def __init__(self, cin: int, cout: int, cond_dim: int) -> None:
        super().__init__()
        self.norm1 = group_norm(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = group_norm(cout)
        self.film = nn.Linear(cond_dim, 2 * cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip: nn.Module = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
        zero_init(self.film, self.conv2)  # FiLM starts neutral, the block as the identity

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        # x: (N, cin, H, W), cond: (N, cond_dim)
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.film(cond)[:, :, None, None].chunk(2, dim=1)
        h = self.norm2(h) * (1 + scale) + shift
        h = self.conv2(F.silu(h))
        return self.skip(x) + h


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over (B, heads, N, d), torch's fused kernel. When gradients
    flow through bf16 on the CPU, in fp32: there the bf16 kernel's backward is slow (fused
    forward + backward 80 ms in bf16, 27 in fp32 at the small preset's bottleneck, 144 tokens: a
    quarter of a training step; 425 vs 265 ms at 576 tokens; benchmarks/bench_attention.py),
    while its forward alone is faster in bf16, so inference keeps bf16."""
    if q.device.type == "cpu" and q.dtype == torch.bfloat16 and torch.is_grad_enabled():
        with torch.autocast("cpu", enabled=False):  # autocast would cast the kernel back to bf16
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v)


class SpatialAttention(nn.Module):
    """Global self-attention over every token of a frame, across all its views (cross-view).

    Input (B*V, C, h, w) is regrouped to (B, V*h*w, C) so views see each other; a learned
    position embedding per (view, y, x) tells the tokens where they are.
    """

    def __init__(self, channels: int, heads: int, views: int, height: int, width: int) -> None:
        super().__init__()
        self.views, self.heads = views, heads
        self.pos = nn.Parameter(torch.zeros(views * height * width, channels))
        nn.init.normal_(self.pos, std=0.02)
        self.norm1 = nn.LayerNorm(channels)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.norm2 = nn.LayerNorm(channels)
        mlp_out = nn.Linear(4 * channels, channels)
        self.mlp = nn.Sequential(nn.Linear(channels, 4 * channels), nn.GELU(), mlp_out)
        zero_init(self.proj, mlp_out)  # each block starts as the identity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        b = n // self.views
        tokens = x.reshape(b, self.views, c, h * w).permute(0, 1, 3, 2).reshape(b, -1, c)
        tokens = tokens + self.pos
        q, k, v = self.qkv(self.norm1(tokens)).reshape(b, -1, 3, self.heads, c // self.heads).unbind(2)
        out = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        tokens = tokens + self.proj(out.transpose(1, 2).reshape(b, -1, c))
        tokens = tokens + self.mlp(self.norm2(tokens))
        return tokens.reshape(b, self.views, h * w, c).permute(0, 1, 3, 2).reshape(n, c, h, w)


class Downsample(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Upsample(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))
