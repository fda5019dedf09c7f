"""experiments.average_checkpoints: the soup is the (weighted) mean of its parts and loads like
any checkpoint; checkpoints of different models are refused."""

from __future__ import annotations

import pytest
import torch

from experiments.average_checkpoints import average
from schemas.errors import SpecError
from sim_model import checkpoint as ckpt
from sim_model.world_model import WorldModel


def test_a_soup_is_the_weighted_mean_and_loads(tiny_features, tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    WorldModel.random(tiny_features, preset="tiny", seed=0).save(a)
    WorldModel.random(tiny_features, preset="tiny", seed=1).save(b)
    config, soup = average([a, b], [1.0, 3.0])
    wa, wb = ckpt.read_weights(a), ckpt.read_weights(b)
    floats = [k for k in wa if wa[k].is_floating_point() and not torch.equal(wa[k], wb[k])]
    assert floats
    for key in floats:
        torch.testing.assert_close(soup[key], 0.25 * wa[key] + 0.75 * wb[key])
    ckpt.write_checkpoint(tmp_path / "soup", config, soup)
    model = WorldModel.load(tmp_path / "soup")
    assert "soup of" in (model.config.provenance.data or "")


def test_other_models_are_refused(tiny_features, tmp_path) -> None:
    WorldModel.random(tiny_features, preset="tiny", seed=0).save(tmp_path / "tiny")
    WorldModel.random(tiny_features, preset="small", seed=0).save(tmp_path / "small")
    with pytest.raises(SpecError, match="another architecture"):
        average([tmp_path / "tiny", tmp_path / "small"])
    with pytest.raises(SpecError, match="at least two"):
        average([tmp_path / "tiny"])
