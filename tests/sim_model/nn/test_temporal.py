"""The temporal layers' places in the context cache are their order in the U-Net pass, fixed when
the net is built (no counter carried through the pass)."""

from __future__ import annotations

import torch

from sim_model.config import DynamicsConfig
from sim_model.nn.dynamics import DynamicsNet
from sim_model.nn.temporal import TemporalAttention


def test_each_temporal_layer_writes_and_reads_its_own_cache_entry_in_pass_order() -> None:
    torch.manual_seed(0)
    net = DynamicsNet(DynamicsConfig(channels=(8, 16), blocks=2, heads=2, cond_dim=16, context=3),
                      action_dim=2, views=1, latent_channels=4, height=8, width=8).eval()
    layers = [m for m in net.modules() if isinstance(m, TemporalAttention)]
    assert [m.index for m in layers] == list(range(len(layers))) == list(range(6))  # 2 levels + mid, 2 blocks
    called: list[int] = []
    hooks = [m.register_forward_pre_hook(lambda m, args: called.append(m.index)) for m in layers]
    z, actions = torch.randn(1, 3, 1, 4, 8, 8), torch.randn(1, 3, 2)
    with torch.no_grad():
        context = net.encode_context(z, actions, torch.zeros(1, 3))
        assert called == list(range(6)) and len(context) == 6
        # Each entry is its own layer's: layer 0 sees the stem's width, the mid layers the bottom's.
        assert [kv[0].shape[-1] * kv[0].shape[-2] for kv in context] == [8, 8, 16, 16, 16, 16]
        called.clear()
        offsets = torch.tensor([[3, 2, 1]])
        out = net.predict(torch.randn(1, 1, 1, 4, 8, 8), torch.ones(1, 1), z[:, -1:], actions[:, -1:],
                          context, offsets)
    assert called == list(range(6)) and out.shape == (1, 1, 1, 4, 8, 8)
    for hook in hooks:
        hook.remove()
