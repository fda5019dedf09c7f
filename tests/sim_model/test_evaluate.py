"""Fidelity evaluation with a real tiny world model on tiny stores (32 x 32)."""

import numpy as np
import pytest
import torch

from pipeline.pusht.features import pusht_features
from schemas import EpisodeMeta, SpecError
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore
from sim_model.evaluate import evaluate_fidelity, mask_iou, plan_horizons
from sim_model.metrics import PSNR_MAX_DB, psnr, ssim
from sim_model.world_model import WorldModel

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    return WorldModel.random(pusht_features(resolution=32), preset="tiny", seed=0, precision="fp32")


@pytest.fixture(scope="module")
def self_store(model, tmp_path_factory):
    """Episodes the model itself generated (one at a time, seed = episode index): evaluating the
    model on them must reproduce them exactly, which pins the action/frame alignment."""
    features = model.features
    store = EpisodeStore.create(tmp_path_factory.mktemp("self") / "self.zarr", features)
    rng = np.random.default_rng(0)
    for i, length in enumerate((9, 6, 9)):
        first = rng.integers(0, 256, (1, 1, 32, 32, 3), dtype=np.uint8)
        actions = rng.uniform(0, 512, (1, length - 1, 2)).astype(np.float32)
        rolled = model.rollout(first, actions, seeds=[i]).frames[0]  # (T-1, 1, 32, 32, 3)
        frames = np.concatenate([first, rolled])[:, 0]  # (T, 32, 32, 3)
        action = np.concatenate([actions[0], actions[0, -1:]])  # the last action is never used
        state = rng.uniform(0, 512, (length, 2)).astype(np.float32)
        extras = {"block_pose": np.zeros((length, 3), np.float32),
                  "coverage": np.zeros(length, np.float32), "success": np.zeros(length, bool)}
        store.append(Episode(frames={"top": frames}, action=action, state=state, extras=extras,
                             meta=EpisodeMeta(episode_id=f"self-{i}", length=length)))
    return EpisodeStore.open(store.path, "r")


class BrightAnalyzer:
    """A plain analyzer: the object is every pixel brighter than 128 on average."""

    name = "bright"

    def object_mask(self, frame):
        return frame.mean(-1) > 128

    def shape_score(self, frame):
        return float(self.object_mask(frame).mean())

    def probe(self, frame):
        return {"bright": self.shape_score(frame)}


def test_model_reproduces_its_own_rollouts(model, self_store):
    result = evaluate_fidelity(model, self_store, horizons=(1, 5, 8), batch_size=1, seed=0,
                               analyzer=BrightAnalyzer())
    report = result.report
    assert [h.horizon for h in report.horizons] == [1, 5, 8]
    assert [h.episodes for h in report.horizons] == [[0, 1, 2], [0, 1, 2], [0, 2]]
    for h in report.horizons:
        assert h.psnr["model"].values == [PSNR_MAX_DB] * len(h.episodes)
        assert h.ssim["model"].mean == pytest.approx(1.0)
        assert h.object_iou["model"].mean == 1.0
        assert h.psnr["baseline"].mean < 30  # random frames: repeating the first is poor
        assert h.shape_score["model"].values == h.shape_score["truth"].values


def test_baseline_and_object_metrics_match_direct_computation(model, tiny_pusht_store):
    analyzer = BrightAnalyzer()
    result = evaluate_fidelity(model, tiny_pusht_store, horizons=(2, 6), start=1, batch_size=2,
                               analyzer=analyzer)
    h6 = result.report.horizons[1]
    assert h6.episodes == [1]  # lengths 7, 12, 5: only episode 1 has 6 steps after frame 1
    frames = tiny_pusht_store.episode(1).frames["top"]
    assert h6.psnr["baseline"].values[0] == pytest.approx(float(psnr(frames[1], frames[7])))
    assert h6.ssim["baseline"].values[0] == pytest.approx(float(ssim(frames[1], frames[7])))
    expected_iou = mask_iou(analyzer.object_mask(frames[1]), analyzer.object_mask(frames[7]))
    assert h6.object_iou["baseline"].values[0] == pytest.approx(expected_iou)
    model_stats = h6.psnr["model"]
    assert np.isfinite(model_stats.mean) and model_stats.std == 0.0 and model_stats.n == 1


def test_results_do_not_depend_on_batching(model, tiny_pusht_store):
    one = evaluate_fidelity(model, tiny_pusht_store, horizons=(1, 4), batch_size=1).report
    three = evaluate_fidelity(model, tiny_pusht_store, horizons=(1, 4), batch_size=3).report
    for a, b in zip(one.horizons, three.horizons, strict=True):
        assert a.episodes == b.episodes
        assert a.psnr["model"].values == pytest.approx(b.psnr["model"].values, abs=0.05)


