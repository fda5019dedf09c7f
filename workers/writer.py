"""Episode output of a job: each episode in its own small EpisodeStore, then a commit marker.

    OUT/episodes/<episode_id>/     EpisodeStore holding exactly that episode (built in a hidden
                                   staging directory and renamed into place, so never half there)
    OUT/commits/<episode_id>.json  its EpisodeRecord, written last: the episode counts only once
                                   this exists

Writes are idempotent: a committed episode is never rewritten, and a retried batch reproduces
byte-identical arrays, so at-least-once retries cannot duplicate or change an episode.
"""

from __future__ import annotations

import logging

from schemas import EpisodeRecord, FeatureSpec
from sim_model.data.episode import Episode
from workers import storage

log = logging.getLogger(__name__)

EPISODES_DIR = "episodes"
COMMITS_DIR = "commits"


def episode_uri(out: str, episode_id: str) -> str:
    return storage.join(out, EPISODES_DIR, episode_id)


def commit_uri(out: str, episode_id: str) -> str:
    return storage.join(out, COMMITS_DIR, f"{episode_id}.json")


def read_commit(out: str, episode_id: str) -> EpisodeRecord | None:
    uri = commit_uri(out, episode_id)
    if not storage.exists(uri):
        return None
    return EpisodeRecord.model_validate_json(storage.read_text(uri))


def committed_records(out: str) -> dict[str, EpisodeRecord]:
    """Every committed episode of the output, by episode id."""
    records = {}
    for name in storage.list_names(storage.join(out, COMMITS_DIR), suffix=".json"):
        record = EpisodeRecord.model_validate_json(storage.read_text(storage.join(out, COMMITS_DIR, name)))
        records[record.episode_id] = record
    return records


def episode_features(model_features: FeatureSpec, has_state: bool) -> FeatureSpec:
    """What a generated episode holds: the model predicts frames (and state if it has a state
    head), not the extras."""
    update: dict[str, object] = {"extras": ()}
    if not has_state:
        update.update(state_dim=0, state_names=None)
    return model_features.model_copy(update=update)


def write_episode(out: str, episode: Episode, index: int, features: FeatureSpec, *,
                  score: float | None = None, success: bool | None = None) -> EpisodeRecord:
    """Store `episode` under OUT and commit it; returns its record (the existing one if committed)."""
    from sim_model.data.store import EpisodeStore

    meta = episode.meta
    existing = read_commit(out, meta.episode_id)
    if existing is not None:
        return existing
    target = episode_uri(out, meta.episode_id)
    staged = storage.staging_dir(target)
    try:
        store = EpisodeStore.create(storage.local_path(staged), features)
        store.append(episode)
    except BaseException:
        storage.remove_tree(staged)
        raise
    # An uncommitted copy at `target` is a leftover of an interrupted attempt: replace it.
    storage.publish_dir(staged, target, replace=True)
    record = EpisodeRecord(episode_id=meta.episode_id, index=index, uri=target, length=len(episode),
                           checksum=episode.checksum(), seed=meta.seed if meta.seed is not None else 0,
                           source=meta.source, model_hash=meta.model_hash, score=score, success=success)
    storage.write_new(commit_uri(out, meta.episode_id), record.model_dump_json(indent=1))
    log.debug("committed %s (%d steps)", meta.episode_id, len(episode))
    return record
