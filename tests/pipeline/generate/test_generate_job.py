"""Generation jobs on the session's Ray cluster: end to end, interrupted + resumed, replica killed.

Kept to three small jobs (32x32 tiny model, a few 4-step episodes): each costs seconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from pipeline.generate import Progress, load_job, run_job
from pipeline.generate.expand import groups
from pipeline.generate.preflight import preflight
from schemas import JobSpec, RunManifest
from sim_model.data.formats import open_dataset
from tests.fixtures.lerobot_v21 import check_converts_and_loads, check_groot_contract
from tests.fixtures.ray_cluster import REPO_ROOT
from tests.pipeline.generate.rerun import rerolled_checksums
from tests.workers.jobs import job_dict, write_job
from workers.parts import committed_records
from workers.replica import WorldModelReplica


def marker_times(out: Path) -> dict[str, int]:
    """Part records (each the commit of a group) by name (not the hidden temporary files a
    record is written through)."""
    return {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("*.json") if not p.name.startswith(".")}


def committed_count(out: Path) -> int:
    """Episodes committed so far, read from the part records (each created whole)."""
    return sum(len(json.loads(p.read_text())["records"] or []) for p in (out / "parts").glob("[0-9]*.json"))


def test_generate_end_to_end_with_filter_and_exports(tmp_path: Path, ray_cluster, tiny_checkpoint: Path,
                                                     tiny_pusht_store) -> None:
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, replicas=2,
                   filter={"scorer": "tests.workers.policies:even_seed_scorer", "mode": "keep"},
                   output={"path": str(out), "formats": ["zarr", "lerobot"]})
    job["action_sources"]["rep"] = {"kind": "replay", "path": tiny_pusht_store.path, "offset_std": 0.01}
    path = write_job(tmp_path / "job.yaml", job)
    assert main(["generate", str(path), "--no-progress"]) == 0

    records = committed_records(str(out))
    assert sorted(r.index for r in records.values()) == list(range(6))
    assert {r.source.split(":")[0] for r in records.values()} <= {"scripted", "policy", "replay"}
    manifest = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert manifest.finished is not None and manifest.episodes_committed == 6 and manifest.frames == 24
    assert manifest.episodes_in_datasets == 3 and manifest.index == str(out / "dataset" / "index.parquet")
    index = pq.read_table(manifest.index).to_pylist()  # one row per committed episode, kept or not
    assert [r["success"] for r in index] == [True, False] * 3
    assert [r["in_dataset"] for r in index] == [True, False] * 3
    assert [(r["shard"], r["offset"]) for r in index if r["in_dataset"]] == [(0, 0), (2, 0), (4, 0)]
    assert [r["checksum"] for r in index] == [records[f"tiny-{i:06d}"].checksum for i in range(6)]

    dataset = open_dataset(out / "dataset")  # filter 'keep': successful (even) episodes only
    assert [dataset.meta(i).episode_id for i in range(len(dataset))] == ["tiny-000000", "tiny-000002",
                                                                          "tiny-000004"]
    episode = dataset.episode(1)
    assert episode.frames["top"].shape == (4, 32, 32, 3) and episode.action.shape == (4, 2)
    assert episode.state is not None and episode.state.shape == (4, 2)
    assert episode.meta.task == "Push the T onto the target" and episode.meta.model_hash
    assert episode.checksum() == records["tiny-000002"].checksum
    info = json.loads((out / "lerobot" / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 3 and info["total_frames"] == 12
    _check_preview_and_summary(out, manifest)
    # the job's own dataset as LeRobot v2.1, read by lerobot's converter and loader, and as GR00T reads it
    assert main(["export", "lerobot", str(out / "dataset"), str(tmp_path / "v21"), "--codebase", "v2.1",
                 "--groot"]) == 0
    check_converts_and_loads(dataset, tmp_path / "v21", tmp_path, max_error=None)
    check_groot_contract(tmp_path / "v21")

    before = marker_times(out)
    assert main(["generate", str(path), "--no-progress"]) == 0  # a finished job: nothing to do
    assert marker_times(out) == before


def _check_preview_and_summary(out: Path, manifest: RunManifest) -> None:
    """The dataset's 3 kept episodes (of 6) of 4 steps at 32x32, one camera: one GIF frame per
    step; 32 px tiles scaled up to MIN_TILE_PX in rows of PREVIEW_COLUMNS (3 -> 1 row), each
    under a label, under a header."""
    from PIL import Image

    from pipeline.generate.preview import GAP_PX, LABEL_PX, MIN_TILE_PX, PREVIEW_COLUMNS

    with Image.open(out / "preview.gif") as gif:
        assert gif.format == "GIF" and gif.n_frames == 4
        tile = MIN_TILE_PX // 32 * 32
        assert gif.size == (PREVIEW_COLUMNS * tile + (PREVIEW_COLUMNS - 1) * GAP_PX,
                            LABEL_PX + LABEL_PX + tile)
        assert gif.info["duration"] == 100  # every step at 10 Hz
    summary = (out / "summary.md").read_text()
    scores = [r["score"] for r in pq.read_table(manifest.index).to_pylist()]
    assert scores == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # even_seed_scorer: the index
    for row in ("| episodes | 6 of 6 requested |", "| frames | 24 |",
                f"checkpoint hash `{manifest.model_hash}`",
                "filter mode `keep`: 3 of 6 episodes in the datasets",
                "| 6 | 2.5000 | 1.8708 | 0.0000 | 2.5000 | 5.0000 | 3 (50%) |",
                f"lerobot-dataset-viz --repo-id iws/tiny --root {out / 'lerobot'} --episode-index 0"):
        assert row in summary, f"{row!r} not in summary.md:\n{summary}"
    frames_per_s = re.search(r"(\d+) frames in this run, ([\d.]+) frames/s", summary)
    wall_s = re.search(r"\| wall time \| ([\d.]+) s \|", summary)
    assert frames_per_s and wall_s and int(frames_per_s[1]) == manifest.frames
    assert float(frames_per_s[2]) == pytest.approx(manifest.frames / float(wall_s[1]), rel=0.05, abs=0.06)


EPISODES = 24


def test_interrupted_run_resumes_to_byte_identical_episodes(tmp_path: Path, ray_cluster,
                                                            tiny_checkpoint: Path) -> None:
    job = job_dict(tiny_checkpoint, {"images": [str(p) for p in _images(tmp_path)]}, tmp_path / "out",
                   episodes=EPISODES)
    spec = load_job(write_job(tmp_path / "job.yaml", job))

    def interrupt(progress: Progress) -> None:
        if progress.done >= 2:
            raise KeyboardInterrupt  # what Ctrl-C raises in the driver

    with pytest.raises(KeyboardInterrupt):
        run_job(spec, on_progress=interrupt)
    out = tmp_path / "out"
    first = committed_records(str(out))
    assert 2 <= len(first) < EPISODES  # replicas commit on a little after Ctrl-C: room for that
    partial = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert partial.finished is None and partial.episodes_committed == len(first)
    before = marker_times(out)
    # A crash between writing a group's part and its record: that group must come back identical.
    lost = sorted(before)[-1]
    (out / "parts" / lost).unlink()
    del before[lost]

    manifest = run_job(spec)
    final = committed_records(str(out))
    assert sorted(r.index for r in final.values()) == list(range(EPISODES)) and manifest.episodes_committed == EPISODES
    assert all(final[k].checksum == r.checksum for k, r in first.items())
    assert {k: v for k, v in marker_times(out).items() if k in before} == before
    assert len(open_dataset(out / "dataset")) == EPISODES


def files_under(out: Path) -> dict[str, int]:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}


def test_nothing_is_written_once_an_interrupted_run_has_returned(tmp_path: Path, ray_cluster,
                                                                 tiny_checkpoint: Path) -> None:
    """Replicas write each group's part behind their rolling (workers/replica.py); an interrupted
    run stops them before it returns, so no part, shard or commit marker lands afterwards (a
    user, or a second run, may be working on the output by then), and a rerun finishes the job."""
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"images": [str(p) for p in _images(tmp_path)]}, out, episodes=EPISODES,
                   replicas=2, output={"path": str(out), "formats": ["zarr", "lerobot"]})
    spec = load_job(write_job(tmp_path / "job.yaml", job))

    def interrupt(progress: Progress) -> None:
        if progress.done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(spec, on_progress=interrupt)
    returned = files_under(out)
    time.sleep(3)  # a part write takes a fraction of a second here
    assert files_under(out) == returned, "written after the interrupted run returned"
    assert len(marker_times(out)) < EPISODES

    manifest = run_job(spec)
    assert manifest.episodes_committed == EPISODES and len(open_dataset(out / "dataset")) == EPISODES


def test_a_killed_replica_counts_as_gone_only_once_its_process_has_exited() -> None:
    """The interrupted run above waits for its killed replicas' processes, not only for Ray's
    report (which CI saw come while a part's files were still being written); a zombie, exited
    but not yet reaped by its parent, has exited."""
    from pipeline.generate.ray_exec import _exited

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not _exited(child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while not _exited(child.pid) and time.monotonic() < deadline:  # a zombie until waited for
            time.sleep(0.01)
        assert _exited(child.pid)
    finally:
        child.kill()
        child.wait()
    assert _exited(child.pid)
    assert not _exited(os.getpid())


def test_driver_sigkilled_mid_job_resumes_to_byte_identical_episodes(tmp_path: Path, ray_cluster,
                                                                     tiny_checkpoint: Path) -> None:
    """The driver process SIGKILLed mid-job (no handler, no `finally`, its lease left behind),
    as the OOM killer or a lost node does it; the rerun takes the dead owner's lease at once,
    keeps what was committed and ends with exactly N episodes, byte-identical to a fresh run."""
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"images": [str(p) for p in _images(tmp_path)]}, out,
                   episodes=EPISODES, action_sources={"walk": {"kind": "scripted", "motion": "mix"}})
    path = write_job(tmp_path / "job.yaml", job)
    address = ray_cluster.get_runtime_context().gcs_address  # the driver joins this session's Ray
    driver = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "generate", str(path), "--address",
                               address, "--no-progress"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 400  # generous: a loaded 2-core machine starts Ray workers slowly
    while committed_count(out) < 2 and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    driver.send_signal(signal.SIGKILL)
    output = driver.communicate(timeout=30)[0].decode(errors="replace")
    committed_at_kill = committed_count(out)
    assert driver.returncode == -signal.SIGKILL, f"the driver ended before the kill:\n{output}"
    assert 2 <= committed_at_kill < EPISODES, f"{committed_at_kill} committed at the kill:\n{output[-3000:]}"
    assert (out / "lease.json").exists()  # a killed driver cannot release its lease
    first = committed_records(str(out))

    manifest = run_job(load_job(path))
    final = committed_records(str(out))
    assert sorted(r.index for r in final.values()) == list(range(EPISODES))
    assert manifest.episodes_committed == EPISODES and manifest.finished is not None
    assert all(final[k].checksum == r.checksum for k, r in first.items())
    assert {k: r.checksum for k, r in final.items()} == rerolled_checksums(load_job(path), tmp_path / "fresh")
    assert not (out / "episodes").exists() and not (out / "commits").exists()  # a group's part is its commit
    dataset = open_dataset(out / "dataset")
    assert [e.checksum() for e in dataset] == [final[f"tiny-{i:06d}"].checksum for i in range(EPISODES)]
    assert not (out / "lease.json").exists()


def _images(tmp_path: Path) -> list[Path]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(1)
    paths = [tmp_path / f"init{i}.png" for i in range(3)]
    for p in paths:
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(p)
    return paths


def _kill_replica_after_first_commit(out: Path, killed: list[int], committed_at_kill: list[int],
                                     timeout_s: float = 120) -> None:
    """SIGKILL the replica actor process(es) of this test's own Ray once an episode is committed;
    `committed_at_kill` gets how many were committed right after the kill."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not committed_count(out):
        time.sleep(0.02)
    for proc in psutil.Process().children(recursive=True):  # only processes this test session started
        try:
            if "WorldModelReplica" in " ".join(proc.cmdline()):
                proc.send_signal(signal.SIGKILL)
                killed.append(proc.pid)
        except psutil.Error:
            continue
    committed_at_kill.append(committed_count(out))


def test_replica_killed_mid_job_still_gives_exactly_n_episodes(tmp_path: Path, ray_cluster,
                                                               tiny_checkpoint: Path, tiny_pusht_store) -> None:
    """The kill lands while the replica commits episodes or encodes its group's LeRobot part
    (the first part also imports lerobot, seconds): either way nothing is lost or doubled."""
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=8, horizon=5,
                   output={"path": str(out), "formats": ["zarr", "lerobot"]})
    spec = JobSpec.model_validate(job)
    killed: list[int] = []
    committed_at_kill: list[int] = []
    killer = threading.Thread(target=_kill_replica_after_first_commit, args=(out, killed, committed_at_kill),
                              daemon=True)
    killer.start()
    manifest = run_job(spec)
    killer.join()
    assert killed, "the replica was not found or the job ended before the kill"
    assert committed_at_kill[0] < 8, "the kill landed after every episode was committed: it tested nothing"
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
               for pid in killed)
    records = committed_records(str(out))
    assert sorted(r.index for r in records.values()) == list(range(8))  # no gaps, no duplicates
    assert not (out / "episodes").exists() and not (out / "commits").exists()  # a group's part is its commit
    dataset = open_dataset(out / "dataset")
    assert [dataset.meta(i).episode_id for i in range(8)] == [f"tiny-{i:06d}" for i in range(8)]
    assert manifest.episodes_committed == 8
    _check_lerobot(out, records)

    # Every episode, retried or not, equals what a fresh replica makes for its group.
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the Ray actor (OMP_NUM_THREADS=1)
    try:
        plan = preflight(spec.model_copy(update={"output": spec.output.model_copy(
            update={"path": str(tmp_path / "again")})}))
        replica = WorldModelReplica(plan.spec.model_dump_json(), plan.spec.output.path)
        again = [r for g in groups(plan.episodes, spec.batch_size) for r in replica.roll_group(g)]
    finally:
        torch.set_num_threads(threads)
    assert [r.checksum for r in again] == [records[r.episode_id].checksum for r in again]


