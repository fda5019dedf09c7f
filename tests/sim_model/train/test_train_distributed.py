"""`iws train --workers N` on Ray Train (the session's 2-CPU Ray, gloo, tiny preset at 16x16):
the worker count does not change the numbers, a killed worker costs a restart from the last
checkpoint, and impossible requests fail before any worker starts.

Equivalence is at a fixed shard count: one worker computing 2 shards of each step's batch and
two workers computing one each see the same samples and noise, so their losses agree to float32
rounding (rtol 1e-6) and their weights bit for bit (the gradient sum of two shards is the same
addition either way). The single-process path (no --workers) draws from one RNG stream instead;
tests/sim_model/train/test_train.py covers it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from safetensors.torch import load_file

from pipeline.cli import main as iws
from pipeline.train.cluster import train_on_cluster
from schemas.errors import SpecError
from sim_model import storage
from sim_model.train import train_stage
from sim_model.world_model import WorldModel
from tests.fixtures.ray_cluster import REPO_ROOT
from tests.fixtures.s3 import S3Bucket

# slow: each Ray Train run starts its workers, ~10-20 s on 2 busy cores
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

EVERY_STEP = {"val_every": 1, "sample_every": 1000, "val_batches": 1, "warmup": 2, "decay_fraction": 0.0}


def _config(path: Path, **stages: dict) -> str:
    path.write_text(json.dumps({"preset": "tiny", **stages}))
    return str(path)


def _losses(run: Path, stage: str) -> dict[int, float]:
    lines = (run / stage / "metrics.jsonl").read_text().splitlines()
    return {m["step"]: m["loss"] for m in map(json.loads, lines) if "loss" in m}


def _weights_hash(run: Path, stage: str) -> str:
    tensors = load_file(run / stage / "state" / "weights.safetensors")
    digest = hashlib.sha256()
    for key in sorted(tensors):
        digest.update(key.encode() + tensors[key].numpy().tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def two_worker_run(ray_cluster, moving_squares_store, tmp_path_factory) -> tuple[Path, str]:
    """The autoencoder trained 4 steps on 2 workers (batch 8 in 2 shards); and its config."""
    out = tmp_path_factory.mktemp("two")
    config = _config(out / "train.json",
                     autoencoder={**EVERY_STEP, "steps": 4, "batch_size": 8, "checkpoint_every": 2})
    train_on_cluster("autoencoder", str(moving_squares_store), out / "run", workers=2,
                     config_file=config, progress=False)
    return out / "run", config


def _assert_same_training(run: Path, reference: Path, stage: str, steps: int) -> None:
    ours, theirs = _losses(run, stage), _losses(reference, stage)
    assert sorted(ours) == sorted(theirs) == list(range(1, steps + 1))
    for step in ours:
        assert ours[step] == pytest.approx(theirs[step], rel=1e-6), step
    assert _weights_hash(run, stage) == _weights_hash(reference, stage)


def test_one_worker_with_two_shards_trains_what_two_workers_do(
        two_worker_run, moving_squares_store, tmp_path) -> None:
    reference, config = two_worker_run
    train_on_cluster("autoencoder", str(moving_squares_store), tmp_path, workers=1, data_shards=2,
                     config_file=config, progress=False)
    _assert_same_training(tmp_path, reference, "autoencoder", 4)
    stage = WorldModel.load(reference / "autoencoder" / "model").config.provenance.stages[-1]
    assert stage.steps == 4 and any(h.startswith("2 workers x cpu") for h in stage.hardware)


def test_workers_streaming_frames_train_what_loaded_workers_do(
        two_worker_run, moving_squares_store, tmp_path) -> None:
    """With --cache-mb each worker reads its frames from the store through a small cache (the
    driver puts nothing in Ray's object store): the same samples, the same weights."""
    reference, config = two_worker_run
    train_on_cluster("autoencoder", str(moving_squares_store), tmp_path, workers=2, cache_mb=0.02,
                     config_file=config, progress=False)
    _assert_same_training(tmp_path, reference, "autoencoder", 4)


def test_a_later_run_resumes_with_another_worker_count(two_worker_run, moving_squares_store,
                                                       tmp_path) -> None:
    """Stopped at step 2 on one worker, finished by a later `iws train` on two: the shard count
    is the stage's own (saved with its state), so the result is the straight run's."""
    reference, config = two_worker_run
    train_on_cluster("autoencoder", str(moving_squares_store), tmp_path, workers=1, data_shards=2,
                     config_file=config, steps=2, progress=False)
    assert json.loads((tmp_path / "autoencoder/state/trainer.json").read_text())["step"] == 2
    assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
                str(tmp_path), "--steps", "4", "--workers", "2", "--threads", "1", "--no-progress"]) == 0
    _assert_same_training(tmp_path, reference, "autoencoder", 4)


