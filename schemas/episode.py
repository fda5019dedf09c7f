"""Per-episode metadata, the unit of work of a job, and the record a finished episode leaves."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EpisodeMeta(BaseModel):
    """Metadata stored beside each episode's arrays."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str = Field(description="Stable id, e.g. '<job_id>-000042'; unique within a store.")
    length: int = Field(ge=1, description="Number of steps (frames) in the episode.")
    task: str = Field(default="", description="Natural-language task text, e.g. 'Push the T onto the target'.")
    source: str = Field(default="unknown", description="What produced the actions: 'pusht:push', "
                        "'scripted:random_walk', 'replay', 'teleop', 'policy:<name>'.")
    seed: int | None = Field(default=None, description="Seed the episode was generated with.")
    model_hash: str | None = Field(default=None, description="Hash of the world-model checkpoint that "
                                   "generated it; None for ground truth.")
    job_id: str | None = Field(default=None, description="Generation job that made it, if any.")
    fps: float = Field(default=10.0, gt=0, description="Control rate; timestamp = frame_index / fps.")
    info: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, description="Free-form scalar facts (primitive name, score, init ref).")


class EpisodeSpec(BaseModel):
    """One episode a job will make; expanding a JobSpec yields these deterministically."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(description="Id of the job this episode belongs to.")
    index: int = Field(ge=0, description="Position of the episode in the job, 0-based.")
    episode_id: str = Field(description="Derived from (job_id, index); names the episode's output.")
    seed: int = Field(ge=0, description="Derived from (job seed, job_id, index); drives every random choice.")
    init_ref: str = Field(description="Initial-frame reference, e.g. 'data.zarr#12:0' (episode 12, frame 0).")
    action_source: str = Field(description="Name of the action source (key in the job's action_sources).")
    horizon: int = Field(gt=0, description="Number of steps to generate.")


class EpisodeRecord(BaseModel):
    """What a committed episode reports back to the driver; one row of the run manifest."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str = Field(description="Id of the episode.")
    index: int = Field(ge=0, description="Index of the episode in its job.")
    uri: str = Field(description="The shard of its group's part, where its data lives if the filter "
                     "kept it (local path or s3:// URI; earlier iws versions: the episode's own store).")
    length: int = Field(ge=1, description="Number of steps.")
    checksum: str = Field(description="sha256 over the episode's arrays, in key order.")
    seed: int = Field(description="Seed it was generated with.")
    source: str = Field(description="Action source that drove it.")
    model_hash: str | None = Field(default=None, description="Checkpoint hash of the world model.")
    score: float | None = Field(default=None, description="Task score, when a scorer ran.")
    success: bool | None = Field(default=None, description="Task success flag, when a scorer ran.")
    plausibility: float | None = Field(default=None, description="The task's plausibility check of "
                                       "its frames in [0, 1], when one ran (filter.plausibility).")
    checks: dict[str, float] | None = Field(default=None, description="Every value of that check "
                                            "(e.g. rigid_shape, visible), when one ran.")
    node_id: str | None = Field(default=None, description="Ray node that generated and committed it "
                                "(None outside Ray).")
