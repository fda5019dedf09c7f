"""The dynamics stage's schedule, latent cache and recipe options (regression head, recency input),
each checked against the inference path it must match."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim_model.config import DynamicsConfig, preset_config
from sim_model.nn.world import WorldModelNet, to_images
from sim_model.normalize import Normalizer, fit_normalization
from sim_model.train.config import StageConfig, TrainConfig
from sim_model.train.data import TrainingData
from sim_model.train.dynamics import dynamics_task, sample_next
from sim_model.train.latent_cache import LatentCache
from sim_model.train.loop import learning_rate, session_progress
from sim_model.train.state import TrainRNG
from sim_model.world_model import WorldModel
from tests.fixtures.model import make_square_episode, square_features

CPU = torch.device("cpu")


def _net(**dynamics: object) -> tuple[WorldModelNet, DynamicsConfig]:
    features = square_features()
    base = preset_config("tiny", features)
    model = base.model_copy(update={"dynamics": base.dynamics.model_copy(update=dynamics)})
    torch.manual_seed(0)
    return WorldModelNet(model, features), model.dynamics


def _data() -> TrainingData:
    return TrainingData.from_episodes([make_square_episode(i, 8) for i in range(2)], square_features())


def _task(net: WorldModelNet, dyn: DynamicsConfig, data: TrainingData, **stage: object):
    train, val = data.split(0.5, seed=0)
    norm = Normalizer(fit_normalization(data.features), CPU)
    return dynamics_task(net, train, val, StageConfig(batch_size=2, **stage), norm, CPU, window=5, dyn=dyn,
                         seed=0, make_world_model=lambda: None)


def test_fed_back_phase_starts_by_progress_not_step_count() -> None:
    """A time-limited run that stops long before `feedback_start * steps` still trains on its
    own samples once its progress (time used) passes feedback_start."""
    net, dyn = _net()
    task = _task(net, dyn, _data(), steps=10_000, feedback_prob=1.0, feedback_start=0.3)
    _, early = task.loss(5, 0.1, TrainRNG.seeded(0))
    _, late = task.loss(5, 0.5, TrainRNG.seeded(0))
    assert early["feedback"] == 0.0 and late["feedback"] == 1.0


def test_learning_rate_continues_across_resumes() -> None:
    """Resuming a time-limited run continues from the progress it had reached: the learning rate
    stays annealed instead of jumping back to its peak."""
    cfg = StageConfig(steps=6000, lr=1e-3, warmup=0, decay_fraction=0.2)
    first = session_progress(cfg, 1600, elapsed_s=1800, time_limit_s=1800, resumed_at=0.0)
    assert first == 1.0 and learning_rate(cfg, 1600, first) == pytest.approx(1e-4)
    resumed = session_progress(cfg, 1601, elapsed_s=0, time_limit_s=5700, resumed_at=first)
    assert learning_rate(cfg, 1601, resumed) == pytest.approx(1e-4)
    # halfway: a resume spreads what is left of the schedule over its own time limit
    mid = session_progress(cfg, 100, elapsed_s=0, time_limit_s=60, resumed_at=0.5)
    assert mid == 0.5
    assert session_progress(cfg, 100, elapsed_s=30, time_limit_s=60, resumed_at=0.5) == pytest.approx(0.75)
    assert session_progress(cfg, 3000, elapsed_s=0, time_limit_s=None, resumed_at=0.2) == 0.5


def test_latent_cache_encodes_each_frame_once() -> None:
    net, _ = _net()
    data = _data()
    calls: list[int] = []
    encode = net.encode
    net.encode = lambda images: calls.append(len(images)) or encode(images)  # type: ignore[method-assign]
    cache = LatentCache(net, data, CPU)
    first = cache(np.array([[0, 1, 2], [1, 2, 3]]))
    again = cache(np.array([[2, 3, 4]]))
    assert calls == [4, 1]  # frames 0-3, then only frame 4
    with torch.no_grad():
        direct = encode(to_images(data.frames[torch.tensor([2, 3, 4])]))
    torch.testing.assert_close(again[0], direct)
    torch.testing.assert_close(first[1, 1:], again[0, :2])


class _ZeroRNG(TrainRNG):
    """Zero noise: the flow head's one step from noise becomes deterministic on both paths."""

    def __init__(self) -> None:
        super().__init__(np.random.default_rng(0), torch.Generator())

    def randn(self, *shape: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(*shape, device=device)


@pytest.mark.parametrize("head,recency", [("flow", False), ("regression", True)])
def test_training_samples_equal_inference_steps(head: str, recency: bool) -> None:
    """What the trainer feeds back (all targets of a window in one pass) equals what
    WorldModel.reset + step predicts, frame by frame: training trains the path inference runs."""
    features = square_features()
    base = preset_config("tiny", features)
    dyn = base.dynamics.model_copy(update={"head": head, "recency": recency})
    wm = WorldModel.random(features, config=base.model_copy(update={"dynamics": dyn}), precision="fp32")
    data = _data()
    frames, actions = data.frames[None, :5], data.actions[None, :5]  # (1, 5, V, H, W, 3)
    with torch.no_grad():
        trained = sample_next(wm.net, wm.encode(frames), wm.norm.action(torch.from_numpy(actions)),
                              _ZeroRNG(), dyn)  # (1, 4, V, C, h, w): frames 1..4
    for i in range(4):
        wm.reset(frames[:, : i + 1], actions=actions[:, :i]) if i else wm.reset(frames[:, 0])
        wm._noise = lambda *shape: torch.zeros(1, *shape)  # type: ignore[assignment]
        wm.step(actions[:, i])
        torch.testing.assert_close(wm._z, trained[:, i], atol=1e-5, rtol=1e-4)


def test_regression_head_trains_on_normalised_prediction() -> None:
    net, dyn = _net(head="regression", recency=True)
    with torch.no_grad():  # the zero-initialised output conv would stop every gradient before it
        net.dynamics.out[2].weight.normal_(0, 0.1)
    task = _task(net, dyn, _data(), feedback_prob=1.0, feedback_start=0.0, feedback_depth=3)
    loss, logs = task.loss(0, 1.0, TrainRNG.seeded(0))
    loss.backward()
    assert logs["feedback"] == 1.0 and 0 < loss.item() < 4  # unit vectors: squared error <= 4
    stem = net.dynamics.tgt_stem.weight.grad
    assert stem is not None and stem[:, 10:14].abs().sum() > 0  # the recency channels (after x_t, z_prev, y, x) learn


def test_train_config_accepts_recipe_overrides() -> None:
    cfg = TrainConfig.model_validate({"model": {"dynamics": {"head": "regression", "recency": True}},
                                      "dynamics": {"feedback_depth": 4}})
    assert cfg.model is not None and cfg.model.dynamics.head == "regression"
    assert cfg.dynamics.feedback_depth == 4


def test_object_weight_trains() -> None:
    net, dyn = _net()
    task = _task(net, dyn, _data(), object_weight=5.0)
    loss, _ = task.loss(0, 0.0, TrainRNG.seeded(0))
    loss.backward()
    assert torch.isfinite(loss) and net.dynamics.out[2].weight.grad.abs().sum() > 0


def test_rollout_buffer_slides_onto_its_own_predictions_and_restarts() -> None:
    """An entry advances one frame per use onto the frame predicted after it; it restarts from
    real latents after max_depth generated frames, or at its episode's end."""
    from sim_model.train.rollout_buffer import RolloutBuffer

    net, _ = _net()
    data = TrainingData.from_episodes([make_square_episode(i, 12) for i in range(2)], square_features())
    train, _ = data.split(0.5, seed=0)
    first = int(np.concatenate([[0], data.ends])[train.episodes[0]])  # the training episode's frame 0
    latents = LatentCache(net, data, CPU)
    buffer = RolloutBuffer(train, size=1, length=5, max_depth=3, latents=latents, rng=np.random.default_rng(0))
    torch.testing.assert_close(buffer.src, latents(buffer.idx))
    made: list[torch.Tensor] = []

    def predict(src: torch.Tensor, idx: np.ndarray) -> torch.Tensor:
        made.append(torch.randn(len(src), *src.shape[2:]))
        return made[-1]

    start = first + np.arange(5)[None]
    buffer.idx[:], buffer.src[:] = start, latents(start)
    for step in range(1, 4):
        buffer.advance(np.array([0]), predict, np.random.default_rng(step))
        np.testing.assert_array_equal(buffer.idx, start + step)
        assert buffer.depth[0] == step
        torch.testing.assert_close(buffer.src[0, -step:], torch.cat(made[-step:]))  # generated frames
        torch.testing.assert_close(buffer.src[0, : 5 - step], latents(start[0, step:]))  # slid real ones
    buffer.advance(np.array([0]), predict, np.random.default_rng(9))  # max_depth reached: restart
    assert buffer.depth[0] == 0 and len(made) == 3
    torch.testing.assert_close(buffer.src, latents(buffer.idx))

    last = first + 7 + np.arange(5)[None]  # the episode's last window (frames 7..11)
    buffer.idx[:], buffer.src[:] = last, latents(last)
    buffer.advance(np.array([0]), predict, np.random.default_rng(10))
    assert buffer.depth[0] == 0 and len(made) == 3  # restarted, nothing predicted past the end


def test_a_window_s_predictions_never_see_its_last_frame() -> None:
    """The rollout buffer predicts the frame after a window by shifting it one frame and putting
    a placeholder last: no prediction may depend on that placeholder (causal context)."""
    net, dyn = _net(head="regression", recency=True)
    data = _data()
    idx = np.arange(5)[None]
    z = LatentCache(net, data, CPU)(idx)
    a = torch.randn(1, 5, 2)
    other = z.clone()
    other[:, -1] = torch.nn.functional.normalize(torch.randn_like(z[:, -1]), dim=-3)
    with torch.no_grad():
        torch.testing.assert_close(sample_next(net, z, a, TrainRNG.seeded(0), dyn),
                                   sample_next(net, other, a, TrainRNG.seeded(0), dyn))


def test_rollout_buffer_trains_on_deep_contexts() -> None:
    """Fed-back batches take rollout_share of their windows from the buffer; those entries roll
    one frame deeper at each use, and the loss still reaches the dynamics."""
    net, dyn = _net(head="regression", recency=True)
    with torch.no_grad():
        net.dynamics.out[2].weight.normal_(0, 0.1)
    data = TrainingData.from_episodes([make_square_episode(i, 30) for i in range(2)], square_features())
    task = _task(net, dyn, data, feedback_prob=1.0, feedback_start=0.0, rollout_buffer=1,
                 rollout_share=0.5, rollout_depth=100)
    rng = TrainRNG.seeded(0)
    depths = []
    for step in range(4):
        loss, logs = task.loss(step, 0.5, rng)
        depths.append(logs["rollout_depth"])
    loss.backward()
    assert depths == [0.0, 1.0, 2.0, 3.0]  # one entry, one frame deeper per use (30-frame episodes)
    assert torch.isfinite(loss) and net.dynamics.out[2].weight.grad.abs().sum() > 0
    _, logs = _task(net, dyn, data, feedback_prob=1.0, feedback_start=0.0).loss(0, 0.5, rng)
    assert "rollout_depth" not in logs  # off by default
