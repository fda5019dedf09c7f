"""Training configs: one `TrainConfig` per run directory, with a `StageConfig` per stage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sim_model.config import ModelConfig

Stage = Literal["autoencoder", "dynamics", "decoder-finetune"]
STAGES: tuple[Stage, ...] = ("autoencoder", "dynamics", "decoder-finetune")


class StageConfig(BaseModel):
    """Optimisation settings of one stage."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=1000, ge=1, description="Total optimiser steps (resume continues to this).")
    batch_size: int = Field(default=16, ge=1, description="Samples per step (frames or windows).")
    lr: float = Field(default=3e-4, gt=0, description="Peak AdamW learning rate.")
    weight_decay: float = Field(default=0.01, ge=0, description="AdamW weight decay.")
    warmup: int = Field(default=100, ge=0, description="Linear warm-up steps.")
    decay_fraction: float = Field(default=0.2, ge=0, le=1,
                                  description="Final fraction of steps with linear decay to 10% lr.")
    grad_clip: float = Field(default=1.0, gt=0, description="Gradient-norm clip.")
    ema: float = Field(default=0.0, ge=0, lt=1,
                       description="Decay of an exponential moving average of the trained weights, "
                       "e.g. 0.999 (0 = off). With it the stage exports the average, and the last "
                       "weights beside it in <stage>/model_last/; validation scores the last weights.")
    val_every: int = Field(default=200, ge=1, description="Steps between validation passes.")
    val_batches: int = Field(default=4, ge=1, description="Batches per validation pass (fixed draws).")
    sample_every: int = Field(default=1000, ge=1, description="Steps between sample PNGs.")
    checkpoint_every: int = Field(default=500, ge=1, description="Steps between resumable checkpoints.")
    # dynamics
    fresh_dynamics: bool = Field(default=False,
                                 description="Dynamics with --init-from: take only the checkpoint's "
                                 "autoencoder (encoder, decoder, state head) and start the dynamics from "
                                 "scratch with the run's architecture (the config's `model.dynamics` on top "
                                 "of the checkpoint's): an architecture arm on a frozen autoencoder.")
    window: int | None = Field(default=None, ge=2,
                               description="Frames per training window; default context + 1.")
    feedback_prob: float = Field(default=0.5, ge=0, le=1,
                                 description="Dynamics: share of batches whose context is replaced by "
                                 "the model's own one-step samples (fed-back training).")
    feedback_start: float = Field(default=0.3, ge=0, le=1,
                                  description="Dynamics: fraction of the stage's progress (steps or time "
                                  "limit, whichever is further) before fed-back batches start.")
    feedback_depth: int = Field(default=1, ge=1, le=8,
                                description="Dynamics: fed-back passes per fed-back batch; after k passes a "
                                "frame has been generated up to k steps deep from real context.")
    motion_weight: float = Field(default=10.0, ge=0,
                                 description="Dynamics: extra loss weight per unit of latent change "
                                 "between consecutive frames (0 = plain MSE).")
    object_weight: float = Field(default=0.0, ge=0,
                                 description="Dynamics: extra loss weight on latent cells that show an "
                                 "object (pixels far from the dataset's median frame) in the target or "
                                 "the frame before it (0 = off). Autoencoder and decoder fine-tune: "
                                 "extra loss weight on object pixels (grown by two pixels) of the "
                                 "decoded frame.")
    shape_weight: float = Field(default=0.0, ge=0,
                                description="Dynamics: weight of the object supervision on predicted "
                                "latents (0 = off): a frozen linear probe reads foreground cells off each "
                                "prediction and of the real latent; their masks, areas and second moments "
                                "must agree (sim_model/train/shape_probe.py). Training only.")
    rollout_buffer: int = Field(default=0, ge=0,
                                description="Dynamics: windows kept rolling on the model's own "
                                "predictions across steps (0 = off). Their context is generated as deep "
                                "as at inference, not only `feedback_depth` steps; see RolloutBuffer.")
    rollout_share: float = Field(default=0.5, ge=0, le=1,
                                 description="Dynamics: share of each fed-back batch drawn from the "
                                 "rollout buffer (with rollout_buffer > 0).")
    rollout_depth: int = Field(default=200, ge=1,
                               description="Dynamics: frames a buffer window may roll on its own "
                               "predictions before it restarts from real frames.")
    # decoder fine-tune
    latent_noise: float = Field(default=0.1, ge=0,
                                description="Decoder: std of noise added to latents before re-projection.")
    dynamics_latent_prob: float = Field(default=0.5, ge=0, le=1,
                                        description="Decoder fine-tune: share of batches decoded from the "
                                        "dynamics' own predicted latents instead of encoded ones.")


