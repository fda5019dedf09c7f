"""Helpers the training stages share: the median background, object pixels and cells, and the
object-weighted decoder loss."""

from __future__ import annotations

import numpy as np
import torch

from sim_model.config import DynamicsConfig, preset_config
from sim_model.nn.world import WorldModelNet
from sim_model.normalize import Normalizer, fit_normalization
from sim_model.train.config import StageConfig
from sim_model.train.data import TrainingData
from sim_model.train.decoder_loss import batch_images, decoder_loss
from sim_model.train.finetune import finetune_task
from sim_model.train.objects import (
    foreground_cells,
    median_background,
    object_pixels,
    pixel_weights,
)
from sim_model.train.state import TrainRNG
from tests.fixtures.model import make_square_episode, square_features

CPU = torch.device("cpu")


def _data(episodes: int = 6, length: int = 20) -> TrainingData:
    return TrainingData.from_episodes([make_square_episode(i, length) for i in range(episodes)],
                                      square_features())


def _net() -> WorldModelNet:
    features = square_features()
    torch.manual_seed(0)
    return WorldModelNet(preset_config("tiny", features), features)


def _dynamics_config() -> DynamicsConfig:
    return preset_config("tiny", square_features()).dynamics


def test_foreground_cells_find_the_moving_object() -> None:
    """The dataset's median frame is the empty scene; a frame's foreground cells are the latent
    cells its square covers."""
    data = _data()
    background = median_background(data)
    assert (background == 30).all()
    cells = foreground_cells(data.frames[:3], background, width=4)  # (3, V, 1, 4, 4): 4x4-pixel cells
    assert cells.shape == (3, 1, 1, 4, 4)
    for frame, mask in zip(data.frames[:3], cells, strict=True):
        ys, xs = np.nonzero((frame[0].numpy() != 30).any(-1))
        expected = np.zeros((4, 4))
        expected[ys // 4, xs // 4] = 1
        np.testing.assert_array_equal(mask[0, 0].numpy(), expected)


def test_object_pixels_grow_around_the_object() -> None:
    """One changed pixel is one object pixel; grown by two it is the 5x5 square around it,
    clipped at the image border."""
    background = torch.full((1, 8, 8, 3), 30, dtype=torch.uint8)
    frame = background.clone()[None]
    frame[0, 0, 4, 4] = 200
    frame[0, 0, 0, 7] = 200
    assert object_pixels(frame, background).sum() == 2
    grown = object_pixels(frame, background, grow=2)[0, 0, 0]
    assert grown.shape == (8, 8)
    assert grown[2:7, 2:7].all() and grown[0:3, 5:8].all()
    assert grown.sum() == 25 + 9 - 2  # the two squares share pixels (2, 5) and (2, 6)


def test_weighted_decoder_loss() -> None:
    """Unit weights give plain MSE exactly; object weights change the loss, and the weighted loss
    keeps plain MSE's scale (weights divided by their mean)."""
    data, net = _data(), _net()
    idx = np.arange(4)
    x0 = batch_images(data, idx, CPU)
    z = net.encode(x0).detach()
    plain = decoder_loss(net, x0, z, TrainRNG.seeded(1))
    ones = decoder_loss(net, x0, z, TrainRNG.seeded(1), torch.ones(4, 1, 1, 16, 16))
    assert torch.allclose(plain, ones)
    weights = pixel_weights(data, idx, median_background(data), 9.0, CPU)
    assert weights is not None and weights.shape == (4, 1, 1, 16, 16)
    assert set(weights.unique().tolist()) == {1.0, 10.0}
    weighted = decoder_loss(net, x0, z, TrainRNG.seeded(1), weights)
    assert not torch.allclose(plain, weighted)
    assert 0.1 * plain < weighted < 10 * plain
    assert pixel_weights(data, idx, median_background(data), 0.0, CPU) is None


def test_decoder_finetune_with_object_weight_trains_the_decoder() -> None:
    data, net = _data(4, 10), _net()
    train, val = data.split(0.5, seed=0)
    norm = Normalizer(fit_normalization(data.features), CPU)
    cfg = StageConfig(batch_size=8, object_weight=4.0, dynamics_latent_prob=0.5)
    task = finetune_task(net, train, val, cfg, norm, CPU, window=5, dyn=_dynamics_config(),
                         decode_steps=1, seed=0)
    for seed in range(4):  # both branches: encoded and dynamics-predicted latents
        net.zero_grad()
        loss, _ = task.loss(0, 0.0, TrainRNG.seeded(seed))
        loss.backward()
        assert torch.isfinite(loss)
        assert sum(p.grad.abs().sum() for p in net.decoder.parameters() if p.grad is not None) > 0
