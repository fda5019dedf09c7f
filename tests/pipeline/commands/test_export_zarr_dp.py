"""Diffusion-Policy Zarr export: layout, codecs, key names, and the way back in with iws import.

That zarr 2.x itself opens the result is shown by benchmarks/zarr2_dp_check.sh (needs a
throwaway venv with zarr 2.18 from the package registry, so it is not part of the suite).
Diffusion Policy's own code is not installable here (no package; it needs zarr 2 and numba), so
the default-names test reads the store the way its PushTImageDataset does, step by step.
"""

import json
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

from pipeline.cli import main
from pipeline.pusht.features import pusht_features
from schemas import CameraSpec, SpecError
from sim_model.data.formats import import_dataset, open_dataset
from sim_model.data.formats.zarr_dp_reader import DPZarrReader
from sim_model.data.formats.zarr_dp_writer import (
    dp_key_map,
    export_zarr_dp,
    parse_key_map,
    resolve_dp_keys,
)
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import TINY_LENGTHS, build_tiny_pusht_store, make_pusht_episode


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> EpisodeStore:
    return build_tiny_pusht_store(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="module")
def exported(source, tmp_path_factory):
    return export_zarr_dp(source, tmp_path_factory.mktemp("dp") / "pusht.zarr",
                          keys={"top": "img", "state": "agent_pos"})


def test_layout_is_what_diffusion_policy_reads(source, exported):
    assert (exported / ".zgroup").is_file() and (exported / "data/img/.zarray").is_file()
    root = zarr.open_group(str(exported), mode="r")
    assert root.metadata.zarr_format == 2
    assert sorted(root["data"].array_keys()) == sorted(
        ["img", "agent_pos", "action", "block_pose", "coverage", "success"])
    meta = json.loads((exported / "data/img/.zarray").read_text())
    assert meta["chunks"] == [1, 32, 32, 3] and meta["dtype"] == "|u1"
    assert meta["compressor"]["id"] == "blosc"  # standard numcodecs, decodable by zarr 2.12+
    assert json.loads((exported / "data/action/.zarray").read_text())["compressor"]["id"] == "blosc"
    ends = root["meta/episode_ends"][:]
    assert ends.dtype == np.int64 and ends.tolist() == np.cumsum(TINY_LENGTHS).tolist()
    arrays, _ = source.load_all()
    np.testing.assert_array_equal(root["data/img"][:], arrays["top"])
    np.testing.assert_array_equal(root["data/agent_pos"][:], arrays["state"])
    np.testing.assert_array_equal(root["data/action"][:], arrays["action"])
    np.testing.assert_array_equal(root["data/success"][:], arrays["success"])


def test_default_export_opens_with_diffusion_policys_pusht_defaults(source, tmp_path):
    """No --keys: the store reads as DP's PushTImageDataset reads it, keys=['img', 'state',
    'action'], agent_pos = state[..., :2], image = moveaxis(img, -1, 1) / 255."""
    dest = export_zarr_dp(source, tmp_path / "pusht.zarr")
    root = zarr.open_group(str(dest), mode="r")
    # ReplayBuffer.copy_from_path(zarr_path, keys=["img", "state", "action"]): meta and those keys.
    replay = {key: root[f"data/{key}"][:] for key in ("img", "state", "action")}
    ends = root["meta/episode_ends"][:]
    assert all(len(v) == ends[-1] for v in replay.values())  # ReplayBuffer's own check
    arrays, _ = source.load_all()
    start, stop = int(ends[0]), int(ends[1])  # episode 1, as SequenceSampler slices it
    agent_pos = replay["state"][start:stop, :2].astype(np.float32)
    image = np.moveaxis(replay["img"][start:stop], -1, 1) / 255
    assert image.shape == (stop - start, 3, 32, 32)
    np.testing.assert_array_equal(agent_pos, arrays["state"][start:stop])
    np.testing.assert_array_equal(replay["action"][start:stop], arrays["action"][start:stop])
    np.testing.assert_array_equal(image, np.moveaxis(arrays["top"][start:stop], -1, 1) / 255)
    assert root.attrs["iws_export"]["keys"]["top"] == "img"
    assert open_dataset(dest).features == source.features  # and iws reads it back as `top`


