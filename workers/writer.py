"""Episode output of a job: each episode in its own small EpisodeStore, then a commit marker.

    OUT/episodes/<episode_id>/     EpisodeStore holding exactly that episode (local: built in a
                                   hidden staging directory and renamed into place, so never half
                                   there)
    OUT/episodes/<episode_id>.<attempt>/   the same on s3://, which has no rename: each attempt
                                   uploads to a prefix of its own, and only the one the commit
                                   marker names counts
    OUT/commits/<episode_id>.json  its EpisodeRecord, written last and only if absent (a
                                   conditional write): the episode counts only once this exists

The episode's own store is the unit of exactly-once commits, not of the datasets: once its
group's part of the datasets is written (workers/parts.py), the replica deletes it (unless
output.keep_episode_stores), and the part holds the data; the commit marker stays.

Writes are idempotent: a committed episode is never rewritten, and a retried batch reproduces
byte-identical arrays, so at-least-once retries cannot duplicate or change an episode. When two
writers race for one marker, exactly one wins; the loser checks that the winner's checksum is
its own (then it takes the winner's record and deletes its own upload) or raises CommitConflict.
(Locally both writers publish to the same directory, so there a conflicting loser has already
replaced the data; consolidation's checksum check then sends the episode back to be redone.)

A marker is written only once its episode's data is verified present (`check_stored`). A marker
whose data later goes missing or fails its checksum is withdrawn on resume (`uncommit`: logged,
marker and data removed) and the episode is made again. Everything that deletes from the output
here takes the output's Lease (workers/lease.py) and checks it first, and a marker is trusted
only to name its own episode's store inside OUT/episodes/ (`stored_uri`, `removable_store`): a
marker that names anything else is refused, with the file named, before anything is deleted.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Container, Iterable
from collections.abc import Set as AbstractSet

from schemas import EpisodeRecord, FeatureSpec, SpecError
from schemas.errors import parse_record
from sim_model import storage
from sim_model.data.episode import Episode
from workers.lease import Lease

log = logging.getLogger(__name__)

EPISODES_DIR = "episodes"
COMMITS_DIR = "commits"
STORE_ROOT_FILE = ".zattrs"  # an episode store's attributes, written (and uploaded) last


class CommitConflict(SpecError):
    """Two writers made different data for one episode; the first commit stands."""


class EpisodeNotStored(SpecError):
    """An episode's data is not where its record says, so it is not committed."""


def episode_uri(out: str, episode_id: str) -> str:
    return storage.join(out, EPISODES_DIR, episode_id)


def commit_uri(out: str, episode_id: str) -> str:
    return storage.join(out, COMMITS_DIR, f"{episode_id}.json")


def stored_uri(out: str, record: EpisodeRecord) -> str:
    """Where the episode's data lives under OUT now (the attempt its marker names), even if OUT
    was moved since the marker was written: OUT/episodes/<the last name of record.uri>.

    That name must be one of this episode's stores (`<episode_id>`, or `<episode_id>.<attempt>`
    on s3://): the store is deleted once its part is written or when its marker is withdrawn,
    so a marker naming '..', '.' or another episode's store would have a resume delete the
    whole output, every episode, or another's data. SpecError naming the marker otherwise."""
    name = record.uri.rstrip("/").rsplit("/", 1)[-1]
    if name in ("", ".", "..") or (name != record.episode_id and not name.startswith(f"{record.episode_id}.")):
        raise SpecError(_foreign_marker(out, record, f"its uri {record.uri!r} does not name a store of "
                                        f"episode {record.episode_id!r} in {storage.join(out, EPISODES_DIR)}/"))
    return storage.join(out, EPISODES_DIR, name)


def _foreign_marker(out: str, record: EpisodeRecord, why: str, marker: str | None = None) -> str:
    marker = marker or commit_uri(out, record.episode_id)
    return (f"the commit marker {marker} is not one iws wrote for this output: {why}. Nothing it "
            "names was deleted. If the file was edited or copied in from elsewhere, delete it (its episode "
            "is made again on the next run) or restore it from a copy, then rerun.")


