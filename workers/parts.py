"""The job's datasets, written in parts by the replicas: one part per group of episodes.

Once a group's episodes are committed, the replica that rolled them writes the group's kept
episodes (the filter's) at their place in each final dataset:

    OUT/dataset/shards/<key:08d>.zarr              its shard of the Zarr dataset (an EpisodeStore,
                                                   Diffusion-Policy layout; sim_model/data/shards.py)
    OUT/lerobot/data/..., OUT/lerobot/videos/...   with LeRobot output: its data file and videos
                                                   (sim_model/data/formats/lerobot_parts.py)
    OUT/parts/<key:08d>/                           the LeRobot part's own metadata, for assembly
    OUT/parts/<key:08d>.json                       its PartRecord, written last

The key is the index of the group's first episode, so parts sort in episode order. A part is
current when its record lists exactly the group's kept committed episodes, with their checksums,
in the job's formats under its camera keys; otherwise the replica makes it again from the
committed episodes (read back from their stores; nothing is rolled again). Two writers of one
part write the same episodes, so whichever files and record land last are equally right; the
record is written after the files. The driver assembles the parts at the end of the job
(pipeline/generate/consolidate.py): an index for the Zarr dataset, metadata for LeRobot; no
frame is read or copied.
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
from workers.writer import removable_store, stored_uri

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
    """The part record in the file `uri`; SpecError, naming it, if it is empty, not a record, or
    the record of another part than its name says (the key places the part in the datasets)."""
    fix = ("Delete it: the group's part is made again from its committed episodes (those whose own "
           "stores were released with the part are made again too), then rerun.")
    part = parse_record(PartRecord, text, f"the part record {uri}", fix)
    if uri.rsplit("/", 1)[-1] != f"{part.key:08d}.json":
        raise SpecError(f"the part record {uri} holds the record of part {part.key}; it is damaged, or not "
                        f"a file iws wrote. {fix}")
    return part


def kept(job: JobSpec, records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The group's episodes that enter the datasets (the filter's mode), in index order."""
    return sorted((r for r in records if is_kept(job.filter, r.success, r.plausibility)), key=lambda r: r.index)


def is_current(part: PartRecord | None, job: JobSpec, records: Sequence[EpisodeRecord]) -> bool:
    """Whether `part` holds exactly the kept episodes of `records` in the job's formats under its
    camera keys."""
    return (part is not None and part.camera_keys == job.output.lerobot_camera_keys
            and part.formats == part_formats(job)
            and part.episodes == [(r.episode_id, r.checksum) for r in kept(job, records)])


def write_part(out: str, job: JobSpec, key: int, episodes: Sequence[Episode | None],
               records: Sequence[EpisodeRecord], features: FeatureSpec) -> PartRecord:
    """Make part `key` from the group's committed `records` and their `episodes` (same order; an
    episode the filter leaves out may be None), then write its record. SpecError if a kept
    episode is missing or not what its record says."""
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
                      camera_keys=job.output.lerobot_camera_keys, made=uuid.uuid4().hex, files=files)
    storage.write_atomic(marker_uri(out, key), part.model_dump_json(indent=1))
    log.debug("part %d (%s): %d episodes, %d frames", key, "+".join(formats), len(pairs), part.frames)
    return part


def release_stores(out: str, job: JobSpec, records: Sequence[EpisodeRecord]) -> None:
    """Delete the episodes' own stores once their group's part is written: from then on the
    datasets hold their data (unless output.keep_episode_stores)."""
    if job.output.keep_episode_stores:
        return
    stores = [removable_store(out, record) for record in records]
    for uri in stores:
        storage.remove_tree(uri)


def held_by_parts(found: dict[int, PartRecord]) -> set[tuple[str, str]]:
    """(episode id, checksum) of every committed episode whose data a part holds (`found`: part
    records whose shards are sound, pipeline/generate/verify.py): its kept episodes, and the
    episodes it records as left out (they need no data). A resume keeps their commit markers
    although their own stores are gone."""
    held: set[tuple[str, str]] = set()
    for part in found.values():
        held.update(part.rejected)
        held.update(part.episodes)
    return held


def read_committed(out: str, record: EpisodeRecord, part: PartRecord | None) -> Episode | str:
    """A committed episode from its own store or, where that is gone, from the shard of its
    group's `part` (when that part lists it with the same checksum); else why it cannot be had."""
    from sim_model.data.store import EpisodeStore

    uri, row = stored_uri(out, record), 0
    pair = (record.episode_id, record.checksum)
    if part is not None and pair in part.episodes and not storage.exists(uri):
        uri, row = shard_uri(storage.join(out, DATASET_DIR), part.key), part.episodes.index(pair)
    try:
        episode = EpisodeStore.open(uri, "r").episode(row)
    except (SpecError, IndexError) as error:
        storage.exists(uri)  # raises if the storage itself is unreachable: not the episode's fault
        return f"its data at {uri} cannot be read ({error})"
    if episode.checksum() != record.checksum:
        return f"its data at {uri} does not match the checksum in its commit marker"
    return episode


def stored_episodes(out: str, job: JobSpec, records: Sequence[EpisodeRecord],
                    part: PartRecord | None = None) -> list[Episode | None] | None:
    """The group's kept committed episodes, in the order of `records` (None for those the filter
    leaves out), read back by `read_committed`. None (logged) if one cannot be had: such an
    episode is the driver's to withdraw (`consolidate.damaged_episodes`) and to have made
    again, with its part."""
    chosen = {r.episode_id for r in kept(job, records)}
    episodes: list[Episode | None] = []
    for record in records:
        found = read_committed(out, record, part) if record.episode_id in chosen else None
        if isinstance(found, str):
            log.warning("episode %s: %s; its group's part waits until it is made again",
                        record.episode_id, found)
            return None
        episodes.append(found)
    return episodes
