"""The job's commit unit and its datasets: one part per group of episodes.

Once a group is rolled, the replica that rolled it writes the group's kept episodes (the
filter's) at their place in each final dataset, then commits the group:

    OUT/dataset/shards/<key:08d>.zarr              its shard of the Zarr dataset (a packed
                                                   EpisodeStore, 13 objects; sim_model/data/shards.py)
    OUT/lerobot/data/..., OUT/lerobot/videos/...   with LeRobot output: its data file and videos
                                                   (sim_model/data/formats/lerobot_parts.py)
    OUT/parts/<key:08d>/                           the LeRobot part's own metadata, for assembly
    OUT/parts/<key:08d>.json                       its PartRecord, created last and only if absent
                                                   (a conditional create): the group's commit

The key is the index of the group's first episode, so parts sort in episode order. The part
record carries the record of every episode of the group (kept or left out), so committing a
group is one conditional create and a resume lists one object per group, not one per episode.
When two writers race for one group, exactly one create wins; the loser checks that the
winner's checksums are its own (a retried group replays the same batch, byte for byte, so its
files are the winner's too) or raises CommitConflict.

A part is current when its record lists exactly the group's kept committed episodes, with their
checksums, in the job's formats under its camera keys; a committed part that is not (other
formats or camera keys; LeRobot files found damaged) is made again from its shard, nothing
rolled, and its record replaced. A group that grew (a job resumed with more episodes) is rolled
again; its committed episodes keep their records and data. The driver assembles the parts at
the end of the job (pipeline/generate/consolidate.py): an index for the Zarr dataset, metadata
for LeRobot; no frame is read or copied.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from schemas import EpisodeRecord, EpisodeSpec, FeatureSpec, JobSpec, PartRecord, SpecError
from schemas.errors import parse_record
from sim_model import storage
from sim_model.data.episode import Episode
from sim_model.data.shards import SHARDS_DIR, shard_name, shard_uri, write_shard
from workers.scoring import is_kept
from workers.writer import CommitConflict

log = logging.getLogger(__name__)

DATASET_DIR = "dataset"
LEROBOT_DIR = "lerobot"
PARTS_DIR = "parts"


def part_formats(job: JobSpec) -> list[str]:
    """The formats each part is written in: the Zarr shard always ('lerobot' implies 'zarr')."""
    return sorted({"zarr", *job.output.formats})


def part_key(group: Sequence[EpisodeSpec]) -> int:
    return group[0].index


def parts_root(out: str) -> str:
    return storage.join(out, PARTS_DIR)


def dataset_root(out: str) -> str:
    return storage.join(out, DATASET_DIR)


def shard_relative(key: int) -> str:
    """Part `key`'s shard, relative to the output (as PartRecord.files names its files)."""
    return f"{DATASET_DIR}/{SHARDS_DIR}/{shard_name(key)}"


def relative(out: str, uri: str) -> str:
    """`uri`, a file under the output `out`, as a path relative to it."""
    prefix = out.rstrip("/") + "/"
    if not uri.startswith(prefix):
        raise ValueError(f"{uri} is not under {out}")
    return uri[len(prefix):]


def marker_uri(out: str, key: int) -> str:
    return storage.join(out, PARTS_DIR, f"{key:08d}.json")


def read_parts(out: str) -> dict[int, PartRecord]:
    """Every part record of the output, by key; SpecError naming a damaged one (`parse_part`)."""
    root = parts_root(out)
    uris = [storage.join(root, name) for name in storage.list_names(root, suffix=".json")]
    records = [parse_part(u, t) for u, t in zip(uris, storage.read_many(uris), strict=True) if t is not None]
    return {r.key: r for r in records}


def read_parts_of(out: str, key: int) -> PartRecord | None:
    uri = marker_uri(out, key)
    text = storage.try_read_text(uri)
    return None if text is None else parse_part(uri, text)