def test_dynamics_on_two_workers_matches_one(ray_cluster, moving_squares_store, tmp_path) -> None:
    """The dynamics stage too, with fed-back batches (no-grad passes) from the first step."""
    config = _config(tmp_path / "train.json",
                     autoencoder={**EVERY_STEP, "steps": 2, "batch_size": 8, "checkpoint_every": 2},
                     dynamics={**EVERY_STEP, "steps": 3, "batch_size": 4, "checkpoint_every": 3,
                               "feedback_start": 0.0, "feedback_prob": 0.5})
    base = tmp_path / "base"
    train_stage("autoencoder", moving_squares_store, base, config_file=config, progress=False)
    runs = {n: shutil.copytree(base, tmp_path / f"w{n}") for n in (1, 2)}
    for workers, run in runs.items():
        train_on_cluster("dynamics", str(moving_squares_store), run, workers=workers, data_shards=2,
                         progress=False)
    _assert_same_training(runs[1], runs[2], "dynamics", 3)
    WorldModel.load(runs[2] / "model")


def _train_workers() -> list[psutil.Process]:
    """This session's Ray Train worker processes (children of its raylet)."""
    import ray

    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process.pid
    workers = []
    for process in psutil.Process(raylet).children(recursive=True):
        try:
            if process.cmdline()[:1] and process.cmdline()[0].startswith("ray::RayTrainWorker"):
                workers.append(process)
        except psutil.Error:  # gone, or a zombie
            continue
    return workers


def test_a_killed_worker_resumes_from_the_last_checkpoint(ray_cluster, moving_squares_store,
                                                          tmp_path) -> None:
    steps, every = 40, 5
    config = _config(tmp_path / "train.json", autoencoder={
        **EVERY_STEP, "steps": steps, "batch_size": 8, "checkpoint_every": every})
    out = tmp_path / "run"
    outcome: dict[str, object] = {}

    def train() -> None:
        try:
            outcome["path"] = train_on_cluster("autoencoder", str(moving_squares_store), out, workers=2,
                                               config_file=config, max_failures=2, progress=False)
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            outcome["error"] = error

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    state, metrics = out / "autoencoder/state/trainer.json", out / "autoencoder/metrics.jsonl"

    def logged() -> list[int]:
        return [m["step"] for m in map(json.loads, metrics.read_text().splitlines())] if metrics.is_file() else []

    deadline = time.monotonic() + 120
    # between checkpoints: a first one written, and steps logged past it
    while not (state.is_file() and json.loads(state.read_text())["step"] >= every
               and max(logged()) >= every + 2):
        assert thread.is_alive() and time.monotonic() < deadline, f"no checkpoint: {outcome}"
        time.sleep(0.05)
    victims = _train_workers()
    assert len(victims) == 2, victims
    os.kill(victims[-1].pid, signal.SIGKILL)
    killed_at = max(logged())
    restarted = False
    while thread.is_alive() and time.monotonic() < deadline + 120:
        restarted = restarted or any(p.pid not in {v.pid for v in victims} for p in _train_workers())
        time.sleep(0.05)
    assert not thread.is_alive() and "error" not in outcome, outcome

    assert restarted, "no new worker group started after the kill"
    assert killed_at < steps, "the run ended before the kill: make it longer"
    assert json.loads(state.read_text())["step"] == steps
    steps_logged = logged()
    assert steps_logged.count(0) == 1, "the restart began from scratch, not from the checkpoint"
    redone = sorted(s for s in set(steps_logged) if steps_logged.count(s) > 1)
    # the steps after the last checkpoint before the kill ran twice (none if it had just written one)
    assert not redone or (min(redone) % every == 1 and max(redone) <= killed_at + every), redone
    assert sorted(set(steps_logged)) == list(range(steps + 1))
    model = WorldModel.load(Path(str(outcome["path"])))
    assert model.config.provenance.stages[-1].steps == steps


def test_the_command_on_its_own_ray_prints_progress_lines_and_no_ray_noise(
        moving_squares_store, tmp_path) -> None:
    """`iws train --workers 2` as a user runs it: an embedded Ray of its own (no dashboard, so
    no State API), rank 0's progress as one line per record instead of a progress bar."""
    config = _config(tmp_path / "train.json", autoencoder={**EVERY_STEP, "steps": 2, "batch_size": 8})
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "train", "--stage", "autoencoder",
                           "--data", str(moving_squares_store), "--out", str(tmp_path / "run"),
                           "--config", config, "--workers", "2", "--threads", "1"],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                          env={**os.environ, "RAY_ADDRESS": ""})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert re.search(r"autoencoder step 2/2: loss [\d.]+, val_loss [\d.]+", output), output[-3000:]
    assert "Failed to query Ray Train Controller" not in output  # the placement-group cleaner's
    assert "it/s" not in output  # no progress bar forwarded line by line


