"""What a replica commits for each episode: its EpisodeRecord (workers/parts.py commits them a
group at a time, in the group's part record), and the features a generated episode holds.

Since group commits, an episode has no store and no commit marker of its own: a group's
episodes are committed together, by one conditional create of their part record
(OUT/parts/<key>.json, carrying every episode's record) after the part's files are written.
Outputs of earlier iws versions hold OUT/episodes/ (one store per episode) and OUT/commits/ (one
marker per episode); a resume makes their groups again and removes both (pipeline/generate/outputs.py).
"""

from __future__ import annotations

import sys

from schemas import EpisodeRecord, FeatureSpec, SpecError
from sim_model.data.episode import Episode

# Written by iws versions before group commits; still a job's to delete.
EPISODES_DIR = "episodes"
COMMITS_DIR = "commits"


class CommitConflict(SpecError):
    """Two writers made different data for one group; the first commit stands."""


def episode_features(model_features: FeatureSpec, has_state: bool) -> FeatureSpec:
    """What a generated episode holds: the model predicts frames (and state if it has a state
    head), not the extras."""
    update: dict[str, object] = {"extras": ()}
    if not has_state:
        update.update(state_dim=0, state_names=None)
    return model_features.model_copy(update=update)


def current_node() -> str | None:
    """The Ray node this process runs on, or None outside Ray (Ray is never imported here)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return str(ray.get_runtime_context().get_node_id())


def episode_record(episode: Episode, index: int, shard: str, *, score: float | None = None,
                   success: bool | None = None, checks: dict[str, float] | None = None) -> EpisodeRecord:
    """The record `episode` is committed with, in its group's part record (`shard`: the URI of
    the group's shard; `checks`: the plausibility check's values, workers.scoring.check_episode)."""
    meta = episode.meta
    return EpisodeRecord(episode_id=meta.episode_id, index=index, uri=shard, length=len(episode),
                         checksum=episode.checksum(), seed=meta.seed if meta.seed is not None else 0,
                         source=meta.source, model_hash=meta.model_hash, score=score, success=success,
                         plausibility=None if checks is None else checks["plausibility"],
                         checks=checks, node_id=current_node())
