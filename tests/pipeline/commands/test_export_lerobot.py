"""LeRobot v3.0 export: read back with lerobot's own LeRobotDataset and compared to the source.

Pixel tolerance (lossy AV1, crf 30, yuv420p), measured on these synthetic 32x32 PushT frames:
mean |error| 3.0 grey levels, PSNR 30.8 dB (96x96: 1.9 and 33.9 dB). Asserted: mean |error|
<= 6 and PSNR >= 27 dB per checked frame, so a shifted or wrong frame (mean error > 20) fails.
"""

import json
import shutil
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from pipeline.pusht.features import pusht_features
from schemas import CameraSpec, FeatureSpec, SpecError
from sim_model.data.formats import open_dataset
from sim_model.data.formats.lerobot_features import camera_key_map, parse_camera_keys
from sim_model.data.formats.lerobot_reader import video_backend
from sim_model.data.formats.lerobot_repair import (
    EpisodeSummary,
    ExportCheckError,
    repair_and_verify,
)
from sim_model.data.formats.lerobot_writer import check_exportable, export_lerobot
from sim_model.data.formats.stats import image_histogram
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import TINY_LENGTHS, build_tiny_pusht_store, make_pusht_episode

REPO = "iws/tiny"
CAM = "observation.images.top"


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255**2 / max(mse, 1e-12)))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> EpisodeStore:
    """3 synthetic PushT episodes (lengths 7, 12, 5) at 32x32."""
    return build_tiny_pusht_store(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="module")
def exported(source, tmp_path_factory) -> Path:
    return export_lerobot(source.path, tmp_path_factory.mktemp("out") / "lerobot", repo_id=REPO)


def summaries(source: EpisodeStore) -> list[EpisodeSummary]:
    return [EpisodeSummary(len(ep), {CAM: image_histogram(ep.frames["top"])}) for ep in source]


def test_lerobot_reads_every_frame_back(source, exported):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(REPO, root=exported, video_backend=video_backend())
    assert ds.num_episodes == len(source) == 3
    assert ds.num_frames == len(ds) == source.n_frames == sum(TINY_LENGTHS)
    assert ds.fps == 10
    assert ds.features[CAM]["shape"] == (32, 32, 3) and ds.features[CAM]["dtype"] == "video"
    assert ds.features["observation.state"]["shape"] == (2,)
    assert ds.features["action"]["names"] == ["x", "y"]
    for idx in range(len(ds)):
        item = ds[idx]
        e, t = int(item["episode_index"]), int(item["frame_index"])
        ref = source.window(e, t, t + 1)
        assert item["action"].dtype.is_floating_point
        np.testing.assert_array_equal(item["action"].numpy(), ref["action"][0])
        np.testing.assert_array_equal(item["observation.state"].numpy(), ref["state"][0])
        np.testing.assert_array_equal(item["block_pose"].numpy(), ref["block_pose"][0])
        assert bool(item["success"]) == bool(ref["success"][0])
        assert item["timestamp"].item() == np.float32(t / 10)  # exactly frame_index / fps
        assert item["task"] == "Push the T onto the target"
        image = item[CAM]  # (3, H, W) float32 in [0, 1]
        assert image.shape == (3, 32, 32)
        pixels = (image.permute(1, 2, 0).numpy() * 255).round()
        error = np.abs(pixels - ref["top"][0])
        assert error.mean() <= 6 and psnr(pixels, ref["top"][0]) >= 27, (idx, error.mean())


def test_metadata_counts_and_ranges(source, exported):
    info = json.loads((exported / "meta/info.json").read_text())
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 24, 1)
    episodes = pq.read_table(exported / "meta/episodes/chunk-000/file-000.parquet").to_pandas()
    ends = np.cumsum(TINY_LENGTHS)
    assert episodes["length"].tolist() == list(TINY_LENGTHS)
    assert episodes["dataset_from_index"].tolist() == (ends - TINY_LENGTHS).tolist()
    assert episodes["dataset_to_index"].tolist() == ends.tolist()
    # episodes share one video file back to back: each starts where the previous ended
    np.testing.assert_allclose(episodes[f"videos/{CAM}/from_timestamp"], (ends - TINY_LENGTHS) / 10)
    np.testing.assert_allclose(episodes[f"videos/{CAM}/to_timestamp"], ends / 10)


