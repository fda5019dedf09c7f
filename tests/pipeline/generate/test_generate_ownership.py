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
from schemas import RunManifest
from sim_model.data.store import EpisodeStore
from tests.workers.jobs import job_dict, write_job
from workers.writer import committed_records


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
        in_flight = out / "episodes" / ".tiny-000005.0123456789ab.tmp"  # a writer of the first run, mid-write
        in_flight.mkdir()
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
    assert len(manifest.episodes) == 6 and manifest.finished is not None
    records = committed_records(str(out))
    assert all(Path(r.uri, ".zattrs").exists() for r in records.values()), "a marker without data"
    assert not (out / "lease.json").exists(), "the first run released its lease"


@pytest.mark.parametrize("formats", [["zarr"], ["zarr", "lerobot"]])
def test_resume_regenerates_episodes_whose_marker_lacks_good_data(
        tmp_path: Path, ray_cluster, tiny_checkpoint: Path, tiny_pusht_store,
        caplog: pytest.LogCaptureFixture, formats: list[str]) -> None:
    """With LeRobot output every part record is lost too: the rerun remakes the parts from the
    stored episodes, and waits with those of the missing and the damaged episode until they are
    made again."""
    out = tmp_path / "out"
    spec = load_job(write_job(tmp_path / "job.yaml", job_dict(
        tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=8,
        output={"path": str(out), "formats": formats})))

    def interrupt(progress: Progress) -> None:
        if progress.done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(spec, on_progress=interrupt)
    first = committed_records(str(out))
    missing, damaged = sorted(first)[:2]
    shutil.rmtree(out / "episodes" / missing)  # the state issue 13 left: a marker, no episode
    actions = zarr.open_group(out / "episodes" / damaged, mode="r+")["data/action"]
    actions[0] = actions[0] + 1  # readable, but no longer what its marker's checksum says
    for record in (out / "lerobot_parts").glob("*.json"):
        record.unlink()

    with caplog.at_level(logging.WARNING, logger="workers.writer"):
        manifest = run_job(spec)
    final = committed_records(str(out))
    assert sorted(r.index for r in final.values()) == list(range(8)) and len(manifest.episodes) == 8
    assert all(final[k].checksum == r.checksum for k, r in first.items()), "regenerated identically"
    dataset = EpisodeStore.open(out / "dataset.zarr")
    assert [e.checksum() for e in dataset] == [final[f"tiny-{i:06d}"].checksum for i in range(8)]
    for episode_id in (missing, damaged):
        assert f"episode {episode_id}" in caplog.text and "regenerated" in caplog.text, caplog.text
    if "lerobot" in formats:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        from sim_model.data.formats.lerobot_reader import video_backend

        ds = LeRobotDataset("iws/tiny", root=out / "lerobot", video_backend=video_backend())
        assert ds.num_episodes == 8 and ds.num_frames == sum(r.length for r in final.values())
