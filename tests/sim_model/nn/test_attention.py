"""Spatial attention's kernel precision on the CPU (sim_model.nn.blocks.attention)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from sim_model.nn.blocks import SpatialAttention, attention


class _AttentionDtypes(TorchDispatchMode):
    """Records the dtype of the query each attention kernel is called with."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.dtype] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if "scaled_dot_product" in str(func) and "backward" not in str(func):
            self.seen.append(args[0].dtype)
        return func(*args, **(kwargs or {}))


def _qkv(grad: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(2, 2, 16, 8, generator=gen).to(torch.bfloat16).requires_grad_(grad) for _ in range(3)]


def test_training_on_the_cpu_attends_in_fp32_even_under_bf16_autocast() -> None:
    """The bf16 kernel's backward is ~2.5x slower on the CPU (benchmarks/bench_attention.py), so
    with gradients the kernel runs in fp32; autocast must not cast it back."""
    q, k, v = _qkv(grad=True)
    with _AttentionDtypes() as mode, torch.autocast("cpu", dtype=torch.bfloat16):
        out = attention(q, k, v)
    assert mode.seen == [torch.float32] and out.dtype == torch.bfloat16
    reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out.float(), reference.detach(), atol=1e-2, rtol=1e-2)  # bf16 rounding only
    out.float().sum().backward()
    assert q.grad is not None and q.grad.dtype == torch.bfloat16 and q.grad.abs().sum() > 0


def test_inference_keeps_the_bf16_kernel() -> None:
    q, k, v = _qkv(grad=False)
    with _AttentionDtypes() as mode, torch.no_grad():
        attention(q, k, v)
    assert mode.seen == [torch.bfloat16]


def test_spatial_attention_trains_through_the_fp32_path() -> None:
    layer = SpatialAttention(8, 2, views=1, height=4, width=4)
    x = torch.randn(3, 8, 4, 4)
    with _AttentionDtypes() as mode, torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    assert mode.seen == [torch.float32] and y.shape == x.shape