def _check_lerobot(out: Path, records: dict) -> None:
    """OUT/lerobot is one LeRobotDataset of every episode, in order, each part's files once."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from sim_model.data.formats.lerobot_reader import video_backend

    ordered = sorted(records.values(), key=lambda r: r.index)
    ds = LeRobotDataset("iws/tiny", root=out / "lerobot", video_backend=video_backend())
    assert ds.num_episodes == len(ordered) and ds.num_frames == sum(r.length for r in ordered)
    zarr_dataset = open_dataset(out / "dataset")
    start = 0
    for e, record in enumerate(ordered):
        action = zarr_dataset.episode(e).action
        item = ds[start + record.length - 1]
        assert int(item["episode_index"]) == e
        assert (item["action"].numpy() == action[-1]).all()
        start += record.length
    data_files = [p for p in (out / "lerobot" / "data").rglob("*") if p.is_file()]
    parts = [json.loads(p.read_text()) for p in (out / "parts").glob("*.json")]
    assert len(data_files) == sum(1 for part in parts if part["episodes"]) > 1
    assert not [p for p in (out / "lerobot").rglob(".*") if p.is_file()], "a partial write was left"


def test_lost_commits_and_lerobot_files_are_made_again(
        tmp_path: Path, ray_cluster, tiny_checkpoint: Path, tiny_pusht_store) -> None:
    """Faults after a group's files: its record never written (the group is not committed: it is
    rolled again, to the same bytes), a LeRobot video of a committed part lost (the part is made
    again from its shard, nothing rolled). The rerun makes exactly those parts again, rewrites no
    other, and assembles one dataset."""
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=8, horizon=4,
                   output={"path": str(out), "formats": ["zarr", "lerobot"]})
    path = write_job(tmp_path / "job.yaml", job)
    assert main(["generate", str(path), "--no-progress"]) == 0
    records = committed_records(str(out))
    parts_dir = out / "parts"
    keys = sorted(int(p.stem) for p in parts_dir.glob("*.json"))
    assert len(keys) >= 3, keys
    recorded = marker_times(out)
    (parts_dir / f"{keys[1]:08d}.json").unlink()  # written, not committed
    video = next(p for p in json.loads((parts_dir / f"{keys[2]:08d}.json").read_text())["files"]
                 if p.startswith("lerobot/videos/"))
    (out / video).unlink()

    assert main(["generate", str(path), "--no-progress"]) == 0
    again = marker_times(out)
    assert sorted(again) == sorted(recorded)
    assert sorted(n for n in again if again[n] != recorded.get(n)) == [f"{keys[1]:08d}.json", f"{keys[2]:08d}.json"]
    assert {k: r.checksum for k, r in committed_records(str(out)).items()} == {k: r.checksum for k, r in records.items()}
    _check_lerobot(out, records)


def test_example_job_runs_on_the_embedded_default(tmp_path: Path, ray_cluster) -> None:
    """examples/pusht_generate.yaml as shipped (96x96 init PNGs), shrunk with --set, with a tiny
    96x96 checkpoint standing in for the bundled 'pusht' model."""
    from pipeline.pusht.features import pusht_features
    from sim_model.world_model import WorldModel

    model = WorldModel.random(pusht_features(96), preset="tiny", seed=0).save(tmp_path / "model96")
    example = Path(__file__).resolve().parents[3] / "examples" / "pusht_generate.yaml"
    args = ["generate", str(example), "--model", str(model), "--output", str(tmp_path / "out"),
            "--set", "episodes=3", "--set", "horizon=3", "--set", "batch_size=2", "--set", "replicas=1",
            "--no-progress"]
    assert main(args) == 0
    dataset = open_dataset(tmp_path / "out" / "dataset")
    assert len(dataset) == 3 and dataset.n_frames == 9
    episode = dataset.episode(2)
    assert episode.frames["top"].shape == (3, 96, 96, 3) and episode.action.shape == (3, 2)
    assert episode.meta.source.startswith("scripted:") and episode.meta.task == "Push the T onto the target"


def test_a_zarr_only_job_leaves_at_most_two_objects_per_episode(tmp_path: Path, ray_cluster, tiny_checkpoint: Path,
                                                               tiny_pusht_store) -> None:
    """Issue 34, at a million episodes: 32 episodes x 20 steps in groups of 8, formats [zarr].
    Per group one part record and one shard of 13 objects (zarr 3, each array one object); no
    store or marker per episode. Every file counts, hidden ones too."""
    out = tmp_path / "out"
    job = job_dict(tiny_checkpoint, {"dataset": tiny_pusht_store.path}, out, episodes=32, horizon=20,
                   batch_size=8, output={"path": str(out)})
    assert main(["generate", str(write_job(tmp_path / "job.yaml", job)), "--no-progress"]) == 0
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(files) <= 2 * 32, files
    assert sum(f.startswith("parts/") for f in files) == 4 and not any(f.startswith(("episodes/", "commits/"))
                                                                      for f in files)
    assert len(open_dataset(out / "dataset")) == 32
