"""`iws collect pusht`: real gym-pusht, real worker processes, real EpisodeStore (tiny sizes)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.pusht.collect import CollectConfig, parse_mix
from pipeline.pusht.env import PushTSim
from pipeline.pusht.features import pusht_features
from pipeline.pusht.primitives import PRIMITIVES, moved_steps, play
from schemas import SpecError
from sim_model.data.store import EpisodeStore

EPISODES, STEPS = 4, 50


def _collect(out: Path, *extra: str, episodes: int = EPISODES, steps: int = STEPS) -> int:
    return main(["collect", "pusht", "--episodes", str(episodes), "--steps", str(steps),
                 "--out", str(out), *extra])


def _arrays(path: Path) -> tuple[dict[str, np.ndarray], np.ndarray, list]:
    store = EpisodeStore.open(path)
    arrays, ends = store.load_all()
    return arrays, ends, [store.meta(i) for i in range(len(store))]


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seed 0, 4 x 50 steps at 96 px, collected by 2 worker processes with a progress bar."""
    out = tmp_path_factory.mktemp("collect") / "out.zarr"
    assert _collect(out, "--seed", "0", "--workers", "2") == 0
    return out


def test_store_layout_agrees(two_workers: Path) -> None:
    store = EpisodeStore.open(two_workers)
    assert store.features == pusht_features(96)
    assert len(store) == EPISODES and store.n_frames == EPISODES * STEPS
    np.testing.assert_array_equal(store.episode_ends, np.arange(1, EPISODES + 1) * STEPS)
    arrays, ends = store.load_all()
    assert arrays["top"].shape == (EPISODES * STEPS, 96, 96, 3) and arrays["top"].dtype == np.uint8
    assert arrays["action"].shape == (EPISODES * STEPS, 2) and arrays["action"].dtype == np.float32
    assert arrays["state"].shape == (EPISODES * STEPS, 2)
    assert arrays["block_pose"].shape == (EPISODES * STEPS, 3)
    assert arrays["coverage"].shape == (EPISODES * STEPS,)
    assert arrays["success"].dtype == np.bool_
    ids = set()
    for i in range(EPISODES):
        meta = store.meta(i)
        ids.add(meta.episode_id)
        assert meta.length == STEPS and meta.fps == 10.0
        assert meta.source == f"pusht:{meta.info['primitive']}" and meta.info["primitive"] in PRIMITIVES
        assert meta.task == "Push the T-shaped block onto the green target"
        assert meta.seed == CollectConfig(episodes=EPISODES).attempt_seed(i, int(meta.info["attempt"]))
    assert len(ids) == EPISODES


def test_extras_are_consistent(two_workers: Path) -> None:
    arrays, _, _ = _arrays(two_workers)
    coverage = arrays["coverage"]
    assert np.all((coverage >= 0) & (coverage <= 1))
    np.testing.assert_array_equal(arrays["success"], coverage > 0.95)
    assert np.all((arrays["block_pose"][:, 2] >= 0) & (arrays["block_pose"][:, 2] < 2 * np.pi))
    for key in ("action", "state"):
        assert np.all((arrays[key] >= 0) & (arrays[key] <= 512))
    moved = moved_steps(arrays["block_pose"].astype(np.float64))
    assert 0.1 < moved.mean() < 0.95  # play moves the block, but not in every step


def test_episode_replays_exactly_in_gym_pusht(two_workers: Path) -> None:
    """Frame t / state t / extras t are the observation before action t (and nothing drifts)."""
    store = EpisodeStore.open(two_workers)
    episode = store.episode(1)
    sim = PushTSim(96)
    obs = sim.reset(episode.meta.seed)
    for t in range(len(episode)):
        np.testing.assert_array_equal(episode.frames["top"][t], obs.frame)
        np.testing.assert_array_equal(episode.state[t], obs.agent.astype(np.float32))
        np.testing.assert_allclose(episode.extras["block_pose"][t][:2], obs.block_pose[:2], atol=1e-3)
        assert episode.extras["coverage"][t] == np.float32(obs.coverage)
        obs = sim.step(episode.action[t])


def test_same_seed_is_byte_identical_whatever_the_workers(two_workers: Path, tmp_path: Path) -> None:
    assert _collect(tmp_path / "one.zarr", "--seed", "0", "--workers", "1", "--no-progress") == 0
    a, ends_a, meta_a = _arrays(two_workers)
    b, ends_b, meta_b = _arrays(tmp_path / "one.zarr")
    np.testing.assert_array_equal(ends_a, ends_b)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), key
    assert meta_a == meta_b


def test_different_seed_differs(two_workers: Path, tmp_path: Path) -> None:
    assert _collect(tmp_path / "s1.zarr", "--seed", "1", "--workers", "1", "--no-progress",
                    episodes=1) == 0
    a, _, _ = _arrays(two_workers)
    b, _, meta = _arrays(tmp_path / "s1.zarr")
    assert meta[0].episode_id == "pusht-s1-000000"
    assert not np.array_equal(a["top"][:STEPS], b["top"])
    assert not np.array_equal(a["action"][:STEPS], b["action"])


