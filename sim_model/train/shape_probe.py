"""Object supervision on predicted latents (dynamics stage, `shape_weight`): a frozen probe reads
where the objects are off each latent, and the dynamics is asked to predict latents whose
objects are where, and shaped as, the real next latent's.

The probe is linear in the latent's channels, one map shared by every cell and view, fitted once
at the stage's start by ridge regression on the autoencoder's latents of real frames against
their foreground cells (pixels far from the dataset's median frame, sim_model.train.objects).
It is fitted from the data and the stage's seed alone, so a resumed run refits the same probe;
it has no weights to save and nothing of it reaches inference.

The loss, on every predicted latent (fed-back ones included, so the gradient reaches the
dynamics through what it generated):
  mask  - the squared difference of the probe's masks of the prediction and of the real latent;
  shape - per view, the masks' area and the two eigenvalues of their second central moments
          (a rigid body pushed across the table keeps them; a bent or fading one does not),
          as relative differences.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from sim_model.train.data import DataView
from sim_model.train.latent_cache import LatentCache

log = logging.getLogger(__name__)

RIDGE = 1e-3  # ridge penalty per sample, relative to the features' scale (unit-norm latents)


@dataclass(frozen=True)
class ShapeProbe:
    """A linear read-out of foreground cells: mask = clamp(z . weight + bias, 0, 1) per cell."""

    weight: torch.Tensor  # (C,)
    bias: float

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        """Latents (..., C, h, w) -> soft masks (..., h, w) in [0, 1]."""
        mask = torch.einsum("...chw,c->...hw", z.float(), self.weight.to(z.device)) + self.bias
        return mask.clamp(0.0, 1.0)

    def correlation(self, z: torch.Tensor, fg: torch.Tensor) -> float:
        """Pearson r of the probe's masks of latents z (..., C, h, w) with foreground cells fg
        (..., 1, h, w): how well it reads the objects."""
        pairs = torch.stack([self(z).flatten(), fg.float().flatten().to(z.device)])
        return float(torch.corrcoef(pairs)[0, 1])


def fit_probe(latents: LatentCache, view: DataView, rng: np.random.Generator,
              frames: int = 1024) -> ShapeProbe:
    """Ridge regression of foreground cells on latent channels over `frames` random frames."""
    idx = view.window_indices(rng, frames, 1)[:, 0]
    z = latents(idx).float()  # (N, V, C, h, w)
    fg = latents.foreground(idx).float().to(z.device)  # (N, V, 1, h, w)
    channels = z.shape[-3]
    x = z.movedim(-3, -1).reshape(-1, channels)
    x = torch.cat([x, torch.ones(len(x), 1, device=x.device)], 1)
    y = fg.movedim(-3, -1).reshape(-1, 1)
    gram = x.T @ x + RIDGE * len(x) * torch.eye(channels + 1, device=x.device)
    solution = torch.linalg.solve(gram, x.T @ y)[:, 0]
    probe = ShapeProbe(weight=solution[:channels].cpu(), bias=float(solution[channels]))
    log.info("shape probe fitted on %d frames: Pearson r %.3f with their foreground cells (%.1f %% of cells)",
             len(idx), probe.correlation(z, fg), 100 * float(fg.mean()))
    return probe


def moments(mask: torch.Tensor) -> torch.Tensor:
    """Soft masks (..., h, w) -> (..., 3): area (cells) and the two eigenvalues of the second
    central moments (cells^2), larger first; zero moments for an empty mask."""
    h, w = mask.shape[-2:]
    rows = torch.arange(h, device=mask.device, dtype=mask.dtype)[:, None].expand(h, w)
    cols = torch.arange(w, device=mask.device, dtype=mask.dtype)[None, :].expand(h, w)
    area = mask.sum((-2, -1))
    safe = area.clamp_min(1e-3)
    mean_r = (mask * rows).sum((-2, -1)) / safe
    mean_c = (mask * cols).sum((-2, -1)) / safe
    dr = rows - mean_r[..., None, None]
    dc = cols - mean_c[..., None, None]
    srr = (mask * dr * dr).sum((-2, -1)) / safe
    scc = (mask * dc * dc).sum((-2, -1)) / safe
    src = (mask * dr * dc).sum((-2, -1)) / safe
    half_trace = (srr + scc) / 2
    spread = torch.sqrt(((srr - scc) / 2).pow(2) + src.pow(2) + 1e-8)
    return torch.stack([area, half_trace + spread, half_trace - spread], -1)


def shape_loss(probe: ShapeProbe, predicted: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """The probe's loss of predicted latents against the real ones (both (..., C, h, w)): the
    masks' squared difference plus the relative differences of their area and moments."""
    pred_mask = probe(predicted)
    with torch.no_grad():
        true_mask = probe(target)
        true_moments = moments(true_mask)
    mask = (pred_mask - true_mask).pow(2).mean()
    scale = true_moments.clamp_min(1.0)  # cells; keeps nearly empty views from dominating
    shape = ((moments(pred_mask) - true_moments) / scale).pow(2).mean()
    return mask + shape, {"probe_mask": float(mask.detach()), "probe_shape": float(shape.detach())}
