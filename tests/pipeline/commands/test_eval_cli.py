"""`iws eval fidelity` and `iws eval stability` end to end: tiny checkpoint, 32 x 32 store."""

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from pipeline.cli import main
from pipeline.pusht.features import pusht_features
from sim_model.evaluate import FidelityReport
from sim_model.stability import StabilityReport
from workers.actions.scripted import random_walk_actions


@pytest.fixture(autouse=True)
def restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


FAST = ["--threads", "1", "--no-progress"]


def test_fidelity_writes_report_plot_video_and_table(tiny_checkpoint, tiny_pusht_store, tmp_path, capsys,
                                                    monkeypatch):
    out = tmp_path / "fid"
    store = Path(tiny_pusht_store.path)
    monkeypatch.chdir(store.parent)  # a relative --data stays relative in the committed report
    code = main(["eval", "fidelity", "--model", str(tiny_checkpoint), "--data", store.name,
                 "--horizons", "1,5,50", "--object-mask", "pusht", "--batch-size", "2",
                 "--videos", "2", "--out", str(out), *FAST])
    assert code == 0
    report = FidelityReport.model_validate_json((out / "metrics.json").read_text())
    assert [h.horizon for h in report.horizons] == [1, 5] and report.skipped_horizons == [50]
    assert report.analyzer == "pusht" and report.episodes == [0, 1, 2]
    assert report.data == store.name
    h1 = report.horizons[0]
    assert h1.psnr["model"].n == 3 and set(h1.object_iou) == {"model", "baseline"}
    assert 0.0 <= h1.shape_score["truth"].mean <= 1.0
    assert (out / "fidelity.png").read_bytes()[:4] == b"\x89PNG"
    video = iio.imread(out / "rollouts.gif", index=None)
    # episodes 0 and 1 rolled 5 steps (the longest kept horizon) + the start frame
    assert video.shape[0] == 6
    text = capsys.readouterr().out
    assert "PSNR model" in text and "IoU repeat" in text


def test_stability_writes_per_step_series(tiny_checkpoint, tiny_pusht_store, tmp_path, capsys):
    out = tmp_path / "stab"
    code = main(["eval", "stability", "--model", str(tiny_checkpoint),
                 "--init", f"{tiny_pusht_store.path}#1:2", "--steps", "12", "--probe-every", "4",
                 "--object-mask", "pusht", "--out", str(out), *FAST])
    assert code == 0
    report = StabilityReport.model_validate_json((out / "stability.json").read_text())
    assert report.steps == 12 and report.all_finite and report.init.endswith("#1:2")
    assert len(report.series["mean_intensity"]) == 12
    probed = [i for i, v in enumerate(report.series["rigid_shape"]) if v is not None]
    assert probed == [0, 4, 8, 11]  # every 4th step and the last
    assert set(report.series) >= {"finite", "contrast", "agent_visible", "block_pixels"}
    assert report.snapshot_steps[0] == 0 and report.snapshot_steps[-1] == 12
    for name in ("stability.png", "stability_frames.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    assert "mean_intensity" in capsys.readouterr().out


def test_random_walk_stays_in_range_and_moves():
    features = pusht_features()
    actions = random_walk_actions(features, 2000, 0.05, seed=3, start=np.array([100.0, 400.0]))
    assert actions.shape == (2000, 2) and actions.dtype == np.float32
    assert actions.min() >= 0 and actions.max() <= 512
    assert np.abs(actions[0] - [100, 400]).max() < 1e-3
    # it crosses the workspace rather than jittering in place
    assert np.ptp(actions, axis=0).min() > 300
    again = random_walk_actions(features, 2000, 0.05, seed=3, start=np.array([100.0, 400.0]))
    assert (actions == again).all()


@pytest.mark.parametrize(("argv", "message"), [
    (["--horizons", "1,x"], "not a comma-separated list"),
    (["--horizons", "0,5"], "positive step counts"),
    (["--batch-size", "0"], "--batch-size must be at least 1"),
    (["--horizons", "40"], "exceeds the longest episode"),
    (["--device", "cuda"] if not torch.cuda.is_available() else ["--start", "-1"],
     "no CUDA device" if not torch.cuda.is_available() else "--start must be >= 0"),
])
def test_fidelity_user_errors(tiny_checkpoint, tiny_pusht_store, tmp_path, capsys, argv, message):
    code = main(["eval", "fidelity", "--model", str(tiny_checkpoint), "--data", tiny_pusht_store.path,
                 "--out", str(tmp_path), *FAST, *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_missing_inputs_are_reported(tiny_checkpoint, tiny_pusht_store, tmp_path, capsys):
    code = main(["eval", "fidelity", "--model", str(tiny_checkpoint), "--data", str(tmp_path / "nope"),
                 "--out", str(tmp_path), *FAST])
    assert code == 2 and "does not exist" in capsys.readouterr().err
    code = main(["eval", "stability", "--model", str(tiny_checkpoint),
                 "--init", f"{tiny_pusht_store.path}#5:0", "--steps", "3", "--out", str(tmp_path), *FAST])
    assert code == 2 and "episode 5 frame 0 does not exist" in capsys.readouterr().err
    code = main(["eval", "stability", "--model", str(tmp_path / "no_model"), "--init",
                 tiny_pusht_store.path, "--steps", "3", "--out", str(tmp_path), *FAST])
    assert code == 2 and "no_model" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


def test_eval_requires_an_evaluation(capsys):
    with pytest.raises(SystemExit):
        main(["eval"])
    assert "fidelity" in capsys.readouterr().err


def test_side_by_side_layout_and_video_formats(tmp_path):
    from pipeline.evaluation.report import side_by_side, write_video
    from sim_model.evaluate import EpisodeVideo

    rng = np.random.default_rng(0)
    clip = lambda n: rng.integers(0, 256, (n, 1, 33, 33, 3), dtype=np.uint8)  # noqa: E731
    truth, model = clip(5), clip(5)
    frames = side_by_side([EpisodeVideo(0, truth, model), EpisodeVideo(1, clip(3), clip(3))])
    # 33 px upscaled x3; header strip 12 px; rows and columns separated by 4 px
    assert frames.shape == (5, 12 + 99 + 4 + 99, 99 + 4 + 99, 3)
    assert (frames[2, 12:111:3, 0:99:3] == truth[2, 0]).all()  # top left: truth, episode 0
    assert (frames[2, 12:111:3, 103::3] == model[2, 0]).all()  # top right: model
    for suffix in ("gif", "mp4"):
        write_video(frames, tmp_path / f"v.{suffix}", fps=10)
        back = iio.imread(tmp_path / f"v.{suffix}", index=None) if suffix == "gif" else \
            iio.imread(tmp_path / f"v.{suffix}", plugin="pyav")
        assert back.shape[:3] == (5, 214, 202)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.gif", "v.mp4"]  # no temp files left
