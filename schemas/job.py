"""Job specs: what `iws generate job.yaml` reads. Validated before any cluster starts.

Relative paths inside a job file (model, init dataset/images, replay paths, output) resolve
against the directory of the job file, so a spec means the same thing from any working directory.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_MODULE_ATTR = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
# Keys LeRobot reads as a camera input (mirrors sim_model.data.formats.lerobot_features._CAMERA_KEY).
_LEROBOT_CAMERA_KEY = re.compile(r"observation\.image|observation\.images\.[A-Za-z0-9_][A-Za-z0-9_.-]*")


class InitSpec(BaseModel):
    """Where initial frames come from: episodes of a dataset, or image files."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = Field(default=None, description="Zarr (EpisodeStore) or LeRobot v3.0 dataset "
                                "directory (local or s3://) whose episodes' frames start each rollout.")
    episodes: list[int] | None = Field(default=None, description="Episode indices of `dataset` to draw "
                                       "from; None: all episodes.")
    frame: int = Field(default=0, ge=0, description="Frame index within each episode to start from.")
    images: list[str] | None = Field(default=None, description="Image files (PNG/JPEG) or glob patterns "
                                     "to start from instead of a dataset; single-camera models only.")

    @model_validator(mode="after")
    def _one_source(self) -> InitSpec:
        if (self.dataset is None) == (self.images is None):
            raise ValueError("give exactly one of 'dataset' or 'images'")
        if self.images is not None and not self.images:
            raise ValueError("'images' is empty; list at least one image file or glob")
        if self.episodes is not None and self.images is not None:
            raise ValueError("'episodes' selects dataset episodes; it cannot be used with 'images'")
        return self