def test_requests_the_cluster_cannot_serve_fail_before_training(ray_cluster, moving_squares_store,
                                                                tmp_path, capsys) -> None:
    config = _config(tmp_path / "train.json", autoencoder={"steps": 2, "batch_size": 8})
    with pytest.raises(SpecError, match="needs 4 CPUs .* has 2"):
        train_on_cluster("autoencoder", str(moving_squares_store), tmp_path / "a", workers=4,
                         config_file=config, progress=False)
    with pytest.raises(SpecError, match="global batch of 8 cannot be split into 3"):
        train_on_cluster("autoencoder", str(moving_squares_store), tmp_path / "b", workers=3,
                         config_file=config, progress=False)
    with pytest.raises(SpecError, match="use --workers 1, 2, 4, 8"):
        train_on_cluster("autoencoder", str(moving_squares_store), tmp_path / "c", workers=3,
                         data_shards=8, config_file=config, progress=False)
    assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
                str(tmp_path / "d"), "--gpus-per-worker", "1"]) == 2
    assert "needs --workers" in capsys.readouterr().err
    assert iws(["train", "--stage", "dynamics", "--data", str(moving_squares_store), "--out",
                str(tmp_path / "e"), "--preset", "tiny", "--workers", "2"]) == 2
    assert "--stage autoencoder" in capsys.readouterr().err


def test_two_nodes_lose_one_and_resume_from_s3_checkpoints(s3_env: S3Bucket, moving_squares_store,
                                                           tmp_path) -> None:
    """A Cluster of three 1-CPU nodes in a subprocess (tests/sim_model/train/train_multinode.py): the
    two workers sit on two nodes; one node is removed mid-run and the run still ends at its step
    count; then the stage's local directory is deleted and a longer run continues from the
    s3:// checkpoints."""
    config = _config(tmp_path / "train.json", autoencoder={
        **EVERY_STEP, "steps": 12, "batch_size": 8, "checkpoint_every": 3})
    out, checkpoints = tmp_path / "run", s3_env.url("checkpoints")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "-m", "tests.sim_model.train.train_multinode", str(moving_squares_store),
                           str(out), checkpoints, config], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["removed"].get("busy_nodes") == 2, result  # one worker on each of two nodes
    assert result["removed"]["step"] < 12 and result["first_step"] == 12, result
    logged = result["steps_logged"]
    assert logged.count(0) == 1, "the second run started from scratch, not from the s3:// checkpoint"
    assert sorted(set(logged)) == list(range(16))
    assert storage.list_names(f"{checkpoints}/autoencoder"), "no checkpoint was written to s3://"
    assert WorldModel.load(Path(result["path"])).config.provenance.stages[-1].steps == 15
    print(f"\ncluster up {result['cluster_up_s']:.1f}s, first run {result['first_s']:.1f}s (node lost at "
          f"step {result['removed']['step']}), resumed run {result['second_s']:.1f}s")


@pytest.mark.gpu
def test_a_cuda_training_step_in_bf16(moving_squares_store, tmp_path) -> None:
    """The single-process path on one GPU: bf16 autocast (`bf16: auto` is on for CUDA)."""
    config = _config(tmp_path / "train.json", autoencoder={**EVERY_STEP, "steps": 2, "batch_size": 8})
    path = train_stage("autoencoder", moving_squares_store, tmp_path / "run", config_file=config,
                       device="cuda", progress=False)
    assert all(map(math.isfinite, _losses(tmp_path / "run", "autoencoder").values()))
    stage = WorldModel.load(path).config.provenance.stages[-1]
    assert stage.steps == 2 and stage.hardware[0].startswith("cuda")


@pytest.mark.gpu
def test_a_ray_train_worker_on_a_gpu(ray_cluster, moving_squares_store, tmp_path) -> None:
    """--gpus-per-worker 1: the worker trains on its CUDA device through NCCL."""
    config = _config(tmp_path / "train.json", autoencoder={**EVERY_STEP, "steps": 2, "batch_size": 8})
    path = train_on_cluster("autoencoder", str(moving_squares_store), tmp_path / "run", workers=1,
                            gpus_per_worker=1, config_file=config, progress=False)
    assert WorldModel.load(path).config.provenance.stages[-1].hardware[0].startswith("1 workers x cuda")