def test_resume_finishes_an_interrupted_collection(two_workers: Path, tmp_path: Path) -> None:
    out = tmp_path / "resumed.zarr"
    assert _collect(out, "--seed", "0", "--workers", "1", "--no-progress", episodes=2) == 0
    assert _collect(out, "--seed", "0", "--workers", "1", "--no-progress", "--resume") == 0
    a, ends_a, _ = _arrays(two_workers)
    b, ends_b, _ = _arrays(out)
    np.testing.assert_array_equal(ends_a, ends_b)
    for key in a:
        assert a[key].tobytes() == b[key].tobytes(), key


@pytest.mark.parametrize("primitive", sorted(PRIMITIVES))
def test_primitive_does_what_it_means(primitive: str) -> None:
    sim = PushTSim(16)
    outcomes, moved = [], []
    for seed in (11, 12):
        record = play(sim, primitive, 70, seed)
        outcomes += record.outcomes
        moved.append(moved_steps(record.poses()).mean())
    assert True in outcomes, outcomes
    if primitive == "roam":
        assert max(moved) == 0.0 and all(outcomes)
    else:
        assert min(moved) > 0.05


def test_progress_bar_and_resolution(two_workers: Path, capsys: pytest.CaptureFixture[str],
                                tmp_path: Path) -> None:
    out = tmp_path / "bar.zarr"
    assert _collect(out, "--workers", "1", "--resolution", "32", episodes=1, steps=5) == 0
    captured = capsys.readouterr()
    assert "1/1" in captured.err
    assert "1 episodes x 5 steps at 32x32" in captured.out
    store = EpisodeStore.open(out)
    assert store.features == pusht_features(32)
    assert store.episode(0).frames["top"].shape == (5, 32, 32, 3)


@pytest.mark.parametrize(("args", "message"), [
    (["--episodes", "-3"], "--episodes must be an integer >= 1, got -3"),
    (["--steps", "0"], "--steps must be an integer >= 2"),
    (["--seed", "-1"], "--seed must be an integer >= 0"),
    (["--resolution", "4"], "--resolution must be an integer >= 8"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--mix", "push=1,spin=2"], "unknown primitive 'spin'; known primitives are push, rotate"),
    (["--mix", "push"], "--mix entry 'push' has no weight"),
    (["--mix", "push=fast"], "weight of 'push' is 'fast', not a number"),
    (["--mix", "push=0,roam=0"], "not all 0"),
    (["--overwrite", "--resume"], "contradict"),
])
def test_bad_arguments_give_one_paragraph(args: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["collect", "pusht", "--episodes", "1", "--steps", "5", "--out",
            str(tmp_path / "x.zarr"), "--no-progress", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.zarr").exists()


def test_existing_output_needs_overwrite(two_workers: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "exists.zarr"
    assert _collect(out, "--no-progress", "--workers", "1", episodes=1, steps=5) == 0
    assert _collect(out, "--no-progress", "--workers", "1", episodes=1, steps=5) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert _collect(out, "--no-progress", "--workers", "1", "--overwrite", "--seed", "3",
                    episodes=1, steps=6) == 0
    assert EpisodeStore.open(out).episode_ends.tolist() == [6]
    # A resume must continue the same collection, not mix two.
    assert _collect(out, "--no-progress", "--resume", "--seed", "4", episodes=2, steps=6) == 2
    assert "cannot resume" in capsys.readouterr().err


def test_unwritable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    assert _collect(blocker / "out.zarr", "--no-progress", episodes=1, steps=5) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert _collect(blocker, "--no-progress", "--overwrite", episodes=1, steps=5) == 2
    assert "is a file; give a directory path" in capsys.readouterr().err
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert _collect(locked / "out.zarr", "--no-progress", episodes=1, steps=5) == 2
        assert "not writable" in capsys.readouterr().err


def test_config_and_mix_validation() -> None:
    assert parse_mix("push=0.5, rotate=0.5") == {"push": 0.5, "rotate": 0.5}
    config = CollectConfig(episodes=10, mix={"push": 1.0})
    assert {config.primitive(i) for i in range(10)} == {"push"}
    assert config.attempt_seed(3, 0) != config.attempt_seed(3, 1) != config.attempt_seed(4, 0)
    with pytest.raises(SpecError, match="unknown primitives"):
        CollectConfig(episodes=1, mix={"jump": 1.0})
    with pytest.raises(SpecError, match="at most 1024"):
        CollectConfig(episodes=1, resolution=2048)


def test_output_is_positional_or_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`iws collect pusht OUT` and `--out OUT` are one command, as `iws export SRC DEST` is."""
    args = ["--episodes", "1", "--steps", "5", "--workers", "1", "--no-progress"]
    assert main(["collect", "pusht", str(tmp_path / "a.zarr"), *args]) == 0
    assert main(["collect", "pusht", *args, "--out", str(tmp_path / "b.zarr")]) == 0
    a, _, _ = _arrays(tmp_path / "a.zarr")
    b, _, _ = _arrays(tmp_path / "b.zarr")
    assert all(a[key].tobytes() == b[key].tobytes() for key in a)
    assert main(["collect", "pusht", str(tmp_path / "c.zarr"), *args, "--out",
                 str(tmp_path / "d.zarr")]) == 2
    assert "different outputs" in capsys.readouterr().err
    assert main(["collect", "pusht", *args]) == 2
    assert "no output given" in capsys.readouterr().err
    assert not (tmp_path / "c.zarr").exists() and not (tmp_path / "d.zarr").exists()
