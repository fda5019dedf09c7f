"""Pydantic configs of the world model and its checkpoint, and the size presets.

A checkpoint's config.json is one `CheckpointConfig`; it is validated on load so a
hand-edited or foreign file fails with a message naming the field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas import FeatureSpec

FORMAT_VERSION = 1
Precision = Literal["auto", "fp32", "bf16"]
PresetName = Literal["tiny", "small", "paper"]


class AutoencoderConfig(BaseModel):
    """CNN encoder to a unit-norm latent (4 ch at H/4 x W/4 per view) + consistency decoder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latent_channels: int = Field(default=4, gt=0, description="Channels per latent pixel (unit norm).")
    encoder_channels: tuple[int, ...] = Field(
        default=(16, 32), min_length=2, max_length=2,
        description="Encoder widths at H/2 and H/4 (two stride-2 stages).")
    decoder_channels: tuple[int, ...] = Field(
        default=(16, 32, 64), min_length=2,
        description="Decoder U-Net widths per level, from full resolution down.")
    decoder_blocks: int = Field(default=1, ge=1, description="Residual blocks per decoder level.")
    cond_dim: int = Field(default=64, gt=0, description="Width of the time/view embedding (FiLM input).")
    decode_steps: int = Field(default=1, ge=1, le=8,
                              description="Consistency steps at inference (1-3 reach a clean frame).")
    state_hidden: int = Field(default=64, gt=0, description="Hidden width of the proprioceptive-state head.")


class DynamicsConfig(BaseModel):
    """Latent dynamics: U-Net per frame with causal temporal attention, FiLM actions, flow head."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    context: int = Field(default=9, ge=1, description="Past latents the causal attention sees.")
    channels: tuple[int, ...] = Field(default=(32, 64), min_length=1,
                                      description="U-Net widths per level, from latent resolution down.")
    blocks: int = Field(default=1, ge=1, description="Residual blocks per level.")
    heads: int = Field(default=2, ge=1, description="Attention heads (temporal and spatial).")
    spatial_layers: int = Field(default=1, ge=0,
                                description="Global spatial transformer layers at the bottleneck "
                                "(all views' tokens attend to each other).")
    cond_dim: int = Field(default=64, gt=0, description="Width of action/time/view embeddings.")
    sample_steps: int = Field(default=1, ge=1, le=8, description="Flow/consistency steps per predicted frame.")
    context_noise_train: float = Field(default=0.1, ge=0, le=1,
                                       description="Max noise level on context latents in training.")
    context_noise_infer: float = Field(default=0.0, ge=0, le=1,
                                       description="Noise level context latents are tagged with at inference.")
    head: Literal["flow", "regression"] = Field(
        default="flow", description="'flow': the next latent is sampled from noise in `sample_steps` "
        "flow steps; 'regression': one deterministic pass (no noise input), trained on the "
        "unit-normalised prediction.")
    recency: bool = Field(default=False, description="Feed the last latent change z(t-1) - z(t-2) "
                          "straight into the target stem (velocity without going through attention).")

    @model_validator(mode="after")
    def _heads_divide(self) -> DynamicsConfig:
        for width in self.channels:
            if width % self.heads or (width // self.heads) % 2:
                raise ValueError(f"channel width {width} must split into {self.heads} heads of even size")
        return self


class ModelConfig(BaseModel):
    """Architecture of a world model (everything needed to build it before loading weights)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = Field(default="custom", description="Preset the sizes came from ('tiny', 'small', ...).")
    autoencoder: AutoencoderConfig = Field(default_factory=AutoencoderConfig)
    dynamics: DynamicsConfig = Field(default_factory=DynamicsConfig)
    precision: Precision = Field(default="auto", description="Inference precision; 'auto' = bf16 "
                                 "autocast on CPUs with AMX/AVX512-BF16, fp32 elsewhere.")


