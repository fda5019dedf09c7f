"""The few-step flow sampler shared by the dynamics head and the decoder."""

from __future__ import annotations

import pytest
import torch

from sim_model.nn import sampler


def test_each_pass_renoises_the_last_estimate_to_the_next_lower_level() -> None:
    seen: list[tuple[float, torch.Tensor]] = []
    draws = iter([torch.full((2, 3), 1.0), torch.full((2, 3), 2.0), torch.full((2, 3), 3.0)])

    def denoise(x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        assert t.shape == (2,)
        seen.append((float(t[0]), x_t.clone()))
        return x_t * 0.5  # "clean" estimate

    x0 = sampler.sample(denoise, lambda: next(draws), (2,), 3, torch.device("cpu"))
    levels = [level for level, _ in seen]
    assert levels == pytest.approx([1.0, 2 / 3, 1 / 3])
    assert torch.equal(seen[0][1], torch.full((2, 3), 1.0))  # the first pass sees pure noise
    # The second: the first estimate (0.5) re-noised with the second draw (2.0) to level 2/3.
    torch.testing.assert_close(seen[1][1], torch.full((2, 3), (1 / 3) * 0.5 + (2 / 3) * 2.0))
    torch.testing.assert_close(x0, seen[2][1] * 0.5)


def test_one_step_is_a_single_prediction_from_noise_and_zero_steps_are_refused() -> None:
    noise = torch.randn(4, 2)
    x0 = sampler.sample(lambda x_t, t: x_t + t[:, None], lambda: noise, (4,), 1, torch.device("cpu"))
    torch.testing.assert_close(x0, noise + 1.0)
    with pytest.raises(ValueError, match="at least one step"):
        sampler.sample(lambda x_t, t: x_t, lambda: noise, (4,), 0, torch.device("cpu"))
