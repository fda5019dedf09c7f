"""Ring buffer of the context frames' keys/values: constant memory and cost per rollout step."""

from __future__ import annotations

import torch

from sim_model.nn.temporal import KV


class ContextWindow:
    """The last `size` context frames' per-layer keys/values, written in place slot by slot.

    Frames are numbered 0, 1, 2, ... as they are pushed; the next target is frame `count`.
    Slots are never reordered: the attention reads all slots with per-slot step offsets.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.kv: list[KV] | None = None
        self.frame_ids: torch.Tensor | None = None
        self.count = 0

    def clear(self) -> None:
        self.kv, self.frame_ids, self.count = None, None, 0

    def push(self, kv: list[KV]) -> None:
        """kv: per temporal layer (k, v), each (B, 1, P, heads, d) for the newest context frame."""
        if self.kv is None:
            self.kv = [(k.new_zeros(k.shape[0], self.size, *k.shape[2:]),
                        v.new_zeros(v.shape[0], self.size, *v.shape[2:])) for k, v in kv]
            self.frame_ids = torch.full((self.size,), -(2**40), dtype=torch.long, device=kv[0][0].device)
        assert self.frame_ids is not None
        slot = self.count % self.size
        for (k_buf, v_buf), (k, v) in zip(self.kv, kv, strict=True):
            k_buf[:, slot] = k[:, 0]
            v_buf[:, slot] = v[:, 0]
        self.frame_ids[slot] = self.count
        self.count += 1

    def context(self) -> list[KV]:
        assert self.kv is not None, "push a context frame first"
        return self.kv

    def offsets(self) -> torch.Tensor:
        """(1, size) steps from each slot's frame to the next target; unwritten slots are far away."""
        assert self.frame_ids is not None
        return (self.count - self.frame_ids)[None].clamp(max=2**20)
