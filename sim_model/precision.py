"""bf16 autocast where it pays: CPUs with AMX / AVX512-BF16 (2-3.5x faster here) and CUDA."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import torch


@functools.cache
def cpu_has_fast_bf16() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return False
    flags = cpuinfo.read_text(errors="ignore")
    return "amx_bf16" in flags or "avx512_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> bool:
    """True when inference should run under bf16 autocast."""
    if precision == "fp32":
        return False
    if precision == "bf16":
        return True
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_fast_bf16()


def autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
