"""EpisodeStore: round trip, validation, user errors, multi-process reads, crash consistency."""

from __future__ import annotations

import copy as copy_module
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from pipeline.pusht.features import pusht_features
from schemas import CameraSpec, FeatureSpec, SpecError
from sim_model.data.store import EpisodeStore, StoreDamaged, StoreNotFound
from tests.fixtures.store import TINY_LENGTHS, make_pusht_episode
from tests.sim_model.data.store_writer import episode_length

FEATURES = pusht_features(resolution=32)
REPO_ROOT = Path(__file__).resolve().parents[3]


def _filled(path: Path, lengths: tuple[int, ...], features: FeatureSpec = FEATURES) -> EpisodeStore:
    store = EpisodeStore.create(path, features)
    for i, length in enumerate(lengths):
        store.append(make_pusht_episode(features, i, length))
    return store


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    lengths = (6, 1, 9)
    writer = _filled(tmp_path / "s.zarr", lengths)
    assert writer.episode_ends.tolist() == [6, 7, 16]
    store = EpisodeStore.open(tmp_path / "s.zarr")
    assert (len(store), store.n_frames, store.features) == (3, 16, FEATURES)
    assert store.keys == ("top", "action", "state", "block_pose", "coverage", "success")
    for i, (episode, length) in enumerate(zip(store, lengths, strict=True)):
        expected = make_pusht_episode(FEATURES, i, length)
        assert episode.checksum() == expected.checksum()
        assert episode.meta == expected.meta == store.meta(i)
        assert episode.extras["success"].dtype == np.bool_


def test_window_and_load_all_match_episodes(tiny_pusht_store: EpisodeStore) -> None:
    store = tiny_pusht_store
    assert [len(e) for e in store] == list(TINY_LENGTHS)
    ep = make_pusht_episode(FEATURES, 1, TINY_LENGTHS[1])
    win = store.window(1, 3, 8, keys=["top", "action"])
    assert set(win) == {"top", "action"}
    np.testing.assert_array_equal(win["top"], ep.frames["top"][3:8])
    np.testing.assert_array_equal(win["action"], ep.action[3:8])
    assert store.window(1, 4, 4)["state"].shape == (0, 2)
    arrays, ends = store.load_all(["top", "block_pose"])
    assert ends.tolist() == list(np.cumsum(TINY_LENGTHS))
    assert arrays["top"].shape == (sum(TINY_LENGTHS), 32, 32, 3)
    np.testing.assert_array_equal(arrays["block_pose"][ends[0]:ends[1]], ep.extras["block_pose"])
    np.testing.assert_array_equal(store.episode(-1).action, store.window(2, 0, 5)["action"])


def test_layout_is_diffusion_policy_replay_buffer(tiny_pusht_store: EpisodeStore) -> None:
    root = zarr.open_group(tiny_pusht_store.path, mode="r")
    assert root.metadata.zarr_format == 2
    assert root["meta/episode_ends"].dtype == np.int64
    np.testing.assert_array_equal(root["meta/episode_ends"][:], tiny_pusht_store.episode_ends)
    top = root["data/top"]
    assert (top.shape, top.dtype, top.chunks) == ((24, 32, 32, 3), np.uint8, (8, 32, 32, 3))
    assert root["data/action"].dtype == np.float32
    assert root.attrs["iws_store"]["features"]["cameras"][0]["name"] == "top"
    assert (Path(tiny_pusht_store.path) / "data" / "top" / ".zarray").is_file()


