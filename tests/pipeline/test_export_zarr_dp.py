"""Diffusion-Policy Zarr export: layout, codecs, key names, and the way back in with iws import.

That zarr 2.x itself opens the result is shown by benchmarks/zarr2_dp_check.sh (needs a
throwaway venv with zarr 2.18 from the package registry, so it is not part of the suite).
"""

import json

import numcodecs
import numpy as np
import pytest
import zarr

from pipeline.cli import main
from pipeline.export.zarr_dp import dp_key_map, export_zarr_dp, parse_key_map
from pipeline.imports import import_dataset, open_dataset
from pipeline.imports.zarr_dp import DPZarrReader
from schemas import SpecError
from sim_model.data.store import EpisodeStore
from tests.fixtures.store import TINY_LENGTHS, build_tiny_pusht_store


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
    assert main(["export", "zarr-dp", source.path, str(dest), "--keys", "top=img"]) == 0
    assert zarr.open_group(str(dest), mode="r")["data/img"].shape == (24, 32, 32, 3)