class Normalization(BaseModel):
    """Maps raw actions/state to [-1, 1] per dimension: x_n = 2 (x - low) / (high - low) - 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action_low: tuple[float, ...] = Field(description="Per-dimension action minimum.")
    action_high: tuple[float, ...] = Field(description="Per-dimension action maximum.")
    state_low: tuple[float, ...] | None = Field(default=None, description="Per-dimension state minimum.")
    state_high: tuple[float, ...] | None = Field(default=None, description="Per-dimension state maximum.")


class StageRecord(BaseModel):
    """Provenance of one training stage."""

    model_config = ConfigDict(extra="forbid")

    stage: str = Field(description="'autoencoder', 'dynamics' or 'decoder-finetune'.")
    steps: int = Field(ge=0, description="Optimiser steps taken.")
    wall_time_s: float = Field(ge=0, description="Wall-clock seconds spent training (all sessions).")
    hardware: list[str] = Field(default_factory=list, description="Devices the stage ran on.")
    data_hash: str | None = Field(default=None, description="Hash of the training data.")
    val_loss: float | None = Field(default=None, description="Last validation loss.")
    finished: str | None = Field(default=None, description="ISO-8601 UTC time the stage ended.")


class Provenance(BaseModel):
    """Where the weights came from."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(default="random", description="'random' or 'trained'.")
    seed: int | None = Field(default=None, description="Initialisation / training seed.")
    data: str | None = Field(default=None, description="Training data path.")
    stages: list[StageRecord] = Field(default_factory=list, description="Training stages, in order.")


class CheckpointConfig(BaseModel):
    """Content of a checkpoint's config.json."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = Field(default=FORMAT_VERSION, description="Checkpoint layout version.")
    features: FeatureSpec = Field(description="Shape contract of the data the model was trained on.")
    model: ModelConfig = Field(description="Architecture.")
    normalization: Normalization = Field(description="Action/state scaling of the training data.")
    provenance: Provenance = Field(default_factory=Provenance)


def preset_config(name: str, features: FeatureSpec) -> ModelConfig:
    """Sizes by name: 'tiny' (tests, seconds), 'small' (CPU: hours to train, >=30 FPS), 'paper'."""
    match name:
        case "tiny":
            ae = AutoencoderConfig(encoder_channels=(8, 16), decoder_channels=(8, 16, 32),
                                   cond_dim=32, state_hidden=32)
            dyn = DynamicsConfig(context=4, channels=(32, 32), heads=2, cond_dim=32)
        case "small":
            ae = AutoencoderConfig(encoder_channels=(32, 64), decoder_channels=(16, 32, 64),
                                   cond_dim=64, decode_steps=1, state_hidden=64)
            dyn = DynamicsConfig(context=9, channels=(64, 128), heads=4, spatial_layers=2,
                                 cond_dim=128, sample_steps=1)
        case "paper":
            ae = AutoencoderConfig(encoder_channels=(64, 128), decoder_channels=(128, 256, 384),
                                   decoder_blocks=2, cond_dim=256, decode_steps=3, state_hidden=256)
            # ~26 M decoder and ~6.7 M dynamics: the paper's 28 M (UNet + ControlNet) and ~6 M
            dyn = DynamicsConfig(context=9, channels=(64, 128, 192), blocks=1, heads=8,
                                 spatial_layers=2, cond_dim=256, sample_steps=1)
        case _:
            from schemas.errors import SpecError

            raise SpecError(f"unknown preset '{name}'; choose one of tiny, small, paper.")
    for cam in features.cameras:
        levels = len(dyn.channels) - 1
        if cam.height % (4 * 2**levels) or cam.width % (4 * 2**levels):
            from schemas.errors import SpecError

            raise SpecError(f"camera '{cam.name}' is {cam.height}x{cam.width}; preset '{name}' needs "
                            f"both sides divisible by {4 * 2**levels}. Resize the data.")
    return ModelConfig(preset=name, autoencoder=ae, dynamics=dyn)