@pytest.mark.parametrize("mutate, message", [
    (lambda e: e.frames.update(side=e.frames.pop("top")), "cameras are ['side']"),
    (lambda e: e.frames.update(top=np.zeros((len(e), 16, 16, 3), np.uint8)), "(16, 16, 3), expected (32, 32, 3)"),
    (lambda e: setattr(e, "action", e.action.astype(np.float64)), "'action' has dtype float64"),
    (lambda e: setattr(e, "state", None), "state is missing"),
    (lambda e: e.extras.pop("coverage"), "extras are"),
    (lambda e: e.extras.update(success=e.extras["success"].astype(np.float32)), "'success' has dtype"),
    (lambda e: e.action.__setitem__((0, 0), np.nan), "NaN or inf"),
    (lambda e: setattr(e.meta, "fps", 30.0), "meta.fps=30.0"),
])
def test_append_rejects_mismatched_episode(tmp_path: Path, mutate, message: str) -> None:
    store = _filled(tmp_path / "s.zarr", (4,))
    episode = make_pusht_episode(FEATURES, 1, 5)
    mutate(episode)
    with pytest.raises(SpecError, match="does not fit the store's features") as info:
        store.append(episode)
    assert message in str(info.value)
    assert (len(store), store.n_frames) == (1, 4)
    assert len(EpisodeStore.open(store.path, "a")) == 1  # nothing torn was left behind


