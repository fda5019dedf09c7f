"""Pydantic models of everything that crosses a process, disk or network boundary.

    features.py      FeatureSpec, CameraSpec, ExtraSpec: the shape contract of datasets and models
    episode.py       EpisodeSpec (a job's unit of work), EpisodeMeta, EpisodeRecord
    job.py           JobSpec and its parts (action sources, filter, output), `iws generate`'s input
    manifest.py      RunManifest, PartRecord, ExportRecord: what a run made and where
    lease.py         LeaseRecord: which run owns a job's output
    errors.py        SpecError, UserError; validation errors as one paragraph a user can act on
"""

from schemas.episode import EpisodeMeta, EpisodeRecord, EpisodeSpec
from schemas.errors import SpecError, load_yaml, validate
from schemas.features import CameraSpec, ExtraSpec, FeatureSpec
from schemas.job import JobSpec
from schemas.lease import LeaseRecord
from schemas.manifest import ExportRecord, PartRecord, RunManifest

__all__ = [
    "CameraSpec", "EpisodeMeta", "EpisodeRecord", "EpisodeSpec", "ExportRecord", "ExtraSpec", "PartRecord",
    "FeatureSpec", "JobSpec", "LeaseRecord", "RunManifest", "SpecError", "load_yaml",
    "validate",
]