def removable_store(out: str, record: EpisodeRecord) -> str:
    """`stored_uri`, checked to resolve to a place inside OUT/episodes/ (a symlink could lead
    elsewhere): what may be deleted as the episode's own store. SpecError otherwise."""
    uri = stored_uri(out, record)
    if not storage.is_inside(storage.join(out, EPISODES_DIR), uri):
        raise SpecError(_foreign_marker(out, record, f"its store {uri} resolves to "
                                        f"{storage.resolved(uri)}, outside {storage.join(out, EPISODES_DIR)}/"))
    return uri


def _parse_marker(out: str, marker: str, text: str, episode_id: str) -> EpisodeRecord:
    """The record in the marker file `marker` of `episode_id`; SpecError, naming the file, if
    it is empty or not a record, names another episode (its id is what the output's paths are
    made of) or a store that is not its own."""
    record = parse_record(EpisodeRecord, text, f"the commit marker {marker}",
                          "Nothing was deleted. Delete it (its episode is made again on the next run) or "
                          "restore it from a copy, then rerun.")
    if record.episode_id != episode_id:
        raise SpecError(_foreign_marker(out, record, f"it is the marker of episode {episode_id!r} but "
                                        f"holds the record of {record.episode_id!r}", marker))
    stored_uri(out, record)
    return record


def read_commit(out: str, episode_id: str) -> EpisodeRecord | None:
    marker = commit_uri(out, episode_id)
    text = storage.try_read_text(marker)
    return None if text is None else _parse_marker(out, marker, text, episode_id)


def committed_records(out: str, skip: Container[str] = ()) -> dict[str, EpisodeRecord]:
    """Every committed episode of the output, by episode id, but those in `skip` (ids whose
    records the caller holds: their markers are listed, not read). SpecError, naming the
    file, for a marker whose record is not its episode's (`_parse_marker`)."""
    ids = [n.removesuffix(".json") for n in storage.list_names(storage.join(out, COMMITS_DIR), suffix=".json")]
    ids = [i for i in ids if i not in skip]
    markers = [commit_uri(out, i) for i in ids]
    texts = storage.read_many(markers)
    records = [_parse_marker(out, m, t, i) for m, t, i in zip(markers, texts, ids, strict=True) if t is not None]
    return {r.episode_id: r for r in records}


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


def stage_episode(out: str, episode: Episode, index: int, features: FeatureSpec, *,
                  score: float | None = None, success: bool | None = None,
                  checks: dict[str, float] | None = None) -> EpisodeRecord:
    """Store `episode`'s data under OUT (not yet committed); returns the record to commit
    (`checks`: the plausibility check's values, workers.scoring.check_episode)."""
    from sim_model.data.store import EpisodeStore

    meta = episode.meta
    target = episode_uri(out, meta.episode_id)
    if storage.is_remote(out):
        target = f"{target}.{uuid.uuid4().hex[:12]}"
    staged = storage.staging_dir(target)
    try:
        store = EpisodeStore.create(staged, features)
        store.append(episode)
    except BaseException:
        storage.discard_staged(staged)
        raise
    # Local: an uncommitted copy at `target` is a leftover of an interrupted attempt: replace it.
    storage.publish_dir(staged, target, replace=True)
    return EpisodeRecord(episode_id=meta.episode_id, index=index, uri=target, length=len(episode),
                         checksum=episode.checksum(), seed=meta.seed if meta.seed is not None else 0,
                         source=meta.source, model_hash=meta.model_hash, score=score, success=success,
                         plausibility=None if checks is None else checks["plausibility"],
                         checks=checks, node_id=current_node())


def check_stored(record: EpisodeRecord) -> None:
    """EpisodeNotStored unless `record.uri` holds exactly this episode: one episode, its id, its
    length (the store is opened; the frames are not read back)."""
    from sim_model.data.store import EpisodeStore

    try:
        store = EpisodeStore.open(record.uri, "r")
        found = (len(store), store.meta(0).episode_id if len(store) else None, store.n_frames)
    except SpecError as error:
        raise EpisodeNotStored(
            f"episode {record.episode_id} is not committed: its data at {record.uri} cannot be read "
            f"({error}). Another process may have removed it (a second run cleaning up this "
            "output?); rerun the job to make it again.") from None
    expected = (1, record.episode_id, record.length)
    if found != expected:
        raise EpisodeNotStored(f"episode {record.episode_id} is not committed: {record.uri} holds "
                               f"(episodes, id, frames) = {found}, expected {expected}.")