def test_files_have_the_modes_the_umask_gives(exported):
    """lerobot encodes videos through 0600 temporary files; the published dataset must not keep
    that (a trainer run by another user of the machine could not read it)."""
    import stat

    from sim_model.storage.atomic import umask

    mask = umask()
    paths = [exported, *exported.rglob("*")]
    assert any(p.suffix == ".mp4" for p in paths)
    for path in paths:
        wanted = (0o777 if path.is_dir() else 0o666) & ~mask
        assert stat.S_IMODE(path.stat().st_mode) == wanted, path


def test_stats_are_exact(source, exported):
    stats = json.loads((exported / "meta/stats.json").read_text())
    pixels = np.concatenate([ep.frames["top"].reshape(-1, 3) for ep in source]) / 255.0
    np.testing.assert_allclose(np.ravel(stats[CAM]["std"]), pixels.std(axis=0), rtol=1e-9)
    np.testing.assert_allclose(np.ravel(stats[CAM]["mean"]), pixels.mean(axis=0), rtol=1e-9)
    assert min(np.ravel(stats[CAM]["std"])) > 0.05  # lerobot 0.4.4 alone writes ~0 here
    actions = np.concatenate([ep.action for ep in source]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["std"], actions.std(axis=0), rtol=1e-9)
    np.testing.assert_allclose(stats["action"]["q50"], np.median(actions, axis=0), rtol=1e-9)
    assert stats["index"]["min"] == [0] and stats["index"]["max"] == [23]
    assert stats["episode_index"]["max"] == [2] and stats[CAM]["count"] == [24]

    per_episode = pq.read_table(exported / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    second = per_episode[1]  # episode 1: rows 7..18
    assert second["stats/index/min"] == [7] and second["stats/index/max"] == [18]
    assert second["stats/frame_index/max"] == [11]
    ep_pixels = source.episode(1).frames["top"].reshape(-1, 3) / 255.0
    np.testing.assert_allclose(np.ravel(second[f"stats/{CAM}/std"]), ep_pixels.std(axis=0),
                               rtol=1e-9)


def _drop_last_frame(video: Path) -> None:
    """Remux `video` without its last frame (what a lossy streaming encoder produces)."""
    tmp = video.with_name("dropped.mp4")
    with av.open(str(video)) as src, av.open(str(tmp), "w") as dst:
        stream = src.streams.video[0]
        out = dst.add_stream_from_template(stream, opaque=True)
        packets = [p for p in src.demux(stream) if p.size]
        last = max(p.pts for p in packets)
        for packet in packets:
            if packet.pts != last:
                packet.stream = out
                dst.mux(packet)
    tmp.replace(video)


def test_repair_fixes_timestamps_and_stats_and_detects_dropped_frames(source, exported, tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = tmp_path / "copy"
    shutil.copytree(exported, root)
    episodes_file = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(episodes_file).to_pandas()
    table[f"videos/{CAM}/from_timestamp"] += 0.37  # drift as left by aggregation
    table.to_parquet(episodes_file)
    stats = json.loads((root / "meta/stats.json").read_text())
    stats[CAM]["std"] = [[[0.0]], [[0.0]], [[0.0]]]  # lerobot 0.4.4's own value
    (root / "meta/stats.json").write_text(json.dumps(stats))

    repair_and_verify(root, summaries(source), fps=10)
    fixed = pq.read_table(episodes_file).to_pandas()
    ends = np.cumsum(TINY_LENGTHS)
    np.testing.assert_allclose(fixed[f"videos/{CAM}/from_timestamp"], (ends - TINY_LENGTHS) / 10)
    assert min(np.ravel(json.loads((root / "meta/stats.json").read_text())[CAM]["std"])) > 0.05
    item = LeRobotDataset(REPO, root=root, video_backend=video_backend())[9]  # episode 1, t=2
    pixels = (item[CAM].permute(1, 2, 0).numpy() * 255).round()
    assert psnr(pixels, source.window(1, 2, 3)["top"][0]) >= 27

    _drop_last_frame(root / f"videos/{CAM}/chunk-000/file-000.mp4")
    with pytest.raises(ExportCheckError, match="frames were dropped"):
        repair_and_verify(root, summaries(source), fps=10)


@pytest.mark.slow
def test_parallel_writers_merge_to_the_same_dataset(source, exported, tmp_path):
    merged = export_lerobot(source, tmp_path / "merged", repo_id=REPO, workers=2)
    one = json.loads((exported / "meta/stats.json").read_text())
    two = json.loads((merged / "meta/stats.json").read_text())
    assert one == two  # index ranges, image std, quantiles: identical to the single writer
    tables = [pq.read_table(p).to_pandas() for p in sorted(merged.glob("meta/episodes/*/*.parquet"))]
    episodes = tables[0] if len(tables) == 1 else __import__("pandas").concat(tables)
    ends = np.cumsum(TINY_LENGTHS)
    assert episodes["dataset_from_index"].tolist() == (ends - TINY_LENGTHS).tolist()
    assert episodes["stats/index/min"].tolist() == [[0], [7], [19]]
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(REPO, root=merged, video_backend=video_backend())
    for idx in (0, 6, 7, 18, 19, 23):  # both sides of each shard/episode boundary
        item = ds[idx]
        e, t = int(item["episode_index"]), int(item["frame_index"])
        pixels = (item[CAM].permute(1, 2, 0).numpy() * 255).round()
        assert psnr(pixels, source.window(e, t, t + 1)["top"][0]) >= 27


def test_user_errors_are_clear(source, exported, tmp_path):
    with pytest.raises(SpecError, match="already exists"):
        export_lerobot(source, exported, repo_id=REPO)
    with pytest.raises(SpecError, match="--vcodec"):
        export_lerobot(source, tmp_path / "x", vcodec="mjpeg")
    with pytest.raises(SpecError, match="without spaces"):
        export_lerobot(source, tmp_path / "x", repo_id="my data")
    small = pusht_features(resolution=16)
    store = EpisodeStore.create(tmp_path / "small.zarr", small)
    episode = make_pusht_episode(small, 0, 3)
    episode.meta = episode.meta.model_copy(update={"task": ""})
    store.append(episode)
    with pytest.raises(SpecError, match="at least 32 px"):  # SVT-AV1 would kill the process
        export_lerobot(store, tmp_path / "x", task="t")
    with pytest.raises(SpecError, match="--task"):
        export_lerobot(store, tmp_path / "x", vcodec="h264")
    assert not (tmp_path / "x").exists()
    odd = FeatureSpec(cameras=(CameraSpec(name="top", height=33, width=64),), action_dim=2)
    with pytest.raises(SpecError, match="even sizes"):
        check_exportable(odd, "h264", REPO)
    with pytest.raises(SpecError, match="integer fps"):
        check_exportable(pusht_features(32).model_copy(update={"fps": 7.5}), "h264", REPO)


def test_cli_export(source, exported, tmp_path, capsys):
    assert main(["export", "lerobot", source.path, str(exported)]) == 2
    assert "already exists" in capsys.readouterr().err
    dest = tmp_path / "cli"
    assert main(["export", "lerobot", source.path, str(dest), "--repo-id", "me/pusht",
                 "--vcodec", "h264", "--task", "unused fallback"]) == 0
    info = json.loads((dest / "meta/info.json").read_text())
    assert info["total_frames"] == 24 and info["features"][CAM]["info"]["video.codec"] == "h264"
    assert "wrote 3 episodes (24 frames)" in capsys.readouterr().out


def test_reexport_to_the_same_path_is_read_fresh(source, tmp_path):
    """lerobot caches torchcodec decoders by path; an overwrite must not serve the old video."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dest = tmp_path / "again"
    export_lerobot(source, dest, repo_id=REPO, vcodec="h264")
    before = LeRobotDataset(REPO, root=dest, video_backend=video_backend())[0][CAM]
    features = source.features
    other = EpisodeStore.create(tmp_path / "other.zarr", features)
    other.append(make_pusht_episode(features, 5, 8))  # different frames at the same path
    export_lerobot(other, dest, repo_id=REPO, vcodec="h264", overwrite=True)
    after = LeRobotDataset(REPO, root=dest, video_backend=video_backend())[0][CAM]
    expected = other.episode(0).frames["top"][0]
    pixels = (after.permute(1, 2, 0).numpy() * 255).round()
    assert psnr(pixels, expected) >= 27 and not np.array_equal(after.numpy(), before.numpy())


def test_camera_key_matches_lerobots_pusht_environment(source, tmp_path, capsys):
    """`--camera-key observation.image`: the key lerobot-eval --env.type=pusht feeds a policy;
    lerobot's own loader reads the renamed export, and lerobot-train sees it as the image input."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.datasets.utils import dataset_to_policy_features
    from lerobot.envs.configs import PushtEnv

    assert PushtEnv().features_map["pixels"] == "observation.image"  # what the env names its camera
    dest = tmp_path / "pusht_env_keys"
    assert main(["export", "lerobot", source.path, "--out", str(dest), "--repo-id", REPO,
                 "--vcodec", "h264", "--camera-key", "observation.image"]) == 0
    ds = LeRobotDataset(REPO, root=dest, video_backend=video_backend())
    assert CAM not in ds.features and ds.features["observation.image"]["shape"] == (32, 32, 3)
    visual = {k for k, f in dataset_to_policy_features(ds.features).items() if f.type.name == "VISUAL"}
    assert visual == {"observation.image"}
    for idx in (0, 7, 23):
        item = ds[idx]
        e, t = int(item["episode_index"]), int(item["frame_index"])
        pixels = (item["observation.image"].permute(1, 2, 0).numpy() * 255).round()
        assert psnr(pixels, source.window(e, t, t + 1)["top"][0]) >= 27
    stats = json.loads((dest / "meta/stats.json").read_text())["observation.image"]
    assert np.min(stats["std"]) > 0  # the repair step fixed lerobot's zero image std here too
    assert open_dataset(dest).features.camera_names == ("image",)  # iws import reads it too


def test_camera_key_errors(source, tmp_path):
    features = source.features
    assert parse_camera_keys(None, ("top",)) == {}
    assert parse_camera_keys(["observation.image"], ("top",)) == {"top": "observation.image"}
    assert parse_camera_keys(["wrist=observation.images.hand"], ("top", "wrist")) == {
        "wrist": "observation.images.hand"}
    with pytest.raises(SpecError, match="CAMERA=KEY"):
        parse_camera_keys(["observation.image"], ("top", "wrist"))
    with pytest.raises(SpecError, match="twice"):
        parse_camera_keys(["top=observation.image", "top=observation.images.a"], ("top",))
    for bad in ("images.top", "observation.state", "observation.images.a/b", "action"):
        with pytest.raises(SpecError, match="observation.image"):
            camera_key_map(features, {"top": bad})
    with pytest.raises(SpecError, match="lacks"):
        camera_key_map(features, {"wrist": "observation.image"})
    with pytest.raises(SpecError, match="--camera-key"):
        export_lerobot(source, tmp_path / "x", repo_id=REPO, camera_keys={"top": "image"})
    assert not (tmp_path / "x").exists()
