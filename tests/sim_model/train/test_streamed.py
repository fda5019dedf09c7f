"""Training on frames streamed from the store through a bounded cache (`--cache-mb`): the same
frames, the same hash and the same training as loading everything, from a local or s3:// store,
with the cache never above its budget."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from pipeline.cli import main as iws
from schemas.errors import SpecError
from sim_model.data.store import EpisodeStore
from sim_model.train import train_stage
from sim_model.train.data import TrainingData
from sim_model.train.frames import BLOCK, StreamedFrames
from tests.fixtures.model import make_square_episode, square_features
from tests.fixtures.s3 import S3Bucket

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FAST = {"val_every": 5, "sample_every": 1000, "checkpoint_every": 1000, "val_batches": 1, "warmup": 2}
FRAME = 16 * 16 * 3


def test_streamed_frames_equal_loaded_ones_within_the_budget(moving_squares_store) -> None:
    loaded = TrainingData.from_store(moving_squares_store)
    budget_mb = 3 * BLOCK * FRAME / 2**20  # three blocks of the 30 the store holds
    streamed = TrainingData.from_store(moving_squares_store, cache_mb=budget_mb)
    frames = streamed.frames
    assert isinstance(frames, StreamedFrames) and frames.shape == tuple(loaded.frames.shape)
    assert len(frames) == 240 and streamed.cache_bytes == int(budget_mb * 2**20)
    rng = np.random.default_rng(0)
    for shape in [(5,), (3, 7), (2, 2, 4)]:  # frame batches, windows, anything else
        idx = torch.from_numpy(rng.integers(0, len(frames), shape))
        assert torch.equal(frames[idx], loaded.frames[idx])
        assert frames.cached_bytes <= streamed.cache_bytes
    window = torch.arange(18, 29)  # crosses episode 0's end (20) and two blocks
    assert torch.equal(frames[window], loaded.frames[window])
    assert streamed.data_hash() == loaded.data_hash()  # the provenance of either run agrees
    np.testing.assert_array_equal(streamed.actions, loaded.actions)
    with pytest.raises(IndexError, match="out of range"):
        frames[torch.tensor([240])]


def test_cache_hits_are_not_read_again(moving_squares_store) -> None:
    frames = TrainingData.from_store(moving_squares_store, cache_mb=1.0).frames  # room for all
    assert isinstance(frames, StreamedFrames)
    frames[torch.arange(0, 20)]  # episode 0: blocks 0..7, 8..15, 16..19
    assert frames.reads == 3
    frames[torch.arange(2, 17)]
    assert frames.reads == 3
    frames[torch.tensor([20])]  # episode 1 starts its own blocks
    assert frames.reads == 4


def test_a_cache_size_must_be_positive(moving_squares_store, tmp_path, capsys) -> None:
    with pytest.raises(SpecError, match="positive"):
        TrainingData.from_store(moving_squares_store, cache_mb=0)
    assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
                str(tmp_path / "run"), "--cache-mb", "-1"]) == 2
    assert "positive size in MiB" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything was written


def _train(store: Path | str, out: Path, cache_mb: float | None) -> None:
    config = out.parent / f"{out.name}.json"
    config.write_text(json.dumps({"preset": "tiny",
                                  "autoencoder": {**FAST, "steps": 10, "batch_size": 8},
                                  "dynamics": {**FAST, "steps": 10, "batch_size": 4}}))
    for stage in ("autoencoder", "dynamics"):
        train_stage(stage, store, out, config_file=str(config), progress=False, cache_mb=cache_mb)


def test_training_on_streamed_frames_matches_loaded_frames(moving_squares_store, tmp_path) -> None:
    """The autoencoder sees the same frames: bit-identical weights. The dynamics' latent cache
    holds 60 of 240 frames here, so frames are encoded again after eviction (in other batches,
    so to float rounding)."""
    _train(moving_squares_store, tmp_path / "loaded", None)
    # latent rows are 4 bytes x C x h x w: 4 x 4 x 4 x 4 = 256 B at 16x16 with 4 channels
    _train(moving_squares_store, tmp_path / "streamed", 60 * 256 / 2**20)
    a = load_file(tmp_path / "loaded/autoencoder/state/weights.safetensors")
    b = load_file(tmp_path / "streamed/autoencoder/state/weights.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    a = load_file(tmp_path / "loaded/dynamics/state/weights.safetensors")
    b = load_file(tmp_path / "streamed/dynamics/state/weights.safetensors")
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5)
    config = json.loads((tmp_path / "streamed/model/config.json").read_text())
    hashes = {s["data_hash"] for s in config["provenance"]["stages"]}
    loaded = json.loads((tmp_path / "loaded/model/config.json").read_text())
    assert hashes == {s["data_hash"] for s in loaded["provenance"]["stages"]}


def test_a_latent_cache_smaller_than_one_batch_is_refused(moving_squares_store, tmp_path) -> None:
    with pytest.raises(SpecError, match="--cache-mb"):
        _train(moving_squares_store, tmp_path / "tiny", 10 * 256 / 2**20)  # 10 rows; a batch draws ~20


@pytest.mark.slow
def test_streams_frames_from_s3(s3_env: S3Bucket, tmp_path) -> None:
    url = s3_env.url("squares.zarr")
    store = EpisodeStore.create(url, square_features())
    for index in range(4):
        store.append(make_square_episode(index, 20))
    streamed = TrainingData.from_store(url, cache_mb=0.05)
    local = TrainingData.from_store(url)
    idx = torch.from_numpy(np.random.default_rng(1).integers(0, 80, (6, 5)))
    assert torch.equal(streamed.frames[idx], local.frames[idx])
    assert streamed.data_hash() == local.data_hash()


def test_the_next_steps_draws_are_predicted_for_prefetching() -> None:
    from sim_model.train.parallel import shard_rng
    from sim_model.train.state import TrainRNG

    rng = TrainRNG.seeded(0)
    rng.numpy.integers(0, 100, 8)  # this step's draw
    predicted = rng.next_numpy().integers(0, 100, 8)
    assert np.array_equal(predicted, rng.numpy.integers(0, 100, 8))  # one stream: a copy
    shard = shard_rng(3, 5, 1)
    assert np.array_equal(shard.next_numpy().integers(0, 100, 8),
                          shard_rng(3, 6, 1).numpy.integers(0, 100, 8))  # per step: the next step's own


def test_a_step_finds_its_frames_prefetched_by_the_step_before(moving_squares_store) -> None:
    import time

    from sim_model.normalize import Normalizer
    from sim_model.train.autoencoder import autoencoder_task
    from sim_model.train.config import StageConfig
    from sim_model.train.state import TrainRNG
    from sim_model.world_model import WorldModel

    # A cache of one block: prefetched blocks must wait for their batch outside the LRU cache
    # (the stage prefetches the next step before it reads its own frames).
    data = TrainingData.from_store(moving_squares_store, cache_mb=BLOCK * FRAME / 2**20)
    frames = data.frames
    assert isinstance(frames, StreamedFrames) and frames.capacity == 1
    model = WorldModel.random(data.features, preset="tiny", seed=0)
    train, val = data.split(0.1, 0)
    cfg = StageConfig(batch_size=8, val_batches=1)
    task = autoencoder_task(model.net, train, val, cfg, Normalizer(model.config.normalization, torch.device("cpu")),
                            torch.device("cpu"), 1, seed=0)
    rng = TrainRNG.seeded(0)

    def settle() -> None:
        deadline = time.monotonic() + 10
        while frames._pending and time.monotonic() < deadline:
            time.sleep(0.01)

    task.loss(0, 0.0, rng)  # reads its own frames, starts reading step 1's
    settle()
    for step in (1, 2, 3):
        before = frames.misses
        task.loss(step, 0.0, rng)
        assert frames.misses == before, f"step {step} had to read frames itself"
        settle()
