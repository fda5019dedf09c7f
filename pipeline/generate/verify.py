"""Check a job's output against what its records say it holds; mark what fails so that the
resume makes exactly that again.

A part's record (workers/parts.py) lists the files it wrote that stay as written, with their
sizes: its Zarr shard's, its LeRobot videos and part metadata. The LeRobot copy's completion
marker (OUT/lerobot.done.json) lists every file of the assembled copy with its size. So:

    quick (every resume; one listing each of dataset/, lerobot/ and parts/)
        each recorded file is there, with its recorded size
    deep (`iws verify`, `iws generate --verify`): quick, and the data read back
        each shard holds its record's episodes, each with the checksum it was committed with
        (a bit flip that still decodes); meta/info.json parses; each part's LeRobot data file
        is a Parquet file of the part's frames

What fails is marked, under the output's lease (`mark`), for the resume to make again:

    a part's shard       its record goes (the group's commit): the group is rolled again
                         (same seeds, same bytes)
    a part's LeRobot     (its shard sound) its record is rewritten as a Zarr-only part, so the
    files                replica makes its LeRobot files again from the shard, nothing rolled
    LeRobot metadata     the completion marker goes: the copy is assembled again

The Zarr index is rewritten whole by every assembly, and an assembly follows a part written
again (the completion marker digests the part records, each write of a part with its own id).
Records of iws versions before `files` get the check they had then (the shard is there).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from pipeline.generate.outputs import DATASET_DIR, JOB_FILE, LEROBOT_DIR, LEROBOT_DONE, job_record
from schemas import ExportRecord, JobSpec, PartRecord, SpecError
from sim_model import storage
from sim_model.data.shards import INDEX_FILE, read_index, shard_uri
from workers import parts
from workers.lease import Lease

log = logging.getLogger(__name__)

LEGACY_SHARD_ROOT = ".zattrs"  # a zarr-2 shard's root attributes, written last

Kind = Literal["shard", "lerobot", "lerobot-meta", "index"]


@dataclass(frozen=True)
class Finding:
    """One thing of the output that is not what its record says: the part it belongs to (None
    for the LeRobot copy's metadata), what it breaks, the file and why."""

    key: int | None
    kind: Kind
    path: str  # relative to the output
    why: str

    def __str__(self) -> str:
        where = {"lerobot-meta": "LeRobot metadata", "index": "Zarr index"}.get(self.kind, f"part {self.key} ({self.kind})")
        return f"{where}: {self.path} {self.why}"


def job_of(out: str) -> JobSpec:
    """The spec of the job whose output `out` is (from OUT/job.json, its output path `out`);
    SpecError if `out` is not a job's output."""
    text = storage.try_read_text(storage.join(out, JOB_FILE))
    if text is None:
        raise SpecError(f"{out} has no {JOB_FILE}, so it is not the output of an iws generation job. Name "
                        "the output directory of a job (its spec's output.path, or `iws generate --output`).")
    record = job_record(out, text)
    if not isinstance(record.get("spec"), dict):
        raise SpecError(f"{storage.join(out, JOB_FILE)} was written by an iws version that did not record "
                        "the job's spec; rerun the job with its spec file (`iws generate SPEC`) instead.")
    spec = JobSpec.model_validate(record["spec"])
    return spec.model_copy(update={"output": spec.output.model_copy(update={"path": out})})


def parts_digest(found: dict[int, PartRecord]) -> str:
    """sha256 over the part records, in key order: what the LeRobot copy was assembled from."""
    digest = hashlib.sha256()
    for key in sorted(found):
        digest.update(found[key].model_dump_json().encode())
    return digest.hexdigest()


def inspect(out: str, found: dict[int, PartRecord], *, deep: bool = False) -> list[Finding]:
    """Everything of the output that is not as its records say, part by part (see the module
    docstring for what `deep` adds). Reads only what is recorded: a file nobody recorded is
    not its business (the assembly removes strays)."""
    listed = {top: storage.file_sizes(storage.join(out, top)) for top in (DATASET_DIR, LEROBOT_DIR, parts.PARTS_DIR)}
    findings: list[Finding] = []
    for key, part in sorted(found.items()):
        if not part.episodes:
            continue
        found_part = _check_files(key, part, listed)
        if deep and not any(f.kind == "shard" for f in found_part):
            found_part += _check_shard_data(out, key, part)
        findings += found_part
    findings += _check_lerobot(out, found, listed[LEROBOT_DIR], deep, findings)
    return findings


def _check_files(key: int, part: PartRecord, listed: dict[str, dict[str, int]]) -> list[Finding]:
    if part.files is None:  # recorded before sizes were: the shard's root is there
        path = f"{parts.shard_relative(key)}/{LEGACY_SHARD_ROOT}"
        return [] if _size(listed, path) is not None else [Finding(key, "shard", path, "is missing")]
    findings = []
    for path, size in sorted(part.files.items()):
        got = _size(listed, path)
        if got != size:
            why = "is missing" if got is None else f"has {got} bytes, its part wrote {size}"
            findings.append(Finding(key, "shard" if path.startswith(f"{DATASET_DIR}/") else "lerobot", path, why))
    return findings


def _size(listed: dict[str, dict[str, int]], path: str) -> int | None:
    top, _, rest = path.partition("/")
    return listed.get(top, {}).get(rest)


def _check_shard_data(out: str, key: int, part: PartRecord) -> list[Finding]:
    """The shard read back: the record's episodes, in order, each with its checksum."""
    from sim_model.data.store import EpisodeStore

    path = parts.shard_relative(key)
    try:
        store = EpisodeStore.open(shard_uri(storage.join(out, DATASET_DIR), key), "r")
        if len(store) != len(part.episodes):
            return [Finding(key, "shard", path, f"holds {len(store)} episodes, its part record {len(part.episodes)}")]
        for row, (episode_id, checksum) in enumerate(part.episodes):
            if store.episode(row).checksum() != checksum:
                return [Finding(key, "shard", path, f"holds episode {episode_id} with other data than was "
                                f"committed (checksum {checksum[:12]})")]
    except (SpecError, OSError, ValueError, KeyError, IndexError) as error:
        return [Finding(key, "shard", path, f"cannot be read ({str(error).splitlines()[0][:200]})")]
    return []


def _check_lerobot(out: str, found: dict[int, PartRecord], listed: dict[str, int], deep: bool,
                   earlier: list[Finding]) -> list[Finding]:
    """The assembled LeRobot copy against its completion marker (nothing to check without one:
    the resume assembles it)."""
    marker = _done_record(out)
    if marker is None or marker.files is None:
        return []
    by_file = _files_of_parts(found)
    seen = {f.path for f in earlier}  # a part's video, checked with the part already
    findings = []
    for name, size in sorted(marker.files.items()):
        got = listed.get(name)
        if got != size and f"{LEROBOT_DIR}/{name}" not in seen:
            why = "is missing" if got is None else f"has {got} bytes, the assembly wrote {size}"
            path = f"{LEROBOT_DIR}/{name}"
            key = by_file.get(path)
            findings.append(Finding(key, "lerobot" if key is not None else "lerobot-meta", path, why))
    if deep:
        findings += _read_lerobot(out, found, by_file, {f.path for f in (*earlier, *findings)})
    return findings


def _done_record(out: str) -> ExportRecord | None:
    text = storage.try_read_text(storage.join(out, LEROBOT_DONE))
    try:
        return None if text is None else ExportRecord.model_validate_json(text)
    except ValidationError:
        return None  # a damaged marker: the resume assembles the copy again anyway


def _files_of_parts(found: dict[int, PartRecord]) -> dict[str, int]:
    """LeRobot file (relative to the output) -> the part it holds frames of: data file, videos."""
    from sim_model.data.formats.lerobot_parts import data_uri

    owner = {}
    for key, part in found.items():
        if "lerobot" in part.formats and part.episodes:
            owner[data_uri(LEROBOT_DIR, key)] = key
            owner.update({path: key for path in (part.files or {}) if path.startswith(f"{LEROBOT_DIR}/videos/")})
    return owner


def _read_lerobot(out: str, found: dict[int, PartRecord], by_file: dict[str, int],
                  failed: set[str]) -> list[Finding]:
    import pyarrow.parquet as pq

    findings = []
    info = f"{LEROBOT_DIR}/meta/info.json"
    if info not in failed:
        try:
            json.loads(storage.try_read_text(storage.join(out, info)) or "")
        except json.JSONDecodeError as error:
            findings.append(Finding(None, "lerobot-meta", info, f"is not JSON ({error})"))
    for path, key in sorted(by_file.items()):
        if path in failed or not path.endswith(".parquet"):
            continue
        try:
            rows = pq.read_metadata(io.BytesIO(storage.try_read_bytes(storage.join(out, path)) or b"")).num_rows
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            findings.append(Finding(key, "lerobot", path, f"is not a Parquet file ({error})"))
            continue
        if rows != found[key].frames:
            findings.append(Finding(key, "lerobot", path, f"holds {rows} rows, its part {found[key].frames} frames"))
    return findings


def check_index(out: str, found: dict[int, PartRecord]) -> list[Finding]:
    """The Zarr dataset's index against the part records: each row in the dataset names a part
    holding that episode, with that checksum, at that offset. (Every assembly rewrites it.)"""
    path = f"{DATASET_DIR}/{INDEX_FILE}"
    try:
        rows, _ = read_index(storage.join(out, DATASET_DIR))
    except (SpecError, OSError, ValueError) as error:
        return [Finding(None, "index", path, f"cannot be read ({str(error).splitlines()[0][:200]}); "
                        "a finished run writes it")]
    wrong = [r for r in rows if r.in_dataset and (r.shard not in found or r.offset >= len(found[r.shard].episodes)
             or found[r.shard].episodes[r.offset] != (r.episode_id, r.checksum))]
    if not wrong:
        return []
    return [Finding(None, "index", path, f"names {len(wrong)} episodes no part holds as it says "
                    f"(first: {wrong[0].episode_id} in shard {wrong[0].shard})")]


def mark(out: str, found: dict[int, PartRecord], findings: Iterable[Finding], lease: Lease) -> dict[int, PartRecord]:
    """Have the resume make again what `findings` name (see the module docstring); returns the
    part records it still trusts (a LeRobot-damaged part as a Zarr-only part). Logs each."""
    findings = list(findings)
    if not findings:
        return found
    lease.verify()
    trusted = dict(found)
    for finding in findings:
        log.warning("%s; it is made again", finding)
    for key in sorted({f.key for f in findings if f.kind == "shard"}):
        storage.remove_file(parts.marker_uri(out, key))
        trusted.pop(key, None)
    for key in sorted({f.key for f in findings if f.kind == "lerobot"} & set(trusted)):
        zarr_only = trusted[key].model_copy(update={"formats": ["zarr"]})
        storage.write_atomic(parts.marker_uri(out, key), zarr_only.model_dump_json(indent=1))
        trusted[key] = zarr_only
    storage.remove_file(storage.join(out, LEROBOT_DONE))  # whatever failed, the copy is assembled again
    return trusted
