"""Everything checked before Ray starts, so a bad job fails in seconds with a precise message."""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass

from pipeline.generate.expand import expand
from schemas import EpisodeSpec, FeatureSpec, JobSpec, SpecError
from workers import storage
from workers.actions import make_action_source
from workers.init_frames import list_init_refs
from workers.scoring import resolve_scorer
from workers.writer import episode_features

log = logging.getLogger(__name__)

LEROBOT_EXPORTER = "pipeline.export.lerobot"


@dataclass(frozen=True)
class Plan:
    """A validated job: the model's facts and every episode to make."""

    spec: JobSpec
    model_features: FeatureSpec  # what the checkpoint declares
    features: FeatureSpec  # what generated episodes hold (no extras; state only with a state head)
    model_hash: str
    episodes: list[EpisodeSpec]


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
    if "lerobot" in spec.output.formats and importlib.util.find_spec(LEROBOT_EXPORTER) is None:
        raise SpecError("output.formats asks for 'lerobot', but this iws has no LeRobot exporter "
                        f"({LEROBOT_EXPORTER}); remove 'lerobot' and convert dataset.zarr later.")


def preflight(spec: JobSpec) -> Plan:
    """Load the model on CPU and check init frames, action sources, filter and output against it."""
    if spec.output.path and storage.is_remote(spec.output.path):
        storage.local_path(spec.output.path)  # raises the "not supported yet" SpecError
    wm = _load_model(spec)
    features = wm.features
    try:
        refs = list_init_refs(spec.init, features)
    except SpecError as error:
        raise SpecError(f"init: {error}") from None
    _check_sources(spec, features)
    if spec.filter is not None:
        resolve_scorer(spec.filter.scorer)
    _check_output(spec)
    log.info("job %s: %d episodes x %d steps, model %s, %d initial frames", spec.name, spec.episodes,
             spec.horizon, wm.checkpoint_hash, len(refs))
    return Plan(spec=spec, model_features=features, features=episode_features(features, wm.has_state),
                model_hash=wm.checkpoint_hash, episodes=expand(spec, refs))
