"""Stage 3: fine-tune the decoder on imperfect latents so it tolerates the dynamics' errors.

Half the batches (dynamics_latent_prob) decode the dynamics' own one-step predictions of real
windows back to the real frames; the rest decode encoded latents with small added noise.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sim_model.config import DynamicsConfig
from sim_model.nn.world import WorldModelNet
from sim_model.normalize import Normalizer
from sim_model.train.config import StageConfig
from sim_model.train.data import DataView
from sim_model.train.decoder_loss import batch_images, decoder_loss, fixed_noise, perturb_latent
from sim_model.train.dynamics import sample_next
from sim_model.train.images import psnr, save_grid
from sim_model.train.latent_cache import LatentCache
from sim_model.train.objects import median_background, pixel_weights
from sim_model.train.state import TrainRNG
from sim_model.train.task import Logs, StageTask


def finetune_task(net: WorldModelNet, train: DataView, val: DataView, cfg: StageConfig,
                  norm: Normalizer, device: torch.device, *, window: int, dyn: DynamicsConfig,
                  decode_steps: int, seed: int) -> StageTask:
    data = train.data
    latents = LatentCache(net, data, device)
    background = median_background(data) if cfg.object_weight else None
    per_window = window - 1
    n_windows = max(1, cfg.batch_size // per_window)

    def predicted(idx: np.ndarray, rng: TrainRNG) -> tuple[torch.Tensor, torch.Tensor]:
        """Dynamics latents of frames 1..L-1 of windows idx (B, L) and those real frames."""
        x = batch_images(data, idx[:, 1:], device)  # (B, L-1, V, 3, H, W)
        a = norm.action(torch.from_numpy(data.actions[idx]).to(device))
        with torch.no_grad():
            z_hat = sample_next(net, latents(idx), a, rng, dyn)
        return z_hat.flatten(0, 1), x.flatten(0, 1)

    def losses(rng: TrainRNG, from_dynamics: bool, view: DataView) -> torch.Tensor:
        if from_dynamics:
            windows = view.window_indices(rng.numpy, n_windows, window)
            z, x0 = predicted(windows, rng)
            targets = windows[:, 1:].reshape(-1)
        else:
            targets = view.frame_indices(rng.numpy, cfg.batch_size)
            x0 = batch_images(data, targets, device)
            z = perturb_latent(latents(targets), cfg.latent_noise, rng)
        return decoder_loss(net, x0, z, rng, pixel_weights(data, targets, background, cfg.object_weight, device))

    def loss(step: int, progress: float, rng: TrainRNG) -> tuple[torch.Tensor, Logs]:
        from_dynamics = float(rng.rand(1, device=torch.device("cpu"))) < cfg.dynamics_latent_prob
        return losses(rng, from_dynamics, train), {"from_dynamics": float(from_dynamics)}

    def validate() -> Logs:
        rng = TrainRNG.seeded(seed + 2)
        total = {True: 0.0, False: 0.0}
        for _ in range(cfg.val_batches):
            for flag in total:
                total[flag] += losses(rng, flag, val).item() / cfg.val_batches
        z, x0 = predicted(val.window_indices(np.random.default_rng(seed + 1), n_windows, window), rng)
        rec = net.decode(z, fixed_noise(seed + 3, len(z), device), decode_steps)
        return {"val_loss": (total[True] + total[False]) / 2, "val_loss_dynamics": total[True],
                "val_loss_encoded": total[False], "val_h1_psnr": psnr(rec, x0)}

    def samples(path: Path) -> None:
        rng = TrainRNG.seeded(seed + 4)
        z, x0 = predicted(val.window_indices(np.random.default_rng(seed + 1), 1, window), rng)
        save_grid([x0, net.decode(z, fixed_noise(seed + 3, len(z), device), decode_steps)], path)

    return StageTask("decoder-finetune", list(net.decoder.parameters()), loss, validate, samples)

