"""Job specs: what `iws generate job.yaml` reads. Validated before any cluster starts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class InitSpec(BaseModel):
    """Where initial frames come from."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = Field(default=None, description="Zarr or LeRobot dataset (path or s3:// URI) "
                                "whose episodes' frames start each rollout.")
    episodes: list[int] | None = Field(default=None, description="Episode indices to draw from; None: all.")
    frame: int = Field(default=0, ge=0, description="Frame index within the episode to start from.")
    images: list[str] | None = Field(default=None, description="Image files to start from instead of a dataset.")

    @model_validator(mode="after")
    def _one_source(self) -> InitSpec:
        if (self.dataset is None) == (self.images is None):
            raise ValueError("give exactly one of 'dataset' or 'images'")
        return self


class ScriptedSource(BaseModel):
    """Seeded parametric motions in action space."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["scripted"] = "scripted"
    motion: Literal["random_walk", "waypoints", "push", "sweep", "mix"] = Field(
        default="mix", description="Motion family; 'mix' draws one per episode.")
    weight: float = Field(default=1.0, gt=0, description="Relative share of episodes.")
    speed: float = Field(default=0.05, gt=0, description="Typical step as a fraction of the action range.")


class ReplaySource(BaseModel):
    """Action streams replayed from a dataset or recorded teleoperation."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["replay"] = "replay"
    path: str = Field(description="Zarr/LeRobot dataset or JSONL file of recorded action streams.")
    episodes: list[int] | None = Field(default=None, description="Episodes to replay; None: all.")
    weight: float = Field(default=1.0, gt=0, description="Relative share of episodes.")
    noise_std: float = Field(default=0.0, ge=0, description="Gaussian noise, fraction of the action range.")
    time_stretch: tuple[float, float] = Field(default=(1.0, 1.0), description="Range of time-stretch factors.")
    offset_std: float = Field(default=0.0, ge=0, description="Constant offset noise, fraction of the range.")


class PolicySource(BaseModel):
    """Closed loop: a policy sees generated frames and returns actions."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["policy"] = "policy"
    policy: str = Field(description="'module:function' callable or a LeRobot pretrained-policy directory.")
    weight: float = Field(default=1.0, gt=0, description="Relative share of episodes.")


ActionSourceSpec = Annotated[ScriptedSource | ReplaySource | PolicySource, Field(discriminator="kind")]


class ResourcesSpec(BaseModel):
    """Ray resources of one replica."""

    model_config = ConfigDict(extra="forbid")

    num_cpus: float = Field(default=0.5, gt=0, description="CPUs per replica (keep ≤0.5 on a 2-core laptop).")
    num_gpus: float = Field(default=0.0, ge=0, description="GPUs per replica; fractions share a GPU.")


class OutputSpec(BaseModel):
    """Where and in which formats the job writes."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Output directory (local path or s3:// URI).")
    formats: list[Literal["zarr", "lerobot"]] = Field(default_factory=lambda: ["zarr"],
                                                      description="Datasets to produce at the end.")


class JobSpec(BaseModel):
    """A generation job: which model, from which frames, driven by which actions, how many, where to."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Job id; names outputs and seeds.")
    model: str = Field(default="pusht", description="Checkpoint directory, s3:// URI or bundled name ('pusht').")
    task: str = Field(default="", description="Task text stored with every episode.")
    init: InitSpec = Field(description="Source of initial frames.")
    action_sources: dict[str, ActionSourceSpec] = Field(min_length=1,
                                                        description="Named action sources with weights.")
    episodes: int = Field(gt=0, description="Number of episodes to generate.")
    horizon: int = Field(gt=0, description="Steps per episode.")
    batch_size: int = Field(default=8, gt=0, description="Episodes a replica rolls in lockstep.")
    replicas: int = Field(default=1, gt=0, description="Number of model replicas (Ray actors).")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec, description="Resources per replica.")
    output: OutputSpec = Field(description="Output location and formats.")
    seed: int = Field(default=0, ge=0, description="Job seed; episode seeds derive from it and the index.")
    device: Literal["cpu", "cuda", "auto"] = Field(default="auto", description="Device of the replicas.")
