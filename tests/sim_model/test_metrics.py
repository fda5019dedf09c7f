"""PSNR and SSIM against closed forms and a direct, loop-by-loop SSIM."""

import numpy as np
import pytest

from sim_model.metrics import PSNR_MAX_DB, psnr, ssim


def _images(seed: int, shape=(2, 20, 24, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def test_psnr_matches_its_definition():
    a = np.full((16, 16, 3), 100, np.uint8)
    b = a.copy()
    b[0, 0, 0] = 110  # one channel of one pixel off by 10
    mse = 100 / (16 * 16 * 3)
    assert psnr(a, b) == pytest.approx(10 * np.log10(255**2 / mse))
    assert psnr(a, a) == PSNR_MAX_DB  # identical: capped, not inf


def test_psnr_is_batched_over_leading_axes():
    a, b = _images(0, (3, 2, 8, 8, 3)), _images(1, (3, 2, 8, 8, 3))
    out = psnr(a, b)
    assert out.shape == (3, 2)
    assert out[1, 0] == pytest.approx(psnr(a[1, 0], b[1, 0]))


def _ssim_direct(x: np.ndarray, y: np.ndarray, size: int, sigma: float = 1.5) -> float:
    """Textbook SSIM: Gaussian-weighted local statistics at every valid window position."""
    coords = np.arange(size) - (size - 1) / 2
    g = np.exp(-(coords**2) / (2 * sigma**2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    x, y = x.astype(np.float64), y.astype(np.float64)
    values = []
    for ch in range(3):
        for i in range(x.shape[0] - size + 1):
            for j in range(x.shape[1] - size + 1):
                px, py = x[i:i + size, j:j + size, ch], y[i:i + size, j:j + size, ch]
                mx, my = (w * px).sum(), (w * py).sum()
                vx, vy = (w * (px - mx) ** 2).sum(), (w * (py - my) ** 2).sum()
                cxy = (w * (px - mx) * (py - my)).sum()
                values.append((2 * mx * my + c1) * (2 * cxy + c2) / ((mx**2 + my**2 + c1) * (vx + vy + c2)))
    return float(np.mean(values))


def test_ssim_matches_direct_computation():
    a = _images(2, (14, 15, 3))
    b = np.clip(a.astype(int) + np.random.default_rng(3).integers(-40, 40, a.shape), 0, 255).astype(np.uint8)
    assert ssim(a, b) == pytest.approx(_ssim_direct(a, b, 11), abs=1e-9)


def test_ssim_shrinks_window_for_tiny_images():
    a, b = _images(4, (6, 7, 3)), _images(5, (6, 7, 3))
    assert ssim(a, b) == pytest.approx(_ssim_direct(a, b, 5), abs=1e-9)


def test_ssim_closed_forms_and_ordering():
    a = _images(6, (32, 32, 3))
    assert ssim(a, a) == pytest.approx(1.0)
    # Two flat images: variances vanish, SSIM is the luminance term (2 m n + C1) / (m^2 + n^2 + C1).
    m, n, c1 = 100.0, 150.0, (0.01 * 255) ** 2
    flat = ssim(np.full((16, 16, 3), m, np.uint8), np.full((16, 16, 3), n, np.uint8))
    assert flat == pytest.approx((2 * m * n + c1) / (m * m + n * n + c1))
    rng = np.random.default_rng(7)
    noisy = [np.clip(a + rng.normal(0, s, a.shape), 0, 255).astype(np.uint8) for s in (5, 20, 60)]
    scores = [float(ssim(a, x)) for x in noisy]
    assert scores[0] > scores[1] > scores[2]
    assert ssim(a, noisy[1]) == pytest.approx(ssim(noisy[1], a))  # symmetric


def test_metrics_reject_mismatched_or_non_rgb_input():
    with pytest.raises(ValueError, match="differ in shape"):
        psnr(np.zeros((8, 8, 3), np.uint8), np.zeros((8, 9, 3), np.uint8))
    with pytest.raises(ValueError, match=r"\(\.\.\., H, W, 3\)"):
        ssim(np.zeros((8, 8), np.uint8), np.zeros((8, 8), np.uint8))