def parse_part(uri: str, text: str) -> PartRecord:
    """The part record in the file `uri`; SpecError, naming it, if it is empty, not a record, the
    record of another part than its name says (the key places the part in the datasets), commits
    episodes of another group (an index below its key, or twice), or lists a file outside the
    output's datasets (a resume checks every file a record lists)."""
    fix = ("Delete it: the group is made again (same seeds, same bytes), then rerun.")
    part = parse_record(PartRecord, text, f"the part record {uri}", fix)
    if uri.rsplit("/", 1)[-1] != f"{part.key:08d}.json":
        raise SpecError(f"the part record {uri} holds the record of part {part.key}; it is damaged, or not "
                        f"a file iws wrote. {fix}")
    records = part.records or []
    if any(r.index < part.key for r in records) or len({r.episode_id for r in records}) != len(records):
        first = min(r.index for r in records)
        raise SpecError(f"the part record {uri} commits episode {first} (or one episode twice), which is "
                        f"not in the group starting at episode {part.key}; it is damaged, or not a file iws "
                        f"wrote. {fix}")
    outside = [p for p in part.files or {} if not _inside_datasets(p)]
    if outside:
        raise SpecError(f"the part record {uri} lists {outside[0]!r}, which is not a file of the output's "
                        f"{DATASET_DIR}/, {LEROBOT_DIR}/ or {PARTS_DIR}/; it is damaged, or not a file iws "
                        f"wrote. Nothing it names was touched. {fix}")
    return part


def _inside_datasets(path: str) -> bool:
    """Whether `path`, relative to the output, names a place under its datasets or parts."""
    pieces = path.split("/")
    return (pieces[0] in (DATASET_DIR, LEROBOT_DIR, PARTS_DIR) and len(pieces) > 1
            and all(p not in ("", ".", "..") for p in pieces) and "\\" not in path)