class ScriptedSource(BaseModel):
    """Seeded parametric motions in action space, clipped to the model's action range."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["scripted"] = "scripted"
    motion: Literal["random_walk", "waypoints", "push", "sweep", "mix"] = Field(
        default="mix", description="Motion family; 'mix' draws one of the others per episode.")
    weight: float = Field(default=1.0, gt=0, description="Relative share of the job's episodes.")
    speed: float = Field(default=0.02, gt=0, le=1, description="Typical step length as a fraction of "
                         "the action range.")
    waypoints: int = Field(default=4, ge=1, le=64, description="Waypoints per episode ('waypoints').")
    start: Literal["auto", "center", "random"] = Field(
        default="auto", description="Where the motion starts: 'auto' starts at the initial state when "
        "state and action have the same size (position control, as PushT), else at the centre.")


class ReplaySource(BaseModel):
    """Action streams replayed from a dataset or recorded teleoperation, optionally augmented."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["replay"] = "replay"
    path: str = Field(description="Zarr EpisodeStore, LeRobot v3.0 dataset directory, or JSONL file (local or s3://) of "
                      "recorded action streams (one episode per line: {\"action\": [[...], ...]}, or "
                      "one step per line: {\"episode\": i, \"action\": [...]}).")
    episodes: list[int] | None = Field(default=None, description="Streams (episode indices) to replay; "
                                       "None: all. Episode k of the job takes stream k mod count.")
    weight: float = Field(default=1.0, gt=0, description="Relative share of the job's episodes.")
    noise_std: float = Field(default=0.0, ge=0, description="Per-step Gaussian noise, as a fraction of "
                             "the action range.")
    time_stretch: tuple[float, float] = Field(default=(1.0, 1.0), description="Range [lo, hi] of "
                                              "time-stretch factors drawn per episode (>1 slows down).")
    offset_std: float = Field(default=0.0, ge=0, description="Constant per-episode offset noise, as a "
                              "fraction of the action range.")

    @field_validator("time_stretch")
    @classmethod
    def _stretch(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not 0 < value[0] <= value[1]:
            raise ValueError("need 0 < lo <= hi")
        return value


class PolicySource(BaseModel):
    """Closed loop: a policy sees the generated frames (and predicted state) and returns actions."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["policy"] = "policy"
    policy: str = Field(description="'package.module:function' called as fn(step, observation) -> (B, A) "
                        "(a class there is instantiated once with the FeatureSpec and its .actions used), "
                        "or a LeRobot pretrained-policy directory (config.json + model.safetensors). "
                        "A 'module:function' is imported and run on the driver and every worker: "
                        "this runs code, so a job spec is as trusted as a script.")
    weight: float = Field(default=1.0, gt=0, description="Relative share of the job's episodes.")

    def is_callable_ref(self) -> bool:
        """True when `policy` names a Python callable rather than a directory."""
        return bool(_MODULE_ATTR.match(self.policy))


ActionSourceSpec = Annotated[ScriptedSource | ReplaySource | PolicySource, Field(discriminator="kind")]


class ResourcesSpec(BaseModel):
    """Ray resources of one replica."""

    model_config = ConfigDict(extra="forbid")

    num_cpus: float = Field(default=0.5, gt=0, description="CPUs per replica (keep <=0.5 on a 2-core "
                            "laptop, or Ray's read/write tasks starve).")
    num_gpus: float = Field(default=0.0, ge=0, description="GPUs per replica; fractions share a GPU.")


class OutputSpec(BaseModel):
    """Where and in which formats the job writes."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Output directory or s3:// prefix; holds commits/, manifest.json "
                      "and the datasets (dataset/, lerobot/), and episodes/ while they are written.")
    formats: list[Literal["zarr", "lerobot"]] = Field(
        default_factory=lambda: ["zarr"], min_length=1,  # type: ignore[arg-type]
        description="Datasets to produce: 'zarr' -> dataset/ (one Diffusion-Policy-layout shard per group "
        "and a Parquet index; `iws export zarr-dp` makes one DP store of it), 'lerobot' -> lerobot/ (LeRobot "
        "v3.0). Each group is written by its replica as one part of each, the driver assembles their "
        "metadata (workers/parts.py); 'lerobot' implies 'zarr'.")
    keep_episode_stores: bool = Field(
        default=False, description="Removed: since a group's part is its commit, each episode is "
        "stored once, in its group's shard, and never in a store of its own. Only false is accepted "
        "(specs that spell it out keep validating); episodes the filter leaves out are kept as their "
        "records in the part (score, success, checksum).")
    lerobot_camera_keys: dict[str, str] = Field(
        default_factory=dict, description="LeRobot key of a camera in lerobot/ where not "
        "'observation.images.<camera>', e.g. {top: observation.image}, the camera key of "
        "lerobot-eval --env.type=pusht (as `iws export lerobot --camera-key`; docs/lerobot.md).")

    @field_validator("keep_episode_stores")
    @classmethod
    def _no_episode_stores(cls, value: bool) -> bool:
        if value:
            raise ValueError("keep_episode_stores was removed: each episode is now stored once, in its "
                             "group's shard of dataset/ (read one with sim_model.data.formats.open_dataset"
                             "(OUT/dataset), or `iws export zarr-dp` for one store). Delete the field.")
        return value

    @field_validator("lerobot_camera_keys")
    @classmethod
    def _camera_keys_are_lerobot_image_keys(cls, keys: dict[str, str]) -> dict[str, str]:
        for camera, key in keys.items():
            if not _LEROBOT_CAMERA_KEY.fullmatch(key):
                raise ValueError(f"camera '{camera}' -> {key!r}: use 'observation.image' or "
                                 "'observation.images.<name>'")
        return keys


