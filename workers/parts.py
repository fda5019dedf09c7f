"""The job's LeRobot dataset, written in parts by the replicas (sim_model/data/formats/lerobot_parts.py).

Each group of episodes, once its episodes are committed, becomes one part: its kept episodes
(the filter's), encoded by the replica that rolled them, at their place in the final dataset.

    OUT/lerobot/data/..., OUT/lerobot/videos/...   the part's data file and videos
    OUT/lerobot_parts/<key:08d>/                   its own metadata, for assembly
    OUT/lerobot_parts/<key:08d>.json               its PartRecord, written last

The key is the index of the group's first episode, so parts sort in episode order. A part is
current when its record lists exactly the group's kept committed episodes, with their checksums,
under the job's camera keys; otherwise the replica makes it again from the committed episodes
(read back from their stores; nothing is rolled again). Two writers of one part write the same
episodes, so whichever files and record land last are equally right; the record is written
after the files. The driver assembles the parts into one dataset at the end of the job
(pipeline/generate/consolidate.py: `assemble_lerobot`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from schemas import EpisodeRecord, EpisodeSpec, FeatureSpec, JobSpec, PartRecord, SpecError
from sim_model import storage
from sim_model.data.episode import Episode
from workers.lease import Lease
from workers.scoring import is_kept
from workers.writer import stored_uri

log = logging.getLogger(__name__)

LEROBOT_DIR = "lerobot"
PARTS_DIR = "lerobot_parts"


def wants_parts(job: JobSpec) -> bool:
    return "lerobot" in job.output.formats


def part_key(group: Sequence[EpisodeSpec]) -> int:
    return group[0].index


def parts_root(out: str) -> str:
    return storage.join(out, PARTS_DIR)


def marker_uri(out: str, key: int) -> str:
    return storage.join(out, PARTS_DIR, f"{key:08d}.json")


def read_parts(out: str) -> dict[int, PartRecord]:
    """Every part record of the output, by key."""
    root = parts_root(out)
    names = storage.list_names(root, suffix=".json")
    texts = storage.read_many([storage.join(root, name) for name in names])
    records = [PartRecord.model_validate_json(t) for t in texts if t is not None]
    return {r.key: r for r in records}


def read_parts_of(out: str, key: int) -> PartRecord | None:
    text = storage.try_read_text(marker_uri(out, key))
    return None if text is None else PartRecord.model_validate_json(text)


def kept(job: JobSpec, records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The group's episodes that enter the datasets (the filter's mode), in index order."""
    return sorted((r for r in records if is_kept(job.filter, r.success)), key=lambda r: r.index)


def is_current(part: PartRecord | None, job: JobSpec, records: Sequence[EpisodeRecord]) -> bool:
    """Whether `part` holds exactly the kept episodes of `records` under the job's camera keys."""
    return (part is not None and part.camera_keys == job.output.lerobot_camera_keys
            and part.episodes == [(r.episode_id, r.checksum) for r in kept(job, records)])


def write_part(out: str, job: JobSpec, key: int, episodes: Sequence[Episode],
               records: Sequence[EpisodeRecord], features: FeatureSpec) -> PartRecord:
    """Make part `key` from the group's committed `records` and their `episodes` (same order),
    then write its record. SpecError if an episode is not what its record says."""
    from sim_model.data.formats.lerobot_parts import write_part as write_files

    chosen = {r.episode_id for r in kept(job, records)}
    pairs = sorted(((r, e) for r, e in zip(records, episodes, strict=True) if r.episode_id in chosen),
                   key=lambda pair: pair[0].index)
    for record, episode in pairs:
        if episode.checksum() != record.checksum:
            raise SpecError(f"episode {record.episode_id} differs from its committed data (checksum "
                            f"{record.checksum[:12]}); its LeRobot part is not written. Rerun the job.")
    frames = 0
    if pairs:
        frames = write_files([e for _, e in pairs], features, storage.join(out, LEROBOT_DIR),
                             parts_root(out), key, tasks=[e.meta.task or job.task or "" for _, e in pairs],
                             camera_keys=job.output.lerobot_camera_keys or None)
    part = PartRecord(key=key, episodes=[(r.episode_id, r.checksum) for r, _ in pairs], frames=frames,
                      camera_keys=job.output.lerobot_camera_keys)
    storage.write_atomic(marker_uri(out, key), part.model_dump_json(indent=1))
    log.debug("LeRobot part %d: %d episodes, %d frames", key, len(pairs), frames)
    return part


def stored_episodes(out: str, records: Sequence[EpisodeRecord]) -> list[Episode] | None:
    """The committed episodes of `records`, read back from their stores; None (logged) if one
    cannot be read or is not what its record says. Such an episode is the driver's to withdraw
    (consolidation checks every checksum) and to have made again, with its part."""
    from sim_model.data.store import EpisodeStore

    episodes = []
    for record in records:
        uri = stored_uri(out, record)
        try:
            episode = EpisodeStore.open(uri, "r").episode(0)
        except (SpecError, IndexError) as error:
            log.warning("episode %s at %s cannot be read (%s); its LeRobot part waits until it is "
                        "made again", record.episode_id, uri, error)
            return None
        if episode.checksum() != record.checksum:
            log.warning("episode %s at %s differs from its commit marker; its LeRobot part waits "
                        "until it is made again", record.episode_id, uri)
            return None
        episodes.append(episode)
    return episodes


def withdraw(out: str, keys: Sequence[int], lease: Lease) -> None:
    """Remove the records of parts that are not current; the next pass makes them again."""
    if not keys:
        return
    lease.verify()
    for key in keys:
        storage.remove_file(marker_uri(out, key))
