"""A resume checks what it trusts (pipeline/generate/verify.py) and `iws verify OUT`: damage to a
finished output's shards or LeRobot copy is found, named, and made again from the committed
episodes; a bit flip that keeps a file's size is found by reading back, and refused by export.

One small job (8 episodes x 4 steps, groups of 2, Zarr + LeRobot) is generated once; each test
damages a copy of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli import main
from sim_model.data.formats import open_dataset
from tests.fixtures.store import build_tiny_pusht_store
from tests.pipeline.generate.test_generate_job import _check_lerobot, marker_times
from tests.workers.jobs import job_dict, write_job
from workers.parts import committed_records


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, ray_cluster, tiny_checkpoint: Path) -> Path:
    root = tmp_path_factory.mktemp("verify")
    out = root / "out"
    store = build_tiny_pusht_store(root)
    job = job_dict(tiny_checkpoint, {"dataset": store.path}, out, episodes=8, horizon=4,
                   output={"path": str(out), "formats": ["zarr", "lerobot"]})
    assert main(["generate", str(write_job(root / "job.yaml", job)), "--no-progress"]) == 0
    return out


@pytest.fixture
def output(finished: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the finished job's output, and its job file (the output path made the copy's)."""
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    job = json.loads((out / "job.json").read_text())["spec"]
    job["output"]["path"] = str(out)
    return out, write_job(tmp_path / "job.yaml", job)


def _keys(out: Path) -> list[int]:
    return sorted(int(p.stem) for p in (out / "parts").glob("*.json"))


def _shard(out: Path, key: int) -> Path:
    return out / "dataset" / "shards" / f"{key:08d}.zarr"


def _checksums(out: Path, verify: bool = True) -> list[str]:
    return [e.checksum() for e in open_dataset(out / "dataset", verify=verify)]


def test_a_finished_output_verifies(output: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    out, _ = output
    assert main(["verify", str(out)]) == 0
    said = capsys.readouterr().out
    assert "4 parts, 8 episodes" in said and "all as recorded" in said, said
    assert main(["verify", str(out.parent)]) == 2  # not a job's output
    assert "has no job.json" in capsys.readouterr().err


def test_a_deleted_shard_is_made_again_and_the_lerobot_copy_assembled_again(output: tuple[Path, Path]) -> None:
    """Item 1: remaking a part rewrites its LeRobot data file with part-local episode indices;
    the copy must be assembled again although the episodes' checksums are the same."""
    out, job = output
    records = committed_records(str(out))
    shutil.rmtree(_shard(out, _keys(out)[1]))
    assert main(["generate", str(job), "--no-progress"]) == 0
    _check_lerobot(out, records)
    assert main(["verify", str(out)]) == 0


def test_a_damaged_lerobot_copy_is_found_and_made_again_from_the_shards(
        output: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    """Item 2: garbage meta/info.json, a truncated video, a deleted data file: named by `iws
    verify`, and a rerun makes those parts' LeRobot files again from their shards (no group
    rolled again: the other parts' records untouched, the same checksums) and assembles the copy
    again."""
    out, job = output
    records, commits = committed_records(str(out)), marker_times(out)
    keys = _keys(out)
    (out / "lerobot" / "meta" / "info.json").write_text("{ not json")
    video = sorted((out / "lerobot" / "videos").rglob(f"file-{keys[2]:03d}.mp4"))[0]
    video.write_bytes(video.read_bytes()[:100])
    data = out / "lerobot" / "data" / "chunk-000" / f"file-{keys[3]:03d}.parquet"
    data.unlink()
    assert main(["verify", str(out), "--quick"]) == 1
    said = capsys.readouterr().out
    for damaged in (video, data, out / "lerobot" / "meta" / "info.json"):
        assert str(damaged.relative_to(out)) in said, said
    assert main(["generate", str(job), "--no-progress"]) == 0
    again = marker_times(out)
    assert sorted(n for n in again if again[n] != commits[n]) == [f"{keys[2]:08d}.json", f"{keys[3]:08d}.json"]
    assert {k: r.checksum for k, r in committed_records(str(out)).items()} == \
        {k: r.checksum for k, r in records.items()}, "a group was made differently"
    _check_lerobot(out, records)
    assert main(["verify", str(out)]) == 0


def test_truncated_shard_files_are_made_again(output: tuple[Path, Path]) -> None:
    """Item 3: a truncated image chunk and a truncated episode_meta chunk, in two shards."""
    out, job = output
    before = _checksums(out)
    keys = _keys(out)
    chunk = next(p for p in sorted((_shard(out, keys[-1]) / "data").rglob("*")) if p.is_file() and p.name[0] != ".")
    chunk.write_bytes(chunk.read_bytes()[:20])
    meta = _shard(out, keys[0]) / "meta" / "episode_meta" / "c" / "0"
    meta.write_bytes(meta.read_bytes()[:10])
    assert main(["verify", str(out), "--quick"]) == 1
    assert main(["generate", str(job), "--no-progress"]) == 0
    assert _checksums(out) == before
    assert main(["verify", str(out)]) == 0


def test_a_bit_flip_that_keeps_the_size_is_found_by_reading_back_and_refused_by_export(
        output: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Item 4: a changed action value in a shard, its file's recorded size kept (as a flipped
    bit would): the size check passes, reading back does not; export stops at it, naming the
    episode; `iws verify --repair` makes the part again."""
    import zarr

    out, _ = output
    before = _checksums(out)
    key = _keys(out)[1]
    action = zarr.open_array(str(_shard(out, key) / "data" / "action"), mode="r+")
    action[0, 0] = float(action[0, 0]) + 1e-3
    record_path = out / "parts" / f"{key:08d}.json"
    record = json.loads(record_path.read_text())
    for name in list(record["files"]):
        if name.startswith(f"dataset/shards/{key:08d}.zarr/data/action/"):
            record["files"][name] = (out / name).stat().st_size
    record_path.write_text(json.dumps(record))
    assert main(["verify", str(out), "--quick"]) == 0  # sizes cannot see it
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert "with other data than was committed" in capsys.readouterr().out
    assert main(["export", "zarr-dp", str(out / "dataset"), str(tmp_path / "dp")]) == 2
    assert "differs from the data it was committed with" in capsys.readouterr().err
    assert not (tmp_path / "dp").exists()
    assert main(["verify", str(out), "--repair"]) == 0
    assert _checksums(out) == before
    assert main(["export", "zarr-dp", str(out / "dataset"), str(tmp_path / "dp")]) == 0


def test_an_output_of_the_per_episode_protocol_is_made_again_and_its_leftovers_removed(
        output: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    """An output written before group commits: part records without episodes' records, one
    store and one marker per episode under episodes/ and commits/. A rerun commits every group
    again (same seeds, same bytes) and removes what the old protocol stored per episode."""
    out, job = output
    records = committed_records(str(out))
    for marker in (out / "parts").glob("*.json"):
        old = json.loads(marker.read_text())
        old.pop("records")
        marker.write_text(json.dumps(old))
    for record in records.values():
        (out / "commits").mkdir(exist_ok=True)
        (out / "commits" / f"{record.episode_id}.json").write_text(record.model_dump_json())
    (out / "episodes" / "tiny-000000").mkdir(parents=True)
    assert committed_records(str(out)) == {}
    assert main(["generate", str(job), "--no-progress"]) == 0
    again = committed_records(str(out))
    assert {k: r.checksum for k, r in again.items()} == {k: r.checksum for k, r in records.items()}
    assert not (out / "episodes").exists() and not (out / "commits").exists()
    _check_lerobot(out, again)