def test_default_names_and_overrides():
    one = pusht_features(32)
    assert resolve_dp_keys(one) == {"top": "img", "state": "state", "action": "action",
                                    "block_pose": "block_pose", "coverage": "coverage",
                                    "success": "success"}
    assert resolve_dp_keys(one, {"top": "image"})["top"] == "image"
    # A rename that takes `img` for another array leaves the camera its own name.
    assert resolve_dp_keys(one, {"state": "img"})["top"] == "top"
    two = one.model_copy(update={"cameras": (CameraSpec(name="top", height=32, width=32),
                                             CameraSpec(name="wrist", height=32, width=32))})
    assert resolve_dp_keys(two)["top"] == "top" and resolve_dp_keys(two)["wrist"] == "wrist"


def test_several_cameras_keep_their_names(tmp_path):
    features = pusht_features(32).model_copy(update={"cameras": (
        CameraSpec(name="top", height=32, width=32), CameraSpec(name="wrist", height=32, width=32))})
    store = EpisodeStore.create(tmp_path / "two.zarr", features)
    store.append(make_pusht_episode(features, 0, 4))
    root = zarr.open_group(str(export_zarr_dp(store, tmp_path / "dp.zarr")), mode="r")
    assert {"top", "wrist", "state", "action"} <= set(root["data"].array_keys())


def test_iws_reads_its_own_dp_export_back_unchanged(source, exported, tmp_path):
    reader = open_dataset(exported)
    assert isinstance(reader, DPZarrReader)
    assert reader.key_map["top"] == "img" and reader.features == source.features
    assert reader.meta(1) == source.meta(1)  # ids, task, seed restored from the attributes
    imported = EpisodeStore.open(import_dataset(exported, tmp_path / "back.zarr"), "r")
    for i in range(len(source)):
        assert imported.episode(i).checksum() == source.episode(i).checksum()


