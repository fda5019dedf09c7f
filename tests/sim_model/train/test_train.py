"""Training: all three stages learn on moving squares, resume exactly, and fail clearly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from pipeline.cli import main as iws
from schemas.errors import SpecError
from sim_model.train import train_stage
from sim_model.world_model import WorldModel

FAST = {"val_every": 50, "sample_every": 1000, "checkpoint_every": 1000, "val_batches": 2}


def _config(tmp_path: Path, **stages: dict) -> str:
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"preset": "tiny", **stages}))
    return str(path)


def _metrics(run: Path, stage: str) -> list[dict]:
    return [json.loads(line) for line in (run / stage / "metrics.jsonl").read_text().splitlines()]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained_run(moving_squares_store, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    config = _config(out.parent, autoencoder={**FAST, "steps": 150, "batch_size": 16},
                     dynamics={**FAST, "steps": 150, "batch_size": 8, "sample_every": 150},
                     decoder_finetune={**FAST, "steps": 10, "batch_size": 8, "val_every": 10})
    for stage in ("autoencoder", "dynamics", "decoder-finetune"):
        train_stage(stage, moving_squares_store, out, config_file=config, progress=False)
    return out


def test_autoencoder_learns(trained_run: Path) -> None:
    metrics = _metrics(trained_run, "autoencoder")
    assert metrics[0]["step"] == 0 and metrics[-1]["step"] == 150
    assert metrics[-1]["val_loss"] < 0.3 * metrics[0]["val_loss"]
    assert metrics[-1]["val_psnr"] > 20
    assert metrics[-1]["val_state"] < metrics[0]["val_state"]


def test_dynamics_beats_repeat_last_frame(trained_run: Path) -> None:
    metrics = _metrics(trained_run, "dynamics")
    first, last = metrics[0], metrics[-1]
    assert last["val_loss"] < 0.7 * first["val_loss"]
    assert last["val_loss"] < 0.7 * last["val_loss_repeat"]
    assert last["val_h1_psnr"] > last["val_h1_psnr_repeat"] + 1.0  # dB, through the inference path
    assert (trained_run / "dynamics" / "samples" / "step_0000150.png").is_file()


def test_final_checkpoint_loads_with_provenance(trained_run: Path) -> None:
    wm = WorldModel.load(trained_run / "model")
    stages = wm.config.provenance.stages
    assert [s.stage for s in stages] == ["autoencoder", "dynamics", "decoder-finetune"]
    assert all(s.wall_time_s > 0 and s.hardware and s.data_hash for s in stages)
    assert [s.steps for s in stages] == [150, 150, 10]
    frames = np.zeros((2, 16, 16, 3), np.uint8)
    out = wm.rollout(frames, np.full((2, 5, 2), 8.0, np.float32), seeds=[0, 1])
    assert out.frames.shape == (2, 5, 1, 16, 16, 3) and out.state is not None


def test_resume_continues_from_saved_state(moving_squares_store, tmp_path) -> None:
    stage = {**FAST, "steps": 4, "batch_size": 4, "warmup": 2, "decay_fraction": 0.0}
    config = _config(tmp_path, autoencoder=stage)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_stage("autoencoder", moving_squares_store, straight, config_file=config, steps=8, progress=False)
    train_stage("autoencoder", moving_squares_store, resumed, config_file=config, steps=4, progress=False)
    assert json.loads((resumed / "autoencoder/state/trainer.json").read_text())["step"] == 4
    half = load_file(resumed / "autoencoder/state/weights.safetensors")
    train_stage("autoencoder", moving_squares_store, resumed, steps=8, progress=False)
    assert json.loads((resumed / "autoencoder/state/trainer.json").read_text())["step"] == 8
    a = load_file(straight / "autoencoder/state/weights.safetensors")
    b = load_file(resumed / "autoencoder/state/weights.safetensors")
    assert any(not torch.equal(half[k], b[k]) for k in b)  # it trained on
    for key in a:  # from the saved weights, moments and RNG: same as never stopping
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)


def test_weight_average_exports_the_average_and_resumes_it(moving_squares_store, tmp_path) -> None:
    stage = {**FAST, "steps": 6, "batch_size": 4, "warmup": 2, "decay_fraction": 0.0, "ema": 0.9}
    config = _config(tmp_path, autoencoder=stage)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    path = train_stage("autoencoder", moving_squares_store, straight, config_file=config, progress=False)
    train_stage("autoencoder", moving_squares_store, resumed, config_file=config, steps=3, progress=False)
    train_stage("autoencoder", moving_squares_store, resumed, steps=6, progress=False)
    average = load_file(path / "model.safetensors")
    last = load_file(straight / "autoencoder/model_last/model.safetensors")
    trained = load_file(straight / "autoencoder/state/weights.safetensors")
    saved = load_file(straight / "autoencoder/state/average.safetensors")
    assert int(saved["__ema_updates__"]) == 6
    for key in last:  # model_last holds the trained weights, model/ their average
        torch.testing.assert_close(last[key], trained[key], rtol=0, atol=0)
    moved = [k for k in average if not torch.equal(average[k], last[k])]
    assert moved and all(k.startswith(("encoder.", "decoder.", "state_head.")) for k in moved)
    for key in moved:
        torch.testing.assert_close(average[key], saved[f"ema.{key}"].to(average[key].dtype))
    other = load_file(resumed / "autoencoder/model/model.safetensors")
    for key in average:  # the average continued across the stop, as if never stopped
        torch.testing.assert_close(other[key], average[key], rtol=0, atol=1e-6)
    assert WorldModel.load(path).config.provenance.stages[-1].steps == 6


def test_weight_average_arithmetic() -> None:
    from sim_model.train.average import WeightAverage

    weight = torch.nn.Parameter(torch.zeros(3))
    average = WeightAverage({"w": weight}, decay=0.5)
    assert average.current_decay() == pytest.approx(0.1)  # warm-up: (1 + 0) / (10 + 0)
    with torch.no_grad():
        weight.fill_(1.0)
    average.update()  # 0.1 * 0 + 0.9 * 1
    torch.testing.assert_close(average.shadow["w"], torch.full((3,), 0.9))
    average.updates = 100  # past the warm-up the decay is the configured one
    average.update()
    torch.testing.assert_close(average.shadow["w"], torch.full((3,), 0.95))
    restored = WeightAverage({"w": weight}, decay=0.5)
    restored.restore(average.tensors())
    assert restored.updates == 101 and torch.equal(restored.shadow["w"], average.shadow["w"])
    with pytest.raises(ValueError, match="decay"):
        WeightAverage({"w": weight}, decay=1.0)


def test_time_limit_exports_and_resumes(moving_squares_store, tmp_path) -> None:
    config = _config(tmp_path, autoencoder={**FAST, "steps": 5, "batch_size": 4})
    path = train_stage("autoencoder", moving_squares_store, tmp_path / "r", config_file=config,
                       time_limit_s=0, progress=False)
    assert json.loads((tmp_path / "r/autoencoder/state/trainer.json").read_text())["step"] == 1
    assert WorldModel.load(path).config.provenance.stages[-1].steps == 1  # usable right away
    path = train_stage("autoencoder", moving_squares_store, tmp_path / "r", progress=False)
    assert WorldModel.load(path).config.provenance.stages[-1].steps == 5


def test_csv_and_tensorboard_logs_hold_what_metrics_jsonl_holds(moving_squares_store, tmp_path) -> None:
    import csv

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = _config(tmp_path, autoencoder={**FAST, "steps": 4, "batch_size": 4, "val_every": 2})
    run = tmp_path / "run"
    args = ["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out", str(run),
            "--config", config, "--log", "csv", "--log", "tensorboard", "--no-progress"]
    assert iws([*args, "--steps", "2"]) == 0
    assert iws([*args, "--steps", "4"]) == 0  # resumed: the logs continue
    records = _metrics(run, "autoencoder")
    expected = {(r["step"], k, float(v)) for r in records for k, v in r.items() if k != "step"}
    with open(run / "autoencoder/metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {(int(r["step"]), r["metric"], float(r["value"])) for r in rows} == expected
    events = EventAccumulator(str(run / "autoencoder/tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {f"autoencoder/{k}" for _, k, _ in expected}
    val = [(e.step, e.value) for e in events.Scalars("autoencoder/val_loss")]
    assert val == [(r["step"], pytest.approx(r["val_loss"], rel=1e-6)) for r in records]  # float32 in TB
    assert [step for step, _ in val] == [0, 2, 4]


def test_an_unknown_metrics_log_is_refused(moving_squares_store, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
             str(tmp_path / "run"), "--log", "wandb"])
    assert "invalid choice: 'wandb'" in capsys.readouterr().err


def test_dynamics_needs_autoencoder(moving_squares_store, tmp_path, capsys) -> None:
    code = iws(["train", "--stage", "dynamics", "--data", str(moving_squares_store),
                "--out", str(tmp_path / "empty"), "--preset", "tiny", "--steps", "2"])
    assert code == 2
    assert "--stage autoencoder" in capsys.readouterr().err


def test_cli_errors(moving_squares_store, tmp_path, capsys) -> None:
    assert iws(["train", "--stage", "autoencoder", "--data", str(tmp_path / "missing.zarr"),
                "--out", str(tmp_path / "o")]) == 2
    assert "missing.zarr" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("autoencoder:\n  stepz: 3\n")
    assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store),
                "--out", str(tmp_path / "o"), "--config", str(bad)]) == 2
    assert "autoencoder.stepz" in capsys.readouterr().err
    assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store),
                "--out", str(tmp_path / "o"), "--steps", "0"]) == 2
    capsys.readouterr()
    for threads in ("0", "-2"):  # issue 34: -2 ended in torch's RuntimeError, 0 was taken silently
        for workers in ([], ["--workers", "2"]):
            assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
                        str(tmp_path / "t"), "--preset", "tiny", "--steps", "1", "--threads", threads,
                        *workers]) == 2
            err = capsys.readouterr().err
            assert f"--threads must be at least 1, got {threads}" in err and "Traceback" not in err, err
    assert not (tmp_path / "t").exists()


def test_preset_is_fixed_per_run(moving_squares_store, tmp_path) -> None:
    config = _config(tmp_path, autoencoder={**FAST, "steps": 1, "batch_size": 2})
    train_stage("autoencoder", moving_squares_store, tmp_path / "r", config_file=config, progress=False)
    with pytest.raises(SpecError, match="started with preset 'tiny'"):
        train_stage("autoencoder", moving_squares_store, tmp_path / "r", preset="small", progress=False)


def test_fed_back_batches_train_the_dynamics(tiny_features) -> None:
    """A no-grad feedback pass under bf16 autocast must not cut the gradient (autocast cache)."""
    from sim_model.config import preset_config
    from sim_model.nn.world import WorldModelNet
    from sim_model.normalize import Normalizer, fit_normalization
    from sim_model.precision import autocast
    from sim_model.train.config import StageConfig
    from sim_model.train.data import TrainingData
    from sim_model.train.dynamics import dynamics_task
    from sim_model.train.state import TrainRNG
    from tests.fixtures.model import make_square_episode, square_features

    features = square_features()
    data = TrainingData.from_episodes([make_square_episode(i, 8) for i in range(2)], features)
    train, val = data.split(0.5, seed=0)
    net_cfg = preset_config("tiny", features)
    net = WorldModelNet(net_cfg, features)
    cfg = StageConfig(batch_size=2, feedback_prob=1.0, feedback_start=0.0)
    task = dynamics_task(net, train, val, cfg, Normalizer(fit_normalization(features), torch.device("cpu")),
                         torch.device("cpu"), window=5, dyn=net_cfg.dynamics, seed=0,
                         make_world_model=lambda: None)
    with autocast(torch.device("cpu"), True):
        loss, logs = task.loss(0, 0.0, TrainRNG.seeded(0))
    loss.backward()
    assert logs["feedback"] == 1.0
    grad = net.dynamics.out[2].weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_init_from_continues_a_complete_checkpoint(trained_run: Path, moving_squares_store, tmp_path) -> None:
    """--init-from starts a stage from every weight of a finished model (e.g. the bundled one),
    in a fresh run directory, and the provenance adds the new steps to the old."""
    source = trained_run / "model"
    before = load_file(str(source / "model.safetensors"))
    config = _config(tmp_path, dynamics={**FAST, "steps": 3, "batch_size": 4, "val_every": 3, "warmup": 1})
    out = tmp_path / "continued"
    path = train_stage("dynamics", moving_squares_store, out, config_file=config, progress=False,
                       init_from=str(source))
    after = load_file(str(path / "model.safetensors"))
    assert set(after) == set(before)
    # The encoder is frozen in the dynamics stage: it is the source's, not a fresh initialisation.
    encoder = [k for k in before if k.startswith("encoder.")]
    assert encoder and all(torch.equal(before[k], after[k]) for k in encoder)
    # The dynamics continued from the source's weights: 3 small steps move it a little, where a
    # fresh initialisation would differ from them by about their own size.
    dyn = [k for k in before if k.startswith("dynamics.") and before[k].dtype.is_floating_point]
    moved = sum((after[k] - before[k]).abs().sum().item() for k in dyn)
    size = sum(before[k].abs().sum().item() for k in dyn)
    assert 0 < moved < 0.2 * size
    stages = {s.stage: s for s in WorldModel.load(path).config.provenance.stages}
    assert stages["dynamics"].steps == 150 + 3 and stages["autoencoder"].steps == 150
    stored = json.loads((out / "train_config.json").read_text())
    assert stored["model"] == WorldModel.load(source).config.model.model_dump(mode="json")


def test_fresh_dynamics_trains_a_new_architecture_on_the_checkpoints_autoencoder(
        trained_run: Path, moving_squares_store, tmp_path) -> None:
    """An architecture arm (issue 29): --init-from with the dynamics' `fresh_dynamics` keeps the
    checkpoint's encoder and decoder, builds the dynamics the config asks for from scratch, and
    the provenance counts only the new dynamics steps."""
    source = trained_run / "model"
    before = load_file(str(source / "model.safetensors"))
    model = WorldModel.load(source).config.model
    flat = list(model.dynamics.channels[:1])
    path = tmp_path / "arm.json"
    path.write_text(json.dumps({"model": {"dynamics": {"channels": flat}}, "dynamics": {
        **FAST, "fresh_dynamics": True, "steps": 2, "batch_size": 4, "val_every": 2, "warmup": 1}}))
    out = train_stage("dynamics", moving_squares_store, tmp_path / "arm", config_file=str(path),
                      progress=False, init_from=str(source))
    after = load_file(str(out / "model.safetensors"))
    kept = [k for k in before if k.startswith(("encoder.", "decoder."))]
    assert kept and all(torch.equal(before[k], after[k]) for k in kept)
    assert not any(k.startswith("dynamics.downsample") for k in after)  # one level: no downsampling
    loaded = WorldModel.load(out).config
    assert list(loaded.model.dynamics.channels) == flat
    assert {s.stage: s.steps for s in loaded.provenance.stages} == {"autoencoder": 150, "dynamics": 2}


def test_init_from_refuses_other_features(trained_run: Path, tiny_pusht_store, tmp_path) -> None:
    # the message names the field that differs and both values (not "['top'] vs ['top']")
    with pytest.raises(SpecError, match=r"other features than the data: cameras: checkpoint .*'height': 16.* vs data .*'height': 32"):
        train_stage("dynamics", tiny_pusht_store.path, tmp_path / "r", init_from=str(trained_run / "model"),
                    progress=False)


def test_init_from_with_a_widened_input_starts_where_the_checkpoint_was(trained_run: Path,
                                                                        moving_squares_store) -> None:
    """A recipe ablation may add inputs to a layer (`recency` widens the dynamics' target stem);
    --init-from copies the old weights and starts the new inputs at zero, so the widened model
    predicts exactly what the checkpoint predicted until it trains."""
    from sim_model.train.config import TrainConfig
    from sim_model.train.data import TrainingData
    from sim_model.train.run import _init_from

    source = WorldModel.load(trained_run / "model", precision="fp32")
    model = source.config.model
    wider = model.model_copy(update={"dynamics": model.dynamics.model_copy(update={"recency": True})})
    data = TrainingData.from_store(moving_squares_store)
    cfg, net = _init_from(trained_run / "model", data, TrainConfig(preset="tiny", model=wider), "dynamics")
    assert cfg.model.dynamics.recency and net.dynamics.tgt_stem.in_channels == 3 * 4 + 2
    widened = WorldModel(net, cfg, precision="fp32")
    frames, actions = data.frames[None, :5], data.actions[None, :5]
    for model in (source, widened):
        model.reset(frames[:, :4], actions=actions[:, :3], seeds=[0])
        model.step(actions[:, 3])
    assert source._z is not None and widened._z is not None
    # equal up to the convolution's summation order over more (zero) input channels
    torch.testing.assert_close(source._z, widened._z, atol=1e-4, rtol=1e-4)


def test_a_damaged_run_directory_is_refused_with_the_file_named(moving_squares_store, tmp_path, capsys) -> None:
    """Issue 34: a truncated weights.safetensors or optimizer.safetensors in a stage's state, a
    garbled train_config.json and an --out that is a file each ended `iws train` in a traceback.
    Exit 2, the file named and what to do."""
    import shutil

    run = tmp_path / "run"
    config = _config(tmp_path, autoencoder={**FAST, "steps": 1, "batch_size": 2})
    train_stage("autoencoder", moving_squares_store, run, config_file=config, progress=False)
    damages = {"autoencoder/state/weights.safetensors": "delete that folder",
               "autoencoder/state/optimizer.safetensors": "delete that folder",
               "train_config.json": "delete it"}
    for name, fix in damages.items():
        damaged = tmp_path / name.replace("/", "_")
        shutil.copytree(run, damaged)
        data = (damaged / name).read_bytes()
        (damaged / name).write_bytes(data[: len(data) // 2])
        args = ["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out", str(damaged),
                "--steps", "2", "--no-progress"]
        assert iws(args) == 2, name
        err = capsys.readouterr().err
        assert str(damaged / name) in err and fix in err.lower() and "Traceback" not in err, err
    (tmp_path / "afile").write_text("mine")
    assert iws(["train", "--stage", "autoencoder", "--data", str(moving_squares_store), "--out",
                str(tmp_path / "afile"), "--preset", "tiny", "--steps", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'afile'} is a file" in err and "Traceback" not in err, err
    assert (tmp_path / "afile").read_text() == "mine"