def test_user_errors_have_clear_messages(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.zarr", (3,))
    with pytest.raises(SpecError, match="already in the store"):
        store.append(make_pusht_episode(FEATURES, 0, 3))
    with pytest.raises(SpecError, match="already exists.*overwrite=True"):
        EpisodeStore.create(tmp_path / "s.zarr", FEATURES)
    assert len(EpisodeStore.create(tmp_path / "s.zarr", FEATURES, overwrite=True)) == 0
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("keep me")
    with pytest.raises(SpecError, match="non-empty directory"):
        EpisodeStore.create(tmp_path / "docs", FEATURES, overwrite=True)
    assert (tmp_path / "docs" / "notes.txt").exists()
    with pytest.raises(StoreNotFound, match="^no episode store at"):  # missing, not "damaged"
        EpisodeStore.open(tmp_path / "missing.zarr", "a")
    with pytest.raises(StoreNotFound, match="^no episode store at"):
        EpisodeStore.open(tmp_path / "missing.zarr", "r")
    assert not (tmp_path / "missing.zarr").exists()
    zarr.open_group(tmp_path / "plain.zarr", mode="w", zarr_format=2).create_array(
        "x", shape=(1,), dtype="int8")
    with pytest.raises(SpecError, match="not an iws episode store"):
        EpisodeStore.open(tmp_path / "plain.zarr")
    with pytest.raises(SpecError, match="mode='w' is not valid"):
        EpisodeStore.open(tmp_path / "s.zarr", "w")  # type: ignore[arg-type]
    reader = EpisodeStore.open(tmp_path / "s.zarr")
    with pytest.raises(SpecError, match="read-only"):
        reader.append(make_pusht_episode(FEATURES, 5, 3))
    with pytest.raises(SpecError, match="storage_options"):
        EpisodeStore.open(tmp_path / "s.zarr", storage_options={"anon": True})


def test_read_errors(tiny_pusht_store: EpisodeStore) -> None:
    with pytest.raises(IndexError, match="episode 3 is out of range; the store has 3"):
        tiny_pusht_store.episode(3)
    with pytest.raises(IndexError, match="does not fit episode 0 of length 7"):
        tiny_pusht_store.window(0, 2, 8)
    with pytest.raises(KeyError, match="unknown keys \\['rgb'\\]"):
        tiny_pusht_store.window(0, 0, 1, keys=["rgb"])


@pytest.mark.parametrize("damaged", [".zgroup", ".zattrs", "data/top/.zarray", "meta/episode_ends/0"])
def test_damaged_metadata_names_the_file(tmp_path: Path, damaged: str) -> None:
    _filled(tmp_path / "s.zarr", (3, 4))
    (tmp_path / "s.zarr" / damaged).write_bytes(b"{\x00 torn")  # a disk error, a half-copied file
    with pytest.raises(StoreDamaged) as error:
        EpisodeStore.open(tmp_path / "s.zarr")
    assert str(tmp_path / "s.zarr" / damaged) in str(error.value)
    assert "Restore the file from a copy" in str(error.value)


def test_damaged_chunk_names_the_file(tmp_path: Path) -> None:
    _filled(tmp_path / "s.zarr", (3, 4))
    chunk = tmp_path / "s.zarr" / "data" / "top" / "0.0.0.0"
    chunk.write_bytes(b"not blosc" * 8)
    store = EpisodeStore.open(tmp_path / "s.zarr")  # opening reads no image chunk
    for read in (store.load_all, lambda: store.episode(1), lambda: store.window(0, 0, 2, keys=["top"])):
        with pytest.raises(StoreDamaged, match="cannot be decoded") as error:
            read()
        assert str(chunk) in str(error.value)
    assert store.window(0, 0, 2, keys=["action"])["action"].shape == (2, 2)  # the rest still reads


def test_multi_camera_without_state(tmp_path: Path) -> None:
    features = FeatureSpec(cameras=(CameraSpec(name="front", height=8, width=12),
                                    CameraSpec(name="wrist", height=6, width=6)), action_dim=3)
    store = EpisodeStore.create(tmp_path / "m.zarr", features)
    rng = np.random.default_rng(0)
    frames = {"front": rng.integers(0, 255, (4, 8, 12, 3), np.uint8),
              "wrist": rng.integers(0, 255, (4, 6, 6, 3), np.uint8)}
    from schemas import EpisodeMeta
    from sim_model.data.episode import Episode
    episode = Episode(frames=frames, action=rng.normal(size=(4, 3)).astype(np.float32),
                      meta=EpisodeMeta(episode_id="a", length=4))
    store.append(episode)
    back = EpisodeStore.open(tmp_path / "m.zarr").episode(0)
    assert back.state is None and back.checksum() == episode.checksum()


def test_fsspec_url_store() -> None:
    url = f"memory://iws-test-{time.time_ns()}/store.zarr"
    _filled(url, (3, 2))  # type: ignore[arg-type]
    store = EpisodeStore.open(url)
    assert store.path == url and store.episode_ends.tolist() == [3, 5]
    assert store.episode(1).checksum() == make_pusht_episode(FEATURES, 1, 2).checksum()


def test_reader_follows_live_writer(tmp_path: Path) -> None:
    writer = _filled(tmp_path / "s.zarr", (3,))
    reader = EpisodeStore.open(tmp_path / "s.zarr")
    writer.append(make_pusht_episode(FEATURES, 1, 4))
    assert len(reader) == 1
    reader.refresh()
    assert len(reader) == 2 and reader.episode(1).checksum() == writer.episode(1).checksum()


def test_pickled_store_reopens_read_only(tiny_pusht_store: EpisodeStore) -> None:
    writer = EpisodeStore.open(tiny_pusht_store.path, "a")
    copy = copy_module.deepcopy(writer)  # the same __reduce__ path pickling takes
    assert copy.mode == "r" and len(copy) == 3
    np.testing.assert_array_equal(copy.window(2, 0, 5)["top"], writer.window(2, 0, 5)["top"])


class _Windows:
    """Map-style dataset of fixed-size windows, as a policy trainer would sample them."""

    def __init__(self, store: EpisodeStore, size: int) -> None:
        self.store, self.size = store, size

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        return self.store.window(i, 0, self.size, keys=["top", "action"])


def test_torch_dataloader_workers_read_concurrently(tiny_pusht_store: EpisodeStore) -> None:
    torch = pytest.importorskip("torch")
    tiny_pusht_store.load_all()  # the parent decodes first: forked workers inherit zarr/blosc state
    loader = torch.utils.data.DataLoader(_Windows(tiny_pusht_store, 5), batch_size=None,
                                         num_workers=2)
    batches = list(loader)
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        np.testing.assert_array_equal(batch["top"].numpy(), tiny_pusht_store.window(i, 0, 5)["top"])


def test_torn_tail_is_ignored_then_repaired(tmp_path: Path) -> None:
    path = tmp_path / "s.zarr"
    _filled(path, (4, 3))
    # What a writer killed inside an append leaves: longer data, a metadata entry, and
    # episode_ends resized with its new slot still holding the fill value 0.
    root = zarr.open_group(path, mode="r+")
    for key in ("top", "action", "state"):
        root[f"data/{key}"].resize((12, *root[f"data/{key}"].shape[1:]))
    root["meta/episode_meta"].resize((3,))
    root["meta/episode_ends"].resize((3,))
    (path / "data" / "top" / "0.0.0.0.deadbeef.partial").write_bytes(b"half")
    reader = EpisodeStore.open(path)
    assert reader.episode_ends.tolist() == [4, 7]
    store = EpisodeStore.open(path, "a")
    for key in store.keys:
        assert root[f"data/{key}"].shape[0] == 7
    assert root["meta/episode_ends"].shape == root["meta/episode_meta"].shape == (2,)
    assert not list(path.rglob("*.partial"))
    assert store.append(make_pusht_episode(FEATURES, 2, 5)) == 2
    assert EpisodeStore.open(path).episode_ends.tolist() == [4, 7, 12]


def _expected_checksum(index: int) -> str:
    return make_pusht_episode(FEATURES, index, episode_length(index)).checksum()


def _kill_writer_once(path: Path, delay: float) -> int:
    """Start a writer, SIGKILL it after `delay` s; return how many episodes it reported done."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.sim_model.data.store_writer", str(path)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    ready = proc.stdout.readline().split()
    assert ready[:1] == ["ready"], f"writer did not start: {ready}"
    time.sleep(delay)
    proc.kill()
    proc.wait(timeout=30)
    done = [int(line.split()[1]) for line in proc.stdout.read().splitlines() if line.startswith("done")]
    proc.stdout.close()
    return max(done) + 1 if done else int(ready[1])


def test_sigkilled_writer_leaves_consistent_store(tmp_path: Path) -> None:
    path = tmp_path / "s.zarr"
    EpisodeStore.create(path, FEATURES)
    rng, rounds, torn_rounds, checked = random.Random(0), 0, 0, 0
    while rounds < 5 or (torn_rounds < 2 and rounds < 15):
        reported = _kill_writer_once(path, rng.uniform(0.05, 0.6))
        rounds += 1
        reader = EpisodeStore.open(path)  # read-only: sees the store exactly as the kill left it
        assert reported <= len(reader) <= reported + 1  # +1: killed after commit, before report
        raw = zarr.open_group(path, mode="r")
        if raw["data/top"].shape[0] != reader.n_frames or raw["meta/episode_ends"].shape[0] != len(reader):
            torn_rounds += 1
        for i in range(checked, len(reader)):  # each episode once: later kills must not touch it
            assert reader.episode(i).checksum() == _expected_checksum(i), f"episode {i} differs"
        checked = len(reader)
    assert torn_rounds >= 1, "no kill landed inside an append; the test proved nothing"
    store = EpisodeStore.open(path, "a")
    raw = zarr.open_group(path, mode="r")
    for key in store.keys:
        assert raw[f"data/{key}"].shape[0] == store.n_frames == store.episode_ends[-1]
    assert raw["meta/episode_meta"].shape[0] == len(store)
    n = len(store)
    for i in (n, n + 1):
        store.append(make_pusht_episode(FEATURES, i, episode_length(i)))
    final = EpisodeStore.open(path)
    assert [e.checksum() for e in final] == [_expected_checksum(i) for i in range(n + 2)]


def test_a_missing_store_names_the_commands_that_make_one(tmp_path) -> None:
    """Issue 34: `--data` pointing at no store suggested EpisodeStore.create, the Python API."""
    for path in (tmp_path / "missing.zarr", tmp_path):
        with pytest.raises(SpecError) as info:
            EpisodeStore.open(path, "r")
        message = str(info.value)
        assert "`iws collect`" in message and "`iws import" in message and "EpisodeStore" not in message, message
    (tmp_path / "lerobot" / "meta").mkdir(parents=True)
    (tmp_path / "lerobot" / "meta" / "info.json").write_text("{}")
    with pytest.raises(SpecError, match=f"{tmp_path / 'lerobot'} is a LeRobot dataset.*`iws import {tmp_path / 'lerobot'} "):
        EpisodeStore.open(tmp_path / "lerobot", "r")
