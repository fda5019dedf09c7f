"""Wire format, input sanitising and rate meters."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from pipeline.teleop.protocol import (
    RateMeter,
    clean_input,
    encode_image,
    is_index,
    pack_frame,
    unpack_frame,
)


def test_frames_round_trip_as_compressed_images() -> None:
    rng = np.random.default_rng(0)
    top = np.full((96, 96, 3), 240, np.uint8)
    top[30:60, 20:70] = (119, 136, 153)
    wrist = rng.integers(0, 255, (32, 48, 3), dtype=np.uint8)
    images = [("top", encode_image(top)), ("wrist", encode_image(wrist, "webp", 80))]
    message = pack_frame({"seq": 7, "action": [1.5, 2.0]}, images, "jpeg")
    header, decoded = unpack_frame(message)
    assert header["seq"] == 7 and header["action"] == [1.5, 2.0]
    assert [i["camera"] for i in header["images"]] == ["top", "wrist"]
    assert decoded["wrist"] == images[1][1]
    back = np.asarray(Image.open(io.BytesIO(decoded["top"])).convert("RGB"))
    assert back.shape == top.shape and np.abs(back.astype(int) - top).mean() < 2
    assert len(decoded["top"]) < 96 * 96 * 3 // 10  # far smaller than the raw frame


def test_client_input_is_sanitised() -> None:
    data = {"keys": ["ArrowUp", 3, None, *[f"K{i}" for i in range(40)]],
            "axes": [2, float("nan"), "x", -0.5, float("inf")]}
    clean = clean_input(data)
    assert clean["keys"][0] == "ArrowUp" and len(clean["keys"]) == 32
    assert clean["axes"] == [1.0, 0.0, 0.0, -0.5, 0.0]
    assert clean_input({"keys": "ArrowUp", "axes": None}) == {"keys": [], "axes": []}
    assert is_index(0) and not is_index(-1) and not is_index(True) and not is_index("2")


def test_rate_meter_counts_events_in_its_window() -> None:
    meter = RateMeter(window_s=2.0)
    for i in range(21):
        meter.add(10.0 + i * 0.1)  # 10 per second for 2 s
    assert abs(meter.rate(12.0) - 10.0) < 0.6
    assert meter.rate(20.0) == 0.0  # nothing recent