def kept(job: JobSpec, records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The group's episodes that enter the datasets (the filter's mode), in index order."""
    return sorted((r for r in records if is_kept(job.filter, r.success, r.plausibility)), key=lambda r: r.index)


def is_current(part: PartRecord | None, job: JobSpec, records: Sequence[EpisodeRecord]) -> bool:
    """Whether `part` holds exactly the kept episodes of `records` in the job's formats under its
    camera keys."""
    return (part is not None and part.camera_keys == job.output.lerobot_camera_keys
            and part.formats == part_formats(job)
            and part.episodes == [(r.episode_id, r.checksum) for r in kept(job, records)])


def records_of(part: PartRecord | None) -> dict[str, EpisodeRecord]:
    """The episodes `part` commits, by id ({} for none, or a record of an iws version before
    group commits)."""
    return {} if part is None or part.records is None else {r.episode_id: r for r in part.records}


def committed(found: dict[int, PartRecord]) -> dict[str, EpisodeRecord]:
    """Every committed episode of the part records `found`, by id."""
    return {k: r for part in found.values() for k, r in records_of(part).items()}


def committed_records(out: str) -> dict[str, EpisodeRecord]:
    """Every committed episode of the output `out`, by id (one listing of its part records)."""
    return committed(read_parts(out))


def write_part(out: str, job: JobSpec, key: int, episodes: Sequence[Episode | None],
               records: Sequence[EpisodeRecord], features: FeatureSpec, *,
               previous: PartRecord | None = None) -> PartRecord:
    """Make part `key` from the group's `records` and their `episodes` (same order; an episode
    the filter leaves out may be None), then commit it: its record is created if the group had
    none (`previous` None), else it replaces `previous` (the group grew, or the part is made
    again). Returns the record that stands: ours, or a racing writer's with the same checksums.
    SpecError if a kept episode is missing or not what its record says; CommitConflict if
    another writer committed the group with other data."""
    chosen = {r.episode_id for r in kept(job, records)}
    pairs = sorted(((r, e) for r, e in zip(records, episodes, strict=True) if r.episode_id in chosen),
                   key=lambda pair: pair[0].index)
    for record, episode in pairs:
        if episode is None or episode.checksum() != record.checksum:
            raise SpecError(f"episode {record.episode_id} differs from its committed data (checksum "
                            f"{record.checksum[:12]}); its part is not written. Rerun the job.")
    formats = part_formats(job)
    chosen_episodes = [e for _, e in pairs if e is not None]
    files: dict[str, int] = {}
    if chosen_episodes:
        shard = shard_relative(key)
        sizes = write_shard(storage.join(out, DATASET_DIR), key, chosen_episodes, features)
        files.update({f"{shard}/{name}": size for name, size in sizes.items()})
    if chosen_episodes and "lerobot" in formats:
        from sim_model.data.formats.lerobot_parts import write_part as write_lerobot

        sizes = write_lerobot(chosen_episodes, features, storage.join(out, LEROBOT_DIR), parts_root(out), key,
                              tasks=[e.meta.task or job.task or "" for e in chosen_episodes],
                              camera_keys=job.output.lerobot_camera_keys or None)
        files.update({relative(out, uri): size for uri, size in sizes.items()})
    left_out = sorted((r for r in records if r.episode_id not in chosen), key=lambda r: r.index)
    part = PartRecord(key=key, episodes=[(r.episode_id, r.checksum) for r, _ in pairs],
                      rejected=[(r.episode_id, r.checksum) for r in left_out],
                      frames=sum(len(e) for e in chosen_episodes), formats=formats,
                      camera_keys=job.output.lerobot_camera_keys, made=uuid.uuid4().hex,
                      records=sorted(records, key=lambda r: r.index), files=files)
    text = part.model_dump_json(indent=1)
    if previous is not None:
        storage.write_atomic(marker_uri(out, key), text)
    elif not storage.write_new(marker_uri(out, key), text):
        return _race_lost(out, key, part)
    log.debug("part %d (%s): %d episodes, %d frames", key, "+".join(formats), len(pairs), part.frames)
    return part


def _race_lost(out: str, key: int, ours: PartRecord) -> PartRecord:
    """The record another writer created for group `key` first, if it commits the same episodes
    with the same checksums (then its files are ours, byte for byte); CommitConflict otherwise."""
    winner = read_parts_of(out, key)
    mine = {(r.episode_id, r.checksum) for r in ours.records or ()}
    theirs = {(r.episode_id, r.checksum) for r in (winner.records or ()) if winner is not None}
    if winner is None or mine != theirs:
        raise CommitConflict(
            f"group {key} was committed by another writer with other episodes or data than this one "
            f"made ({marker_uri(out, key)}). The first commit stands; two runs made different frames for "
            "one group, so check that they use the same spec, checkpoint and iws version, or delete that "
            "part record and rerun to make the group again.")
    log.info("group %d was committed by another writer first (same checksums); keeping its record", key)
    return winner


def read_committed(out: str, record: EpisodeRecord, part: PartRecord | None) -> Episode | str:
    """A committed episode from the shard of its group's `part` (which must list it with the
    same checksum); else why it cannot be had."""
    from sim_model.data.store import EpisodeStore

    pair = (record.episode_id, record.checksum)
    if part is None or pair not in part.episodes:
        return f"its group's part does not hold it with checksum {record.checksum[:12]}"
    uri, row = shard_uri(storage.join(out, DATASET_DIR), part.key), part.episodes.index(pair)
    try:
        episode = EpisodeStore.open(uri, "r").episode(row)
    except (SpecError, IndexError) as error:
        storage.exists(uri)  # raises if the storage itself is unreachable: not the episode's fault
        return f"its data at {uri} cannot be read ({error})"
    if episode.checksum() != record.checksum:
        return f"its data at {uri} does not match the checksum it was committed with"
    return episode


def stored_episodes(out: str, job: JobSpec, records: Sequence[EpisodeRecord],
                    part: PartRecord | None = None) -> list[Episode | None] | None:
    """The group's kept committed episodes, in the order of `records` (None for those the filter
    leaves out), read back from `part`'s shard by `read_committed`. None (logged) if one cannot
    be had: the group is then rolled again (workers/replica.py)."""
    chosen = {r.episode_id for r in kept(job, records)}
    episodes: list[Episode | None] = []
    for record in records:
        found = read_committed(out, record, part) if record.episode_id in chosen else None
        if isinstance(found, str):
            log.warning("episode %s: %s; its group is made again", record.episode_id, found)
            return None
        episodes.append(found)
    return episodes