def commit(out: str, record: EpisodeRecord) -> EpisodeRecord:
    """Write the commit marker unless another writer did; returns the record that stands. The
    marker is written only after the episode's data is verified present (`check_stored`)."""
    check_stored(record)
    if storage.write_new(commit_uri(out, record.episode_id), record.model_dump_json(indent=1)):
        log.debug("committed %s (%d steps)", record.episode_id, record.length)
        return record
    winner = read_commit(out, record.episode_id)
    if winner is None:  # cannot happen: the marker refused us because it exists
        raise CommitConflict(f"the commit marker of {record.episode_id} exists but cannot be read.")
    if winner.uri != record.uri and storage.is_remote(out):
        storage.remove_tree(record.uri)  # our upload is referenced by nothing
    if winner.checksum != record.checksum:
        raise CommitConflict(
            f"episode {record.episode_id} was committed by another writer with different content "
            f"(checksum {winner.checksum[:12]} there, {record.checksum[:12]} here). The first commit "
            "stands; two runs made different frames for one episode, so check that they use the "
            "same spec, checkpoint and iws version, or delete the marker "
            f"{commit_uri(out, record.episode_id)} and rerun to regenerate it.")
    log.info("%s was committed by another writer first (same checksum); keeping its copy",
             record.episode_id)
    return winner


def write_episode(out: str, episode: Episode, index: int, features: FeatureSpec, *,
                  score: float | None = None, success: bool | None = None,
                  checks: dict[str, float] | None = None) -> EpisodeRecord:
    """Store `episode` under OUT and commit it; returns its record (the existing one if committed)."""
    existing = read_commit(out, episode.meta.episode_id)
    if existing is not None:
        return existing
    return commit(out, stage_episode(out, episode, index, features, score=score, success=success,
                                      checks=checks))


def drop_commits_without_data(out: str, records: dict[str, EpisodeRecord], lease: Lease, *,
                              held: AbstractSet[tuple[str, str]] = frozenset()) -> dict[str, EpisodeRecord]:
    """The records whose data is present (a store root under episodes/, or in `held`: the
    (episode id, checksum) pairs whose data the datasets' parts hold, workers/parts.py); the
    others are uncommitted. One listing, so a resume checks every marker cheaply; checksums are
    checked when a part is made from the stored episodes."""
    present = storage.children_with(storage.join(out, EPISODES_DIR), STORE_ROOT_FILE)
    missing = {k: r for k, r in records.items() if stored_uri(out, r).rsplit("/", 1)[-1] not in present
               and (r.episode_id, r.checksum) not in held}
    uncommit(out, [(r, f"its data at {stored_uri(out, r)} is missing") for r in missing.values()], lease)
    return {k: r for k, r in records.items() if k not in missing}


def uncommit(out: str, damaged: list[tuple[EpisodeRecord, str]], lease: Lease) -> None:
    """Withdraw committed episodes whose data is missing or damaged (`reason` each): the marker
    goes first, then the data, so that the episode is made again by the next pass."""
    if not damaged:
        return
    lease.verify()
    stores = [removable_store(out, record) for record, _ in damaged]  # all checked before any goes
    for (record, reason), store in zip(damaged, stores, strict=True):
        log.warning("episode %s: %s; its commit marker is removed and it will be regenerated",
                    record.episode_id, reason)
        storage.remove_file(commit_uri(out, record.episode_id))
        storage.remove_tree(store)


def remove_orphan_uploads(out: str, committed: Iterable[EpisodeRecord], lease: Lease) -> int:
    """s3:// only: delete episode uploads no commit marker names (killed writers, lost races).
    Call only while no writer of this output runs, holding its lease (checked first: another
    run's finished but uncommitted uploads look exactly like orphans). Returns how many."""
    if not storage.is_remote(out):
        return 0
    lease.verify()
    root = storage.join(out, EPISODES_DIR)
    kept = {stored_uri(out, r) for r in committed}
    orphans = [storage.join(root, n) for n in storage.list_names(root)
               if storage.join(root, n) not in kept]
    for uri in orphans:
        storage.remove_tree(uri)
    if orphans:
        log.info("removed %d uncommitted episode uploads under %s", len(orphans), root)
    return len(orphans)
