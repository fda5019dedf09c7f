"""Everything checked before Ray starts, so a bad job fails in seconds with a precise message."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from pipeline.generate.expand import expand
from pipeline.tasks.registry import resolve_plausibility, resolve_scorer
from schemas import EpisodeSpec, FeatureSpec, JobSpec, SpecError
from schemas.job import ReplaySource
from sim_model import storage
from workers.actions import make_action_source
from workers.init_frames import list_init_refs
from workers.scoring import PlausibilityCheck, Scorer
from workers.writer import episode_features

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Plan:
    """A validated job: the model's facts and every episode to make."""

    spec: JobSpec
    model_features: FeatureSpec  # what the checkpoint declares
    features: FeatureSpec  # what generated episodes hold (no extras; state only with a state head)
    model_hash: str
    episodes: list[EpisodeSpec]
    # The WorldModel loaded on CPU for the checks; the driver rolls the first groups with it.
    model: Any = dataclasses.field(default=None, repr=False, compare=False)
    # The filter's scorer, resolved here and handed to every replica (None without a filter).
    scorer: Scorer | None = dataclasses.field(default=None, repr=False, compare=False)
    # The task's plausibility check, likewise (None when the filter asks for none).
    plausibility: PlausibilityCheck | None = dataclasses.field(default=None, repr=False, compare=False)


def _load_model(spec: JobSpec):  # -> WorldModel
    from sim_model.world_model import WorldModel

    try:
        return WorldModel.load(spec.model, device="cpu")
    except SpecError as error:
        raise SpecError(f"model: {error}") from None
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise SpecError(f"model: cannot load checkpoint '{spec.model}': {error}") from None


def _check_sources(spec: JobSpec, features: FeatureSpec) -> None:
    for name, cfg in spec.action_sources.items():
        try:
            make_action_source(cfg, features, "cpu")
        except SpecError as error:
            raise SpecError(f"action_sources.{name}: {error}") from None


def _check_output(spec: JobSpec) -> None:
    storage.ensure_writable_dir(spec.output.path)


def _check_camera_keys(spec: JobSpec, features: FeatureSpec) -> None:
    """output.lerobot_camera_keys names cameras the model has: caught now, not by the export at
    the end of the job."""
    cameras = [c.name for c in features.cameras]
    unknown = sorted(set(spec.output.lerobot_camera_keys) - set(cameras))
    if unknown:
        raise SpecError(f"output.lerobot_camera_keys names {unknown}, but the model's cameras are "
                        f"{cameras}; key the mapping by one of those.")


def _check_lerobot(spec: JobSpec, features: FeatureSpec) -> None:
    """What the replicas' LeRobot parts need (a task text, video-encodable frames): caught now,
    not by the first replica that writes a part."""
    if "lerobot" not in spec.output.formats:
        return
    from sim_model.data.formats.lerobot_writer import check_exportable

    if not spec.task.strip():
        raise SpecError("output.formats has 'lerobot', which stores a task text with every episode, "
                        "and the spec has none: add e.g. task: 'Push the T onto the target'.")
    try:
        check_exportable(features, "libsvtav1", "iws/job")
    except SpecError as error:
        raise SpecError(f"output.formats 'lerobot': {error}") from None


def _check_schemes(spec: JobSpec) -> None:
    """Every location in the spec is a local path or s3:// (SpecError naming the field)."""
    places = {"model": spec.model, "output.path": spec.output.path, "init.dataset": spec.init.dataset}
    places.update({f"init.images[{i}]": p for i, p in enumerate(spec.init.images or [])})
    places.update({f"action_sources.{n}.path": s.path for n, s in spec.action_sources.items()
                   if isinstance(s, ReplaySource)})
    for field, uri in places.items():
        if uri is not None:
            try:
                storage.check_scheme(uri)
            except SpecError as error:
                raise SpecError(f"{field}: {error}") from None


def preflight(spec: JobSpec) -> Plan:
    """Load the model on CPU and check init frames, action sources, filter and output against it."""
    _check_schemes(spec)
    remote = storage.is_remote(spec.output.path)
    if remote:  # before the model loads: a wrong bucket or credentials fail in a second
        _check_output(spec)
    wm = _load_model(spec)
    features = wm.features
    try:
        refs = list_init_refs(spec.init, features)
    except SpecError as error:
        raise SpecError(f"init: {error}") from None
    _check_sources(spec, features)
    _check_camera_keys(spec, features)
    _check_lerobot(spec, features)
    scorer = resolve_scorer(spec.filter.scorer) if spec.filter is not None and spec.filter.scorer else None
    plausibility = resolve_plausibility(spec.filter)
    if not remote:  # creates the directory: only once everything else is known to be right
        _check_output(spec)
    log.info("job %s: %d episodes x %d steps, model %s, %d initial frames", spec.name, spec.episodes,
             spec.horizon, wm.checkpoint_hash, len(refs))
    return Plan(spec=spec, model_features=features, features=episode_features(features, wm.has_state),
                model_hash=wm.checkpoint_hash, episodes=expand(spec, refs), model=wm, scorer=scorer,
                plausibility=plausibility)