class PlausibilitySpec(BaseModel):
    """Trust per episode: the task's own object checks (the T stays a rigid T, the pile keeps its
    mass, the rope its length) score every generated episode; those below `min` are flagged in
    the index, or left out of the datasets."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(default=None, description="Task whose object checks apply ('pusht', "
                             "'sweep', 'rope'); by default the task of filter.scorer.")
    min: float = Field(default=0.0, ge=0.0, le=1.0, description="Episodes whose plausibility (in [0, 1]) "
                       "is below this are implausible: flagged in the index ('plausible': false), "
                       "or with mode 'drop' left out of the datasets.")
    mode: Literal["flag", "drop"] = Field(default="flag", description="'flag': implausible episodes stay "
                                          "in the datasets, marked; 'drop': they are left out.")


class FilterSpec(BaseModel):
    """Score each episode after it is generated and keep, drop or just label it."""

    model_config = ConfigDict(extra="forbid")

    scorer: str | None = Field(
        default=None, description="Built-in scorer name, or 'package.module:function' taking an "
        "Episode and returning (score: float, success: bool). A 'module:function' is imported and "
        "run on the driver and every worker: this runs code, so a job spec is as trusted as a "
        "script. May be left out when filter.plausibility names its task.")
    mode: Literal["keep", "drop", "label"] = Field(
        default="label", description="'keep': only successful episodes enter the datasets; 'drop': only "
        "failed ones do (failure data); 'label': all do, with score and success recorded.")
    plausibility: PlausibilitySpec | None = Field(
        default=None, description="Threshold and mode of the per-episode plausibility check. With a "
        "task's scorer the check runs and is recorded without it too (its 'min' is then 0).")

    @model_validator(mode="after")
    def _scorer_or_plausibility(self) -> FilterSpec:
        if self.scorer is None:
            if self.plausibility is None or self.plausibility.task is None:
                raise ValueError("give filter.scorer (e.g. pusht_coverage), or filter.plausibility with "
                                 "its task (e.g. {task: pusht, min: 0.5}) to check plausibility alone")
            if self.mode != "label":
                raise ValueError(f"filter.mode '{self.mode}' keeps or drops by success, which needs "
                                 "filter.scorer; without one use mode 'label'")
        return self


class JobSpec(BaseModel):
    """A generation job: which model, from which frames, driven by which actions, how many, where to.

    A job spec can run code: a policy source's or the filter's 'package.module:function' is
    imported and called on the driver and on every worker, with their credentials. Trust a job
    file as you would a Python script, and run only those you wrote or have read.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Job id; names episodes "
                      "('<name>-000042') and, with `seed`, derives every episode's seed.")
    model: str = Field(default="", description="Checkpoint directory or s3:// prefix, or a bundled "
                       "model name ('pusht'); left out: the bundled model of the task registry's "
                       "first task (pipeline/tasks/registry.py), filled in when the job is loaded.")
    task: str = Field(default="", description="Task text stored with every episode.")
    init: InitSpec = Field(description="Source of initial frames.")
    action_sources: dict[str, ActionSourceSpec] = Field(
        min_length=1, description="Named action sources; episodes are shared out by weight.")
    episodes: int = Field(gt=0, description="Number of episodes to generate.")
    horizon: int = Field(gt=1, description="Steps (frames) per episode, the initial frame included.")
    batch_size: int = Field(default=8, gt=0, description="Episodes a replica rolls in lockstep. Part of "
                            "the job's identity: batches are fixed groups of episode indices.")
    replicas: int = Field(default=1, gt=0, description="Number of model replicas (Ray actors).")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec, description="Resources per replica.")
    output: OutputSpec = Field(description="Output location and formats.")
    seed: int = Field(default=0, ge=0, description="Job seed; episode seeds derive from it, the name and "
                      "the episode index.")
    device: Literal["cpu", "cuda", "auto"] = Field(default="auto", description="Device of the replicas; "
                                                   "'auto' takes CUDA when the replica has a GPU.")
    filter: FilterSpec | None = Field(default=None, description="Optional success filter run on every "
                                      "episode before it is committed.")

    @field_validator("action_sources")
    @classmethod
    def _source_names(cls, value: dict[str, object]) -> dict[str, object]:
        bad = [k for k in value if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", k)]
        if bad:
            raise ValueError(f"action source names {bad} must use letters, digits, '_', '.', '-'")
        return value

    @model_validator(mode="after")
    def _resources_fit_device(self) -> JobSpec:
        if self.device == "cuda" and self.resources.num_gpus == 0:
            raise ValueError("device 'cuda' needs resources.num_gpus > 0 (fractions share a GPU)")
        return self
