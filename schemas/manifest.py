"""The run manifest a job writes: what was made, from what, and where it lives."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.episode import EpisodeRecord


class RunManifest(BaseModel):
    """Summary of a generation job: job-level facts only, the same size at any episode count
    (per-episode records are in its `index`). Never holds credentials."""

    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(description="Job name.")
    spec_hash: str = Field(description="sha256 of the validated job spec (canonical JSON).")
    model_hash: str | None = Field(default=None, description="Hash of the world-model checkpoint.")
    episodes_requested: int = Field(ge=0, description="Episodes the spec asks for.")
    episodes_committed: int = Field(default=0, ge=0, description="Episodes committed (their records are "
                                    "in their groups' part records under OUT/parts/).")
    episodes_in_datasets: int | None = Field(default=None, ge=0, description="Episodes the datasets hold "
                                             "(the filter's), once they are assembled.")
    started: str = Field(description="ISO-8601 UTC start time of this run.")
    finished: str | None = Field(default=None, description="ISO-8601 UTC end time, None while running.")
    frames: int = Field(default=0, ge=0, description="Frames generated in total.")
    datasets: dict[str, str] = Field(default_factory=dict, description="Format -> URI of the assembled datasets.")
    index: str | None = Field(default=None, description="URI of the per-episode index (Parquet, one row "
                              "per committed episode: id, index, seed, source, score, success, checksum, "
                              "shard and offset in the Zarr dataset; sim_model/data/shards.py), written "
                              "when the datasets are assembled.")


class ExportRecord(BaseModel):
    """The completion marker of one of a job's exports (OUT/<format>.done.json), written after
    the export is complete: without it, or with other `sources`, the export is redone."""

    model_config = ConfigDict(extra="forbid")

    format: str = Field(description="Export format, e.g. 'lerobot'.")
    uri: str = Field(description="Where the export lives.")
    sources: str = Field(description="Digest of the (episode id, checksum) list it was made from.")
    episodes: int = Field(ge=0, description="Episodes exported.")
    camera_keys: dict[str, str] = Field(default_factory=dict, description="Cameras exported under "
                                        "other keys than the default (output.lerobot_camera_keys).")
    finished: str = Field(description="ISO-8601 UTC time the export was completed.")
    parts: str | None = Field(default=None, description="Digest of the part records it was assembled "
                              "from (each write of a part has its own `made`).")
    files: dict[str, int] | None = Field(default=None, description="Size in bytes of every file of the "
                                         "export when it was completed, by path relative to `uri`.")


class PartRecord(BaseModel):
    """The commit of one group of a job's episodes and of its part of the datasets
    (OUT/parts/<key>.json), created once (conditionally) after the part's files are written: the
    records of every episode of the group, and the kept ones, in order, with their checksums. A
    part whose record disagrees with the job's formats or camera keys is made again from its
    shard; one whose shard is damaged is withdrawn and its group rolled again."""

    model_config = ConfigDict(extra="forbid")

    key: int = Field(ge=0, description="Index of the group's first episode; parts are ordered by it.")
    episodes: list[tuple[str, str]] = Field(default_factory=list,
                                            description="(episode id, checksum) of each episode in the part.")
    frames: int = Field(default=0, ge=0, description="Frames in the part.")
    rejected: list[tuple[str, str]] = Field(default_factory=list, description="(episode id, checksum) "
                                            "of the group's episodes the filter left out of the datasets.")
    formats: list[str] = Field(default_factory=lambda: ["lerobot"],
                               description="Datasets the part was written to ('zarr': its shard).")
    camera_keys: dict[str, str] = Field(default_factory=dict,
                                        description="Cameras written under other keys (output.lerobot_camera_keys).")
    made: str | None = Field(default=None, description="A fresh id each time the part is written, so "
                             "that whatever was assembled from an earlier write of it is made again.")
    records: list[EpisodeRecord] | None = Field(default=None, description="The record of every episode of "
                                                "the group, in index order: their commit. None in records of "
                                                "iws versions before group commits (their groups are made again).")
    files: dict[str, int] | None = Field(default=None, description="Size in bytes of each file the part "
                                         "wrote that stays as written (its shard's, its LeRobot videos and "
                                         "metadata), by path relative to the job's output; None in records "
                                         "of iws versions before it.")
