"""Bad checkpoints fail with a message naming the file and the fix; nothing is unpickled."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest

from schemas.errors import SpecError
from sim_model.world_model import WorldModel


@pytest.fixture()
def copy(tiny_checkpoint, tmp_path):
    target = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, target)
    return target


def test_missing_dir(tmp_path) -> None:
    with pytest.raises(SpecError, match=r"does not exist.*iws train"):
        WorldModel.load(tmp_path / "nope")


def test_missing_weights(copy) -> None:
    (copy / "model.safetensors").unlink()
    with pytest.raises(SpecError, match=r"model\.safetensors is missing"):
        WorldModel.load(copy)


def test_missing_config(copy) -> None:
    (copy / "config.json").unlink()
    with pytest.raises(SpecError, match=r"config\.json is missing"):
        WorldModel.load(copy)


def test_truncated_weights(copy) -> None:
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(SpecError, match=r"model\.safetensors cannot be read.*truncated"):
        WorldModel.load(copy)


def test_mismatched_config(copy) -> None:
    config = json.loads((copy / "config.json").read_text())
    config["model"]["dynamics"]["channels"] = [64, 64]
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecError, match=r"does not match the architecture.*shape mismatch"):
        WorldModel.load(copy)


def test_invalid_config_field(copy) -> None:
    config = json.loads((copy / "config.json").read_text())
    config["model"]["dynamics"]["context"] = 0
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecError, match=r"dynamics\.context"):
        WorldModel.load(copy)


class _Boom:
    def __reduce__(self):  # would run code if anything unpickled it
        return (exec, ("raise SystemExit('unpickled!')",))


@pytest.mark.parametrize("name", ["model.pt", "weights.pkl"])
def test_pickle_file_refused(tmp_path, name) -> None:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(SpecError, match="never unpickles"):
        WorldModel.load(path)


def test_pickle_disguised_as_safetensors(copy) -> None:
    (copy / "model.safetensors").write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(SpecError, match="never unpickles"):
        WorldModel.load(copy)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_of_every_protocol_disguised_as_safetensors(copy, protocol) -> None:
    (copy / "model.safetensors").write_bytes(pickle.dumps({"w": 1}, protocol=protocol))
    with pytest.raises(SpecError, match="never unpickles"):
        WorldModel.load(copy)


def test_safetensors_whose_header_length_starts_like_a_pickle_loads(copy) -> None:
    """The header length is the file's first 8 bytes: one in 256 checkpoints begins with 0x80, the
    pickle opcode (a two-camera sweep model did), and a 640-byte header begins 0x80 0x02."""
    from safetensors.torch import load_file, save_file

    weights = load_file(copy / "model.safetensors")
    for pad in range(600):
        save_file(weights, copy / "model.safetensors", metadata={"pad": "x" * pad})
        head = (copy / "model.safetensors").read_bytes()[:2]
        if head[0] == 0x80:
            break
    assert head[0] == 0x80
    assert WorldModel.load(copy).checkpoint_hash  # loads: not refused as a pickle


def test_dir_with_only_pickle(copy) -> None:
    (copy / "model.safetensors").unlink()
    (copy / "model.pt").write_bytes(pickle.dumps({"w": 1}))
    with pytest.raises(SpecError, match=r"model\.pt.*never unpickles"):
        WorldModel.load(copy)


def test_bundled_name_not_installed(tmp_path, monkeypatch) -> None:
    # The repository ships sim_model/bundled/pusht; an install without it must say so clearly.
    from sim_model import checkpoint

    monkeypatch.setattr(checkpoint, "BUNDLED_DIR", tmp_path)
    with pytest.raises(SpecError, match=r"no bundled checkpoint 'pusht' is installed \(bundled: none\)"):
        WorldModel.load("pusht")
    (tmp_path / "pusht").mkdir()  # its folder without the weights (a partial copy)
    (tmp_path / "pusht" / "config.json").write_text("{}")
    assert checkpoint.bundled_names() == ("pusht",)
    with pytest.raises(SpecError, match=r"bundled checkpoint 'pusht' is not installed"):
        WorldModel.load("pusht")


def test_the_bundled_names_are_the_bundled_folders() -> None:
    from sim_model import checkpoint

    folders = sorted(p.name for p in checkpoint.BUNDLED_DIR.iterdir() if (p / "model.safetensors").is_file())
    assert list(checkpoint.bundled_names()) == folders and "pusht" in folders


def test_load_from_weights_file_path(copy) -> None:
    assert WorldModel.load(copy / "model.safetensors").features.action_dim == 2
