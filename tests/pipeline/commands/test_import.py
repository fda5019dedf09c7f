"""Users' datasets: format detection, reading LeRobot v3.0 in place, `iws import`, round trips."""

import numpy as np
import pytest

from pipeline.cli import main
from schemas import SpecError
from sim_model.data.formats import detect_format, import_dataset, open_dataset
from sim_model.data.formats.lerobot_reader import LeRobotReader
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.formats.zarr_dp_writer import export_zarr_dp
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import TINY_LENGTHS, build_tiny_pusht_store, make_pusht_episode

# Same measured AV1 tolerance as test_export_lerobot.py (32x32: mean |error| 3.0, 30.8 dB).
MEAN_ERROR_MAX = 6.0


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> EpisodeStore:
    return build_tiny_pusht_store(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="module")
def lerobot_root(source, tmp_path_factory):
    return export_lerobot(source, tmp_path_factory.mktemp("lr") / "tiny", repo_id="iws/tiny")


def test_detect_and_open_each_format(source, lerobot_root, tmp_path):
    assert detect_format(source.path) == "iws"
    assert isinstance(open_dataset(source.path), EpisodeStore)
    assert detect_format(lerobot_root) == "lerobot"
    assert isinstance(open_dataset(lerobot_root), LeRobotReader)
    dp = export_zarr_dp(source, tmp_path / "dp.zarr")
    assert detect_format(dp) == "zarr-dp"
    with pytest.raises(SpecError, match="no dataset at"):
        open_dataset(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(SpecError, match="neither a Zarr store nor a LeRobot"):
        open_dataset(tmp_path / "plain")
    with pytest.raises(SpecError, match="drop --keys"):
        open_dataset(lerobot_root, fps=30)


def test_lerobot_reader_serves_the_store_api(source, lerobot_root):
    reader = LeRobotReader(lerobot_root)
    spec = reader.features
    assert spec.camera_names == ("top",) and (spec.action_dim, spec.state_dim) == (2, 2)
    assert spec.fps == 10 and spec.action_names == ("x", "y")
    assert [e.name for e in spec.extras] == ["block_pose", "coverage", "success"]
    assert {e.name: (e.shape, e.dtype) for e in spec.extras}["coverage"] == ((), "float32")
    assert len(reader) == 3 and reader.n_frames == 24
    assert reader.episode_ends.tolist() == np.cumsum(TINY_LENGTHS).tolist()
    meta = reader.meta(2)
    assert meta.task == "Push the T onto the target" and meta.length == 5
    assert meta.source == "import:lerobot"
    for i, ref in enumerate(source):
        episode = reader.episode(i)
        np.testing.assert_array_equal(episode.action, ref.action)  # actions bit for bit
        np.testing.assert_array_equal(episode.state, ref.state)
        np.testing.assert_array_equal(episode.extras["success"], ref.extras["success"])
        error = np.abs(episode.frames["top"].astype(int) - ref.frames["top"]).mean()
        assert error <= MEAN_ERROR_MAX, (i, error)
    # an initial frame, as the generation job reads it: one decode, same pixels as the episode
    first = reader.window(1, 3, 4, keys=["top"])["top"]
    np.testing.assert_array_equal(first[0], reader.episode(1).frames["top"][3])
    assert set(reader.window(0, 0, 7, keys=["action"])) == {"action"}
    with pytest.raises(IndexError):
        reader.window(0, 5, 9)
    with pytest.raises(KeyError, match="unknown keys"):
        reader.window(0, 0, 1, keys=["wrist"])


def test_pyav_fallback_decodes_the_same_frames(lerobot_root, monkeypatch):
    """Without torchcodec's FFmpeg libraries the reader decodes with PyAV instead."""
    from sim_model.data.formats import lerobot_reader as module

    reference = LeRobotReader(lerobot_root).episode(1).frames["top"]
    monkeypatch.setattr(module, "video_backend", lambda: "pyav")
    reader = LeRobotReader(lerobot_root)
    assert reader._decoders is None
    frames = reader.episode(1).frames["top"]
    assert frames.shape == reference.shape
    assert np.abs(frames.astype(int) - reference).mean() <= 1.0  # same stream, other decoder


def test_round_trip_lerobot_iws_lerobot(lerobot_root, tmp_path):
    """LeRobot -> iws -> LeRobot keeps every frame (within codec tolerance) and every action."""
    first = LeRobotReader(lerobot_root)
    store = EpisodeStore.open(import_dataset(lerobot_root, tmp_path / "iws.zarr"), "r")
    assert (len(store), store.n_frames) == (len(first), first.n_frames)
    again = LeRobotReader(export_lerobot(store, tmp_path / "again", repo_id="iws/again"))
    assert again.episode_ends.tolist() == first.episode_ends.tolist()
    errors = []
    for i in range(len(first)):
        a, imported, b = first.episode(i), store.episode(i), again.episode(i)
        # import decodes once and keeps exactly what lerobot decodes
        np.testing.assert_array_equal(imported.frames["top"], a.frames["top"])
        np.testing.assert_array_equal(imported.action, a.action)
        np.testing.assert_array_equal(b.action, a.action)
        np.testing.assert_array_equal(b.extras["block_pose"], a.extras["block_pose"])
        assert b.meta.task == a.meta.task
        errors.append(np.abs(b.frames["top"].astype(int) - a.frames["top"]).mean())
    assert max(errors) <= MEAN_ERROR_MAX, errors  # one more lossy generation


def test_image_dtype_lerobot_dataset_with_foreign_names(tmp_path):
    """A dataset made with lerobot directly: PNG frames, `observation.image`, `next.reward`."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = {
        "observation.image": {"dtype": "image", "shape": (24, 24, 3),
                              "names": ["height", "width", "channel"]},
        "action": {"dtype": "float32", "shape": (3,), "names": None},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
    }
    ds = LeRobotDataset.create("me/png", fps=15, features=features, root=tmp_path / "png")
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (9, 24, 24, 3), dtype=np.uint8)
    actions = rng.normal(size=(9, 3)).astype(np.float32)
    for start, stop in ((0, 4), (4, 9)):
        for t in range(start, stop):
            ds.add_frame({"observation.image": frames[t], "action": actions[t],
                          "next.reward": np.array([t], np.float32), "task": f"task {start}"})
        ds.save_episode()
    ds.finalize()

    store = EpisodeStore.open(import_dataset(tmp_path / "png", tmp_path / "png.zarr"), "r")
    assert store.features.camera_names == ("image",) and store.features.state_dim == 0
    assert store.features.fps == 15 and store.meta(1).task == "task 4"
    arrays, ends = store.load_all()
    assert ends.tolist() == [4, 9]
    np.testing.assert_array_equal(arrays["image"], frames)  # PNG is lossless
    np.testing.assert_array_equal(arrays["action"], actions)
    np.testing.assert_array_equal(arrays["next_reward"], np.arange(9, dtype=np.float32))


def test_import_resumes_and_refuses_other_data(source, tmp_path):
    dest = tmp_path / "partial.zarr"
    partial = EpisodeStore.create(dest, source.features)
    partial.append(source.episode(0))  # as left by an interrupted import
    seen = []
    import_dataset(source.path, dest, on_episode=seen.append)
    assert seen == list(TINY_LENGTHS[1:])
    resumed = EpisodeStore.open(dest, "r")
    assert [resumed.meta(i).episode_id for i in range(3)] == [source.meta(i).episode_id
                                                             for i in range(3)]
    other = tmp_path / "other.zarr"
    store = EpisodeStore.create(other, source.features)
    store.append(make_pusht_episode(source.features, 7, 4, episode_id="someone-else"))
    with pytest.raises(SpecError, match="different dataset"):
        import_dataset(source.path, other)
    import_dataset(source.path, other, overwrite=True)
    assert len(EpisodeStore.open(other, "r")) == 3


def test_cli_import(lerobot_root, tmp_path, capsys):
    dest = tmp_path / "cli.zarr"
    assert main(["import", str(lerobot_root), str(dest)]) == 0
    assert "imported 3 episodes (24 frames)" in capsys.readouterr().out
    assert len(EpisodeStore.open(dest, "r")) == 3
    assert main(["import", str(tmp_path / "nothing"), str(tmp_path / "x.zarr")]) == 2
    assert "no dataset at" in capsys.readouterr().err
    assert main(["import", str(lerobot_root), str(tmp_path / "y.zarr"), "--fps", "5"]) == 2
    assert "drop --keys/--fps/--task" in capsys.readouterr().err
    assert main(["import", str(lerobot_root), "--out", str(tmp_path / "out.zarr")]) == 0
    assert len(EpisodeStore.open(tmp_path / "out.zarr", "r")) == 3


def test_import_never_writes_into_or_over_its_source(tmp_path, capsys):
    src = build_tiny_pusht_store(tmp_path).path
    assert main(["import", src, str(tmp_path), "--overwrite"]) == 2
    assert f"contains the source {src}" in capsys.readouterr().err
    with pytest.raises(SpecError, match="lies inside the source"):
        import_dataset(src, f"{src}/copy.zarr")
    assert len(EpisodeStore.open(src, "r")) == 3