def _foreign_dp_store(path, rng):
    """A store as Diffusion Policy's own PushT tooling writes it (no iws attributes)."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    n, blosc = 10, numcodecs.Blosc(cname="lz4", clevel=5)
    root.create_array("data/img", data=rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8),
                      chunks=(1, 16, 16, 3), compressors=blosc)
    root.create_array("data/state", data=rng.normal(size=(n, 5)).astype(np.float32))
    root.create_array("data/action", data=rng.normal(size=(n, 2)).astype(np.float32))
    root.create_array("data/keypoint", data=rng.normal(size=(n, 9, 2)).astype(np.float32))
    root.create_array("data/n_contacts", data=rng.integers(0, 3, (n, 1)).astype(np.float32))
    root.create_array("meta/episode_ends", data=np.array([4, 10], dtype=np.int64))
    return root


def test_foreign_dp_store_imports_with_key_names(tmp_path):
    dp = _foreign_dp_store(tmp_path / "dp.zarr", np.random.default_rng(0))
    reader = open_dataset(tmp_path / "dp.zarr", keys={"top": "img"}, fps=10, task="push the T")
    spec = reader.features
    assert spec.camera_names == ("top",) and spec.state_dim == 5 and spec.action_dim == 2
    assert {e.name: e.shape for e in spec.extras} == {"keypoint": (9, 2), "n_contacts": (1,)}
    assert reader.meta(1).task == "push the T" and reader.meta(1).length == 6
    store = EpisodeStore.open(import_dataset(reader, tmp_path / "iws.zarr"), "r")
    arrays, ends = store.load_all()
    assert ends.tolist() == [4, 10]
    np.testing.assert_array_equal(arrays["top"], dp["data/img"][:])
    np.testing.assert_array_equal(arrays["action"], dp["data/action"][:])  # bit for bit
    np.testing.assert_array_equal(arrays["keypoint"], dp["data/keypoint"][:])


def test_key_map_errors():
    assert parse_key_map("top=img, state=state") == {"top": "img", "state": "state"}
    assert parse_key_map(None) == {}
    for bad in ("top", "top=", "=img", "top=a/b", "top=a,top=b"):
        with pytest.raises(SpecError, match="--keys"):
            parse_key_map(bad)
    with pytest.raises(SpecError, match="lacks"):
        dp_key_map(("top", "action"), {"wrist": "img"})
    with pytest.raises(SpecError, match="unique"):
        dp_key_map(("top", "action"), {"top": "action"})


def test_reader_errors(tmp_path):
    _foreign_dp_store(tmp_path / "dp.zarr", np.random.default_rng(1))
    with pytest.raises(SpecError, match="data has only"):
        DPZarrReader(tmp_path / "dp.zarr", keys={"top": "image"})
    root = zarr.open_group(str(tmp_path / "dp.zarr"), mode="r+")
    root["meta/episode_ends"][:] = np.array([4, 99])
    with pytest.raises(SpecError, match="strictly increasing"):
        DPZarrReader(tmp_path / "dp.zarr")
    zarr.open_group(str(tmp_path / "nolayout.zarr"), mode="w", zarr_format=2)
    with pytest.raises(SpecError, match="Diffusion-Policy"):
        DPZarrReader(tmp_path / "nolayout.zarr")


def test_cli_export_zarr_dp(source, exported, tmp_path, capsys):
    assert main(["export", "zarr-dp", source.path, str(exported)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["export", "zarr-dp", source.path, str(tmp_path / "o.zarr"), "--keys", "oops"]) == 2
    assert "iws_key=dp_key" in capsys.readouterr().err
    dest = tmp_path / "out.zarr"
    assert main(["export", "zarr-dp", source.path, str(dest), "--keys", "top=image"]) == 0
    assert zarr.open_group(str(dest), mode="r")["data/image"].shape == (24, 32, 32, 3)
    assert "image (from top), action, state" in capsys.readouterr().out


def test_cli_default_names_are_printed_and_out_is_accepted(source, tmp_path, capsys):
    assert main(["export", "zarr-dp", source.path, "--out", str(tmp_path / "dp.zarr")]) == 0
    out = capsys.readouterr().out
    assert "arrays under data/: img (from top), action, state" in out and "--keys" in out
    assert zarr.open_group(str(tmp_path / "dp.zarr"), mode="r")["data/img"].shape[0] == 24
    assert main(["export", "zarr-dp", source.path, str(tmp_path / "a.zarr"), "--out",
                 str(tmp_path / "b.zarr")]) == 2
    assert "different outputs" in capsys.readouterr().err
    assert main(["export", "zarr-dp", source.path]) == 2
    assert "no output given" in capsys.readouterr().err


def test_no_export_writes_into_or_over_its_source(tmp_path, capsys):
    """Issue 34: `iws export zarr-dp OUT/dataset OUT --overwrite` replaced the job's whole
    output with one DP store, exit 0."""
    out = tmp_path / "out"
    src = Path(build_tiny_pusht_store(out).path)  # OUT/store.zarr
    (out / "job.json").write_text("{}")
    before = sorted(out.rglob("*"))
    cases = {"contains": ["zarr-dp", str(src), str(out), "--overwrite"],
             "lies inside": ["lerobot", str(src), "--out", str(src / "lerobot"), "--overwrite"],
             "is": ["zarr-dp", str(src), str(out / "x" / ".." / "store.zarr"), "--overwrite"]}
    for how, argv in cases.items():
        assert main(["export", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert f"{how} the source {src}" in err and "Traceback" not in err, err
    assert sorted(out.rglob("*")) == before
    with pytest.raises(SpecError, match="contains the source"):  # s3:// by prefix, before any request
        export_zarr_dp("s3://bucket/out/dataset", "s3://bucket/out/", overwrite=True)
    with pytest.raises(SpecError, match="contains the source"):
        export_zarr_dp(str(src), out, overwrite=True)
    assert main(["export", "zarr-dp", str(src), str(out / "dp.zarr")]) == 0  # beside it: fine
