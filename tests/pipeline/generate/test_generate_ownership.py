"""One run owns a job's output at a time, and a resume trusts a commit marker only with its data.

Issue 13 reproduced this: a second `iws generate` on an output a first run was still writing
deleted the first run's staging directories at start-up; the first run's writer then found its
copy gone, committed the episode anyway, and consolidation failed on the marker without data
("no episode store ..."), on every rerun. Jobs here are tiny (32x32 model, 4-step episodes)
on the session's Ray cluster.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest
import zarr

from pipeline.cli import main
from pipeline.generate import Progress, load_job, run_job
from schemas import RunManifest, SpecError
from sim_model.data.formats import open_dataset
from tests.workers.jobs import job_dict, write_job
from workers.parts import committed_records


def test_a_second_run_on_a_live_output_is_refused_and_deletes_nothing(
        tmp_path: Path, ray_cluster, tiny_checkpoint: Path, tiny_pusht_store,
        capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    path = write_job(tmp_path / "job.yaml", job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out))
    spec = load_job(path)
    committed, resume = threading.Event(), threading.Event()
    result: dict[str, RunManifest] = {}

    def pause_after_first_commit(progress: Progress) -> None:
        if progress.done >= 1 and not committed.is_set():
            committed.set()
            resume.wait(300)

    first = threading.Thread(target=lambda: result.update(manifest=run_job(spec, on_progress=pause_after_first_commit)))
    first.start()
    try:
        assert committed.wait(300), "the first run committed nothing"
        in_flight = out / "dataset" / "shards" / ".00000004.zarr.0123456789ab.tmp"  # the first run, mid-write
        in_flight.mkdir(parents=True)
        (in_flight / "part").write_text("partial")
        assert main(["generate", str(path), "--no-progress"]) == 2
        assert in_flight.exists(), "the refused run deleted the first run's unfinished write"
    finally:
        resume.set()
        first.join(300)
    err = capsys.readouterr().err
    for text in (f"{out} is in use by another run", "job 'tiny'", socket.gethostname(),
                 f"pid {os.getpid()}", "valid until", "--take-over"):
        assert text in err, err
    manifest = result["manifest"]
    assert manifest.episodes_committed == 6 and manifest.finished is not None
    records = committed_records(str(out))
    dataset = open_dataset(out / "dataset")  # every episode's data, once, in its group's shard
    assert [e.checksum() for e in dataset] == [records[f"tiny-{i:06d}"].checksum for i in range(6)]
    assert not (out / "lease.json").exists(), "the first run released its lease"


@pytest.mark.parametrize("formats", [["zarr"], ["zarr", "lerobot"]])
def test_a_resume_with_verify_remakes_groups_whose_shard_lost_its_data(
        tmp_path: Path, ray_cluster, tiny_checkpoint: Path, tiny_pusht_store,
        caplog: pytest.LogCaptureFixture, formats: list[str]) -> None:
    """An interrupted run, then one committed shard changed where it still decodes (a bit flip
    in the action values, same size: only reading it back notices): `run_job(verify_data=True)`
    withdraws that group's commit, rolls it again to the same bytes, finishes the rest, and the
    datasets are whole."""
    out = tmp_path / "out"
    spec = load_job(write_job(tmp_path / "job.yaml", job_dict(
        tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=10,
        output={"path": str(out), "formats": formats})))

    def interrupt(progress: Progress) -> None:
        if progress.done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(spec, on_progress=interrupt)
    first = committed_records(str(out))
    assert 4 <= len(first) < 10, len(first)
    key = min(r.index for r in first.values())
    shard = zarr.open_group(out / "dataset" / "shards" / f"{key:08d}.zarr", mode="r+")
    sizes = {p: p.stat().st_size for p in (out / "dataset").rglob("*") if p.is_file()}
    shard["data/action"][0] = shard["data/action"][0] + 1
    assert {p: p.stat().st_size for p in (out / "dataset").rglob("*") if p.is_file()} == sizes, "same sizes"

    with caplog.at_level(logging.WARNING, logger="pipeline.generate.verify"):
        manifest = run_job(spec, verify_data=True)
    final = committed_records(str(out))
    assert sorted(r.index for r in final.values()) == list(range(10)) and manifest.episodes_committed == 10
    assert all(final[k].checksum == r.checksum for k, r in first.items()), "made again identically"
    assert f"part {key} (shard)" in caplog.text and "other data than was committed" in caplog.text, caplog.text
    dataset = open_dataset(out / "dataset")
    assert [e.checksum() for e in dataset] == [final[f"tiny-{i:06d}"].checksum for i in range(10)]
    if "lerobot" in formats:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        from sim_model.data.formats.lerobot_reader import video_backend

        ds = LeRobotDataset("iws/tiny", root=out / "lerobot", video_backend=video_backend())
        assert ds.num_episodes == 10 and ds.num_frames == sum(r.length for r in final.values())


def test_a_lost_shard_is_made_again(tmp_path: Path, ray_cluster, tiny_checkpoint: Path, tiny_pusht_store,
                                    caplog: pytest.LogCaptureFixture) -> None:
    """An episode's data lives only in its group's shard: a shard deleted from a finished job
    takes its episodes' data with it, so a rerun withdraws the group's commit (its part record)
    and makes the group again, byte for byte, and the dataset is whole."""
    out = tmp_path / "out"
    spec = load_job(write_job(tmp_path / "job.yaml", job_dict(
        tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out)))
    run_job(spec)
    first = committed_records(str(out))
    assert not (out / "episodes").exists()
    shutil.rmtree(out / "dataset" / "shards" / "00000002.zarr")
    with caplog.at_level(logging.WARNING, logger="pipeline.generate.verify"):
        run_job(spec)
    assert "part 2 (shard)" in caplog.text and "is missing; it is made again" in caplog.text, caplog.text
    final = committed_records(str(out))
    assert {k: r.checksum for k, r in final.items()} == {k: r.checksum for k, r in first.items()}
    dataset = open_dataset(out / "dataset")
    assert [e.checksum() for e in dataset] == [final[f"tiny-{i:06d}"].checksum for i in range(6)]


def test_a_grown_job_adds_parts_and_rewrites_only_metadata(tmp_path: Path, ray_cluster, tiny_checkpoint: Path,
                                                           tiny_pusht_store) -> None:
    """7 episodes in groups of 2 (the last one partial), then the same job with 11: the
    committed episodes and the whole groups' parts stay as they were (not rewritten), the
    partial group's part is made again with its new episode, and both datasets hold all 11."""
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=7,
                   output={"path": str(out), "formats": ["zarr", "lerobot"]})
    run_job(load_job(write_job(tmp_path / "job.yaml", job)))
    first = committed_records(str(out))
    written = {p: p.stat().st_mtime_ns for p in [*(out / "parts").glob("*.json"),
                                                  *(out / "dataset" / "shards").glob("*/zarr.json")]}
    manifest = run_job(load_job(write_job(tmp_path / "job.yaml", {**job, "episodes": 11})))
    assert manifest.episodes_committed == 11 and manifest.episodes_requested == 11
    final = committed_records(str(out))
    assert all(final[k].checksum == r.checksum for k, r in first.items())
    changed = sorted(p.relative_to(out).as_posix() for p, t in written.items() if p.stat().st_mtime_ns != t)
    assert changed == ["dataset/shards/00000006.zarr/zarr.json", "parts/00000006.json"], changed
    dataset = open_dataset(out / "dataset")
    assert [e.checksum() for e in dataset] == [final[f"tiny-{i:06d}"].checksum for i in range(11)]
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    assert LeRobotDatasetMetadata("iws/tiny", root=out / "lerobot").total_episodes == 11
    with pytest.raises(SpecError, match="can grow but not shrink"):
        run_job(load_job(write_job(tmp_path / "job.yaml", {**job, "episodes": 5})))
