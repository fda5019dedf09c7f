"""Long rollouts: finite output, flat per-step cost and flat memory (ring-buffer context)."""

from __future__ import annotations

import time

import numpy as np
import psutil
import torch

from sim_model.world_model import WorldModel
from tests.fixtures.model import square_features


def test_1000_step_rollout_is_flat_and_finite() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # CPU time of this thread then measures the step's whole cost
    try:
        wm = WorldModel.random(square_features(16), preset="tiny", seed=0)
        wm.reset(np.zeros((2, 16, 16, 3), np.uint8), seeds=[0, 1])
        rng = np.random.default_rng(0)
        process = psutil.Process()
        times, frames, states = [], [], []
        for step in range(1000):
            start = time.thread_time()
            res = wm.step(rng.uniform(0, 16, (2, 2)).astype(np.float32))
            times.append(time.thread_time() - start)
            frames.append(res.frames[:, ::4, ::4].copy())
            states.append(res.state)
            if step == 100:
                buffers = [t.data_ptr() for kv in wm._window.context() for t in kv]
                rss_100 = process.memory_info().rss
        rss_1000 = process.memory_info().rss
    finally:
        torch.set_num_threads(threads)
    assert np.isfinite(np.stack(states)).all()
    assert np.isfinite(wm._z.numpy()).all()
    torch.testing.assert_close(wm._z.norm(dim=2), torch.ones(2, 1, 4, 4), atol=1e-3, rtol=0)
    assert [t.data_ptr() for kv in wm._window.context() for t in kv] == buffers  # written in place
    first, last = np.median(times[10:110]), np.median(times[-100:])
    assert last < 1.5 * first + 2e-3, f"step time grew from {first * 1e3:.2f} to {last * 1e3:.2f} ms"
    assert rss_1000 - rss_100 < 20 * 2**20, f"memory grew by {(rss_1000 - rss_100) / 2**20:.1f} MiB"
