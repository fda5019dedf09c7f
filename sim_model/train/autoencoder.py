"""Stage 1: encoder + consistency decoder (+ state head) on single frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sim_model.nn.world import WorldModelNet
from sim_model.normalize import Normalizer
from sim_model.train.config import StageConfig
from sim_model.train.data import DataView
from sim_model.train.decoder_loss import batch_images, decoder_loss, fixed_noise, perturb_latent
from sim_model.train.frames import StreamedFrames
from sim_model.train.images import psnr, save_grid
from sim_model.train.objects import median_background, pixel_weights
from sim_model.train.state import TrainRNG
from sim_model.train.task import Logs, StageTask


def autoencoder_task(net: WorldModelNet, train: DataView, val: DataView, cfg: StageConfig,
                     norm: Normalizer, device: torch.device, decode_steps: int, seed: int) -> StageTask:
    data = train.data
    params = [*net.encoder.parameters(), *net.decoder.parameters()]
    if net.state_head is not None:
        params += list(net.state_head.parameters())
    background = median_background(data) if cfg.object_weight else None

    def losses(idx: np.ndarray, rng: TrainRNG) -> tuple[torch.Tensor, Logs]:
        x0 = batch_images(data, idx, device)
        z = net.encode(x0)
        rec = decoder_loss(net, x0, perturb_latent(z, cfg.latent_noise, rng), rng,
                           pixel_weights(data, idx, background, cfg.object_weight, device))
        logs = {"rec": rec.item()}
        loss = rec
        if net.state_head is not None and data.states is not None:
            target = norm.state(torch.from_numpy(data.states[idx]).to(device))
            predicted = net.state(z)
            assert predicted is not None
            state_loss = torch.nn.functional.mse_loss(predicted, target)
            logs["state"] = state_loss.item()
            loss = loss + 0.1 * state_loss
        return loss, logs

    def loss(step: int, progress: float, rng: TrainRNG) -> tuple[torch.Tensor, Logs]:
        idx = train.frame_indices(rng.numpy, cfg.batch_size)
        if isinstance(data.frames, StreamedFrames):  # the next step's frames, read meanwhile
            data.frames.prefetch(train.frame_indices(rng.next_numpy(), cfg.batch_size))
        return losses(idx, rng)

    val_idx = val.frame_indices(np.random.default_rng(seed + 1), cfg.val_batches * cfg.batch_size)

    def validate() -> Logs:
        rng = TrainRNG.seeded(seed + 2)
        totals: dict[str, float] = {}
        for chunk in np.array_split(val_idx, cfg.val_batches):
            _, logs = losses(chunk, rng)
            for key, value in logs.items():
                totals[key] = totals.get(key, 0.0) + value / cfg.val_batches
        x0 = batch_images(data, val_idx[: cfg.batch_size], device)
        rec = net.decode(net.encode(x0), fixed_noise(seed + 3, len(x0), device), decode_steps)
        return {"val_loss": totals.pop("rec"), **{f"val_{k}": v for k, v in totals.items()},
                "val_psnr": psnr(rec, x0)}

    def samples(path: Path) -> None:
        x0 = batch_images(data, val_idx[:8], device)
        rec = net.decode(net.encode(x0), fixed_noise(seed + 3, len(x0), device), decode_steps)
        save_grid([x0, rec], path)

    return StageTask("autoencoder", params, loss, validate, samples)

