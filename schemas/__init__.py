"""Pydantic models of everything that crosses a process, disk or network boundary."""

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
