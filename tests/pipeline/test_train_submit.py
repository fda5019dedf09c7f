"""`iws submit train -- <iws train arguments>` against a real Ray head with the Jobs API and
token authentication (`ray_head`): the stage trains on the cluster's Ray Train workers, the
run lands in --out, and submitting again resumes it. Mistakes are refused before any upload."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.commands.train import submission_parser
from pipeline.train.submit import prepare_training
from schemas import SpecError
from sim_model.world_model import WorldModel
from tests.fixtures.ray_head import RayHead
from tests.fixtures.s3 import free_ports

pytestmark = pytest.mark.usefixtures("one_torch_thread")
STAGE = {"batch_size": 4, "warmup": 1, "val_every": 2, "val_batches": 1, "sample_every": 1000,
         "checkpoint_every": 2}


def _config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "train.json"
    path.write_text(json.dumps({"preset": "tiny", "autoencoder": STAGE}))
    return path


def test_a_training_submission_uploads_only_its_config(tmp_path: Path, moving_squares_store,
                                                       monkeypatch) -> None:
    config = _config(tmp_path / "job")
    monkeypatch.chdir(tmp_path)
    plan = prepare_training(["--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
                             str(tmp_path / "run"), "--config", "job/train.json", "--workers", "2"],
                            submission_parser())
    assert plan.working_dir == config.parent and plan.job_name == "train-autoencoder"
    assert plan.entrypoint == (f"iws train --stage autoencoder --data {moving_squares_store} --out "
                               f"{tmp_path / 'run'} --config train.json --workers 2 --no-progress")
    bare = prepare_training(["--stage", "dynamics", "--data", "s3://b/d.zarr", "--out", "/shared/run",
                             "--init-from", "pusht"], submission_parser())
    assert bare.working_dir is None and bare.runtime_env() == {}  # nothing to upload
    assert "--init-from pusht" in bare.entrypoint  # a bundled name, not a path


def test_training_submissions_refuse_what_would_fail_on_the_cluster(
        tmp_path: Path, moving_squares_store, capsys, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    config = _config(tmp_path / "job")
    monkeypatch.chdir(tmp_path)
    unreachable = f"http://127.0.0.1:{free_ports(1)[0]}"
    data, out = str(moving_squares_store), str(tmp_path / "run")

    def refused(*args: str) -> str:
        assert main(["submit", "--address", unreachable, *args]) == 2
        return capsys.readouterr().err

    assert "relative path" in refused("train", "--", "--stage", "autoencoder", "--data", "squares.zarr",
                                      "--out", out)
    assert "--out 'run' must be an absolute path" in refused("train", "--", "--stage", "autoencoder",
                                                             "--data", data, "--out", "run")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "ckpt").mkdir()
    assert "not inside the working directory" in refused(
        "train", "--", "--stage", "dynamics", "--data", data, "--out", out, "--config", str(config.relative_to(tmp_path)),
        "--init-from", "elsewhere/ckpt")
    assert "does not exist here" in refused("--working-dir", str(tmp_path), "train", "--", "--stage",
                                            "autoencoder", "--data", data, "--out", out, "--config",
                                            "job/missing.json")
    assert "not valid" in refused("train", "--", "--stage", "everything", "--data", data, "--out", out)
    assert "after `train --`" in refused("train")
    assert "apply to generation jobs" in refused("--set", "replicas=2", "train", "--", "--stage",
                                                 "autoencoder", "--data", data, "--out", out)
    assert "cannot reach the Ray Jobs API" in refused("train", "--", "--stage", "autoencoder",
                                                      "--data", data, "--out", out)
    assert not (tmp_path / "run").exists()
    with pytest.raises(SpecError, match="spell out --config"):
        prepare_training(["--stage", "autoencoder", "--data", data, "--out", out, "--conf", "job/train.json"],
                         submission_parser())


@pytest.mark.slow
def test_submitted_training_runs_on_ray_train_and_resubmitting_resumes(
        ray_head: RayHead, tmp_path: Path, moving_squares_store, capsys, monkeypatch) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", ray_head.token)
    config = _config(tmp_path / "job")
    monkeypatch.chdir(config.parent)
    out = tmp_path / "run"

    def submit(steps: int) -> str:
        code = main(["submit", "--address", ray_head.dashboard_url, "train", "--", "--stage", "autoencoder",
                     "--data", str(moving_squares_store), "--out", str(out), "--config", "train.json",
                     "--steps", str(steps), "--workers", "1", "--threads", "1"])
        printed = capsys.readouterr().out
        assert ray_head.token not in printed
        assert code == 0 and "SUCCEEDED" in printed, printed[-3000:]
        return printed

    printed = submit(4)
    assert re.search(r"submitted train-autoencoder as \S+ to .*iws train --stage autoencoder", printed)
    state = json.loads((out / "autoencoder/state/trainer.json").read_text())
    assert state["step"] == 4 and any(h.startswith("1 workers x cpu") for h in state["hardware"])
    submit(6)  # the same command with more steps: it resumes from step 4
    steps = [json.loads(line)["step"] for line in (out / "autoencoder/metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 2, 4, 6]  # 0..4 from the first job, 6 from the second: no restart
    model = WorldModel.load(out / "autoencoder/model")
    assert model.config.provenance.stages[-1].steps == 6
    assert os.stat(out / "autoencoder/model/model.safetensors").st_size > 0