class TrainConfig(BaseModel):
    """Everything a run directory was trained with; stored as OUT/train_config.json."""

    model_config = ConfigDict(extra="forbid")

    preset: str = Field(default="small", description="Size preset of the model.")
    model: ModelConfig | None = Field(default=None, description="Explicit architecture; overrides the preset.")
    seed: int = Field(default=0, ge=0, description="Seed of initialisation, data order and noise.")
    val_fraction: float = Field(default=0.05, ge=0, lt=1, description="Share of episodes held out "
                                "for validation (at least one episode when there are two or more).")
    bf16: Literal["auto", "on", "off"] = Field(default="auto", description="bf16 autocast in training; "
                                               "auto = on for CUDA and CPUs with AMX/AVX512-BF16.")
    autoencoder: StageConfig = Field(default_factory=StageConfig)
    dynamics: StageConfig = Field(default_factory=StageConfig)
    decoder_finetune: StageConfig = Field(default_factory=StageConfig)

    def stage(self, name: Stage) -> StageConfig:
        return getattr(self, name.replace("-", "_"))


_PRESET_STAGES: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "autoencoder": {"steps": 300, "batch_size": 16, "lr": 2e-3, "warmup": 20, "val_every": 50,
                        "sample_every": 150, "checkpoint_every": 100},
        "dynamics": {"steps": 300, "batch_size": 8, "lr": 2e-3, "warmup": 20, "val_every": 50,
                     "sample_every": 150, "checkpoint_every": 100},
        "decoder_finetune": {"steps": 100, "batch_size": 16, "lr": 5e-4, "warmup": 10, "val_every": 50,
                             "sample_every": 100, "checkpoint_every": 50},
    },
    "small": {  # ~300 episodes x 200 steps at 96x96 on 2 CPU cores: ~1.5-2 h for all stages
        "autoencoder": {"steps": 1500, "batch_size": 16, "lr": 1e-3, "warmup": 100, "val_every": 250,
                        "sample_every": 500, "checkpoint_every": 250, "latent_noise": 0.05},
        "dynamics": {"steps": 2500, "batch_size": 4, "lr": 5e-4, "warmup": 200, "val_every": 250,
                     "sample_every": 500, "checkpoint_every": 250},
        "decoder_finetune": {"steps": 500, "batch_size": 16, "lr": 2e-4, "warmup": 50, "val_every": 250,
                             "sample_every": 250, "checkpoint_every": 250},
    },
    "paper": {
        "autoencoder": {"steps": 100_000, "batch_size": 64, "lr": 2e-4, "warmup": 1000,
                        "val_every": 1000, "sample_every": 5000, "checkpoint_every": 2000},
        "dynamics": {"steps": 200_000, "batch_size": 32, "lr": 1e-4, "warmup": 1000,
                     "val_every": 1000, "sample_every": 5000, "checkpoint_every": 2000},
        "decoder_finetune": {"steps": 20_000, "batch_size": 64, "lr": 5e-5, "warmup": 500,
                             "val_every": 1000, "sample_every": 5000, "checkpoint_every": 2000},
    },
}


def default_train_config(preset: str) -> dict[str, Any]:
    """The preset's stage settings as a plain dict (a config file is merged over it)."""
    stages = _PRESET_STAGES.get(preset, _PRESET_STAGES["small"])
    return {"preset": preset, **{name: dict(values) for name, values in stages.items()}}


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict update: nested mappings merge, everything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
