"""Long rollouts: finite output, flat per-step work and flat memory (ring-buffer context)."""

from __future__ import annotations

from typing import Any

import numpy as np
import psutil
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from sim_model.world_model import WorldModel
from tests.fixtures.model import square_features


class _OpLog(TorchDispatchMode):
    """Every tensor op a step runs, with the shapes of its tensor inputs.

    Two steps with the same log do the same work, which is what "flat per-step cost" means;
    unlike a wall or CPU clock it does not depend on how busy the machine is.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, tuple[tuple[int, ...], ...]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        shapes = tuple(
            tuple(t.shape) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
        )
        self.ops.append((str(func), shapes))
        return func(*args, **kwargs)


def test_1000_step_rollout_is_flat_and_finite() -> None:
    wm = WorldModel.random(square_features(16), preset="tiny", seed=0)
    wm.reset(np.zeros((2, 16, 16, 3), np.uint8), seeds=[0, 1])
    rng = np.random.default_rng(0)
    process = psutil.Process()
    logs, states = {}, []
    for step in range(1000):
        action = rng.uniform(0, 16, (2, 2)).astype(np.float32)
        if step in (100, 999):
            with _OpLog() as log:
                res = wm.step(action)
            logs[step] = log.ops
        else:
            res = wm.step(action)
        states.append(res.state)
        if step == 100:
            buffers = [t.data_ptr() for kv in wm._window.context() for t in kv]
            rss_100 = process.memory_info().rss
    rss_1000 = process.memory_info().rss
    assert np.isfinite(np.stack(states)).all()
    assert np.isfinite(wm._z.numpy()).all()
    torch.testing.assert_close(wm._z.norm(dim=2), torch.ones(2, 1, 4, 4), atol=1e-3, rtol=0)
    assert [t.data_ptr() for kv in wm._window.context() for t in kv] == buffers  # written in place
    assert any("attention" in name for name, _ in logs[999])  # the log sees the context attention
    grown = [(a, b) for a, b in zip(logs[100], logs[999], strict=False) if a != b]
    assert len(logs[999]) == len(logs[100]) and not grown, (
        f"step 999 does more work than step 100: {grown[:3]}"
    )
    assert rss_1000 - rss_100 < 20 * 2**20, f"memory grew by {(rss_1000 - rss_100) / 2**20:.1f} MiB"