def test_skips_horizons_longer_than_every_episode(model, tiny_pusht_store, caplog):
    result = evaluate_fidelity(model, tiny_pusht_store, horizons=(1, 11, 12, 50), batch_size=3,
                               video_episodes=2)
    assert [h.horizon for h in result.report.horizons] == [1, 11]
    assert result.report.skipped_horizons == [12, 50]
    assert "longer than every episode" in caplog.text
    # videos start at the real frame and run as far as each episode was evaluated
    assert [(v.episode, v.truth.shape, v.model.shape) for v in result.videos] == [
        (0, (7, 1, 32, 32, 3), (7, 1, 32, 32, 3)), (1, (12, 1, 32, 32, 3), (12, 1, 32, 32, 3))]
    assert (result.videos[0].model[0] == result.videos[0].truth[0]).all()


def test_context_frames_seed_the_window(model, tiny_pusht_store):
    report = evaluate_fidelity(model, tiny_pusht_store, horizons=(3,), start=2, context_frames=3).report
    # lengths 7, 12, 5: episode 2 has only 2 frames after frame 2
    assert report.context_frames == 3 and report.horizons[0].episodes == [0, 1]
    with pytest.raises(SpecError, match="start=1 leaves no room for 3 context frames"):
        evaluate_fidelity(model, tiny_pusht_store, horizons=(3,), start=1, context_frames=3)


def test_user_errors_have_clear_messages(model, tiny_pusht_store, tmp_path):
    with pytest.raises(SpecError, match="every horizon"):
        evaluate_fidelity(model, tiny_pusht_store, horizons=(40,))
    with pytest.raises(SpecError, match=r"episodes \[7\] are not in the store"):
        evaluate_fidelity(model, tiny_pusht_store, episodes=[0, 7])
    with pytest.raises(SpecError, match="no episode has a frame after frame 20"):
        evaluate_fidelity(model, tiny_pusht_store, start=20)
    with pytest.raises(SpecError, match="positive"):
        plan_horizons({0: 5}, [0, 2], 0, 1)
    other = EpisodeStore.create(tmp_path / "big.zarr", pusht_features(resolution=16))
    with pytest.raises(SpecError, match=r"cameras \[\('top', 16, 16\)\].*differ"):
        evaluate_fidelity(model, other)


def test_stability_records_every_step_and_probes(model):
    from sim_model.stability import StabilityReport, run_stability

    rng = np.random.default_rng(0)
    first = rng.integers(0, 256, (1, 32, 32, 3), dtype=np.uint8)
    actions = rng.uniform(0, 512, (16, 2))
    result = run_stability(model, first, actions, analyzer=BrightAnalyzer(), probe_every=5,
                           snapshots=3, init_ref="random#0:0")
    report = result.report
    assert report.all_finite and report.first_nonfinite_step is None
    assert {k: len(v) for k, v in report.series.items()} == {
        "finite": 16, "mean_intensity": 16, "contrast": 16, "bright": 16}
    assert [i for i, v in enumerate(report.series["bright"]) if v is not None] == [0, 5, 10, 15]
    assert report.snapshot_steps == [0, 8, 16] and result.snapshots.shape == (3, 1, 32, 32, 3)
    assert (result.snapshots[0] == first).all()
    mean = report.summary["mean_intensity"]
    assert 0 <= mean.min <= mean.mean <= mean.max <= 1
    assert StabilityReport.model_validate_json(report.model_dump_json()) == report
    again = run_stability(model, first, actions, analyzer=BrightAnalyzer(), probe_every=5, snapshots=3,
                          init_ref="random#0:0")
    assert again.report.series == report.series  # seeded: reproducible


def test_stability_flags_a_non_finite_state():
    """A model whose state head outputs NaN (weights corrupted) is caught at step 1."""
    from sim_model.stability import run_stability

    broken = WorldModel.random(pusht_features(resolution=32), preset="tiny", seed=1, precision="fp32")
    assert broken.has_state
    with torch.no_grad():
        for p in broken.net.state_head.parameters():
            p.fill_(float("nan"))
    # Rebuild from the corrupted weights: inference runs on a copy made at construction.
    broken = WorldModel(broken.net, broken.config, precision="fp32")
    frames = np.zeros((1, 32, 32, 3), np.uint8)
    report = run_stability(broken, frames, np.full((3, 2), 256.0)).report
    assert not report.all_finite and report.first_nonfinite_step == 1
    assert report.series["finite"] == [0.0, 0.0, 0.0]


def test_stability_rejects_bad_arguments(model):
    from sim_model.stability import run_stability

    frames = np.zeros((1, 32, 32, 3), np.uint8)
    with pytest.raises(SpecError, match="actions must be"):
        run_stability(model, frames, np.zeros((4,)))
    with pytest.raises(SpecError, match="probe_every"):
        run_stability(model, frames, np.zeros((4, 2)), probe_every=0)
