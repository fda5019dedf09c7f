"""Object supervision on predicted latents (shape_weight): the probe's moments see a rigid body's
shape whatever its pose, the probe reads the objects off real latents, and its loss reaches the
dynamics."""

from __future__ import annotations

import numpy as np
import torch

from sim_model.train.latent_cache import LatentCache
from sim_model.train.objects import median_background
from sim_model.train.shape_probe import fit_probe, moments, shape_loss
from sim_model.train.state import TrainRNG
from tests.sim_model.train.test_train_dynamics import CPU, _data, _net, _task


def test_moments_keep_a_rigid_shape_and_see_a_bent_one() -> None:
    bar = torch.zeros(24, 24)
    bar[5:8, 4:12] = 1.0  # 3 x 8
    turned = torch.zeros(24, 24)
    turned[10:18, 15:18] = 1.0  # the same bar, turned a quarter and moved
    bent = torch.zeros(24, 24)
    bent[5:8, 4:9] = 1.0
    bent[8:11, 6:9] = 1.0  # as many cells, folded in the middle
    rigid, moved, folded = moments(torch.stack([bar, turned, bent]))
    assert rigid[0] == 24 and folded[0] == 24
    torch.testing.assert_close(rigid, moved)
    assert rigid[1] > 4 * rigid[2] and (folded[1] - rigid[1]).abs() > 1.0


def test_the_probe_reads_objects_off_latents_and_its_loss_trains_the_dynamics() -> None:
    net, dyn = _net()
    data = _data()
    train, _ = data.split(0.5, seed=0)
    latents = LatentCache(net, data, CPU, median_background(data))
    probe = fit_probe(latents, train, np.random.default_rng(0), frames=32)
    idx = np.arange(len(data.frames))
    fg = latents.foreground(idx)
    assert probe.correlation(latents(idx), fg) > 0.2  # even through the tiny random encoder
    cells = torch.randperm(fg.numel(), generator=torch.Generator().manual_seed(0))
    shuffled = fg.flatten()[cells].reshape(fg.shape)  # the same share of object cells, anywhere
    assert probe.correlation(latents(idx), shuffled) < 0.1
    z = latents(idx[:4])
    zero, _ = shape_loss(probe, z, z)
    assert float(zero) == 0.0
    task = _task(net, dyn, data, shape_weight=1.0)
    loss, logs = task.loss(0, 0.0, TrainRNG.seeded(0))
    loss.backward()
    assert logs["probe_mask"] > 0 and "probe_shape" in logs
    assert torch.isfinite(loss) and net.dynamics.out[2].weight.grad.abs().sum() > 0
