"""Wire format between the sim loop and the page, and the rate meters behind the FPS readout.

Server -> page, binary WebSocket message per sim step (one encode, shared by every client):

    uint32 little-endian n | n bytes UTF-8 JSON header | image bytes, back to back

The header holds `seq`, `step`, `action`, `state`, `recording` and `images`:
[{"camera", "mime", "size"}], the sizes telling where each image ends. Images are JPEG (or
WebP), a few KB each at 96x96, against ~37 KB for base64 PNG.

Page -> server, JSON text messages: {"type": "ack", "seq"} once a frame is drawn,
{"type": "input", "keys": [KeyboardEvent.code...], "axes": [gamepad axes]},
{"type": "record", "action": "start" | "stop" | "discard", "task"?},
{"type": "reset", "episode": int | null, "frame": int}, {"type": "take_control"}.
Server -> page JSON text messages: hello, role, stats, saved, error, info (see server.py).
The socket is `/ws?token=<launch secret>&tab=<tab id>` (access.py checks the token and origin).
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
from collections import deque

import numpy as np
from PIL import Image

from pipeline.teleop.access import display_name
from schemas import FeatureSpec

MIME = {"jpeg": "image/jpeg", "webp": "image/webp"}


def encode_image(frame: np.ndarray, codec: str = "jpeg", quality: int = 90) -> bytes:
    """(H, W, 3) uint8 -> compressed bytes."""
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format=codec.upper(), quality=quality)
    return buffer.getvalue()


def hello_message(features: FeatureSpec, legend: dict, *, tick_fps: float, model: str,
                  init_path: str, init_episodes: int, task: str = "", max_steps: int | None = None,
                  record_to: str | None = None) -> dict:
    """What every tab is told on connect (the server adds its role, tab id and live status).

    Files are named, never located: a tab learns `demos.zarr`, not where it lies on this machine.
    """
    return {
        "features": {"cameras": [c.model_dump() for c in features.cameras],
                     "action_dim": features.action_dim,
                     "action_names": list(features.action_names or []),
                     "action_low": features.action_low, "action_high": features.action_high,
                     "fps": features.fps},
        "tick_fps": tick_fps, "mapping": legend, "model": display_name(model),
        "init": {"name": display_name(init_path), "episodes": init_episodes}, "task": task,
        "max_steps": max_steps, "record_to": display_name(record_to),
    }


def pack_frame(header: dict, images: list[tuple[str, bytes]], codec: str = "jpeg") -> bytes:
    """One binary message: length-prefixed JSON header, then the images in order."""
    header = {**header, "images": [{"camera": name, "mime": MIME[codec], "size": len(data)}
                                   for name, data in images]}
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([struct.pack("<I", len(head)), head, *(data for _, data in images)])


def unpack_frame(message: bytes) -> tuple[dict, dict[str, bytes]]:
    """Inverse of pack_frame (the page does the same in JS; tests and tools use this)."""
    (n,) = struct.unpack_from("<I", message)
    header = json.loads(message[4:4 + n])
    images, offset = {}, 4 + n
    for item in header["images"]:
        images[item["camera"]] = message[offset:offset + item["size"]]
        offset += item["size"]
    return header, images


class RateMeter:
    """Events per second over a sliding window (e.g. sim steps, acknowledged frames)."""

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque()

    def add(self, now: float) -> None:
        self._times.append(now)
        self._trim(now)

    def rate(self, now: float) -> float:
        self._trim(now)
        if len(self._times) < 2:
            return 0.0
        span = max(now - self._times[0], self._times[-1] - self._times[0])
        return (len(self._times) - 1) / span if span > 0 else 0.0

    def _trim(self, now: float) -> None:
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()


# The deepest a tab's message nests is 2 ({"keys": [...]}); json.loads recurses once per level
# and raises RecursionError a thousand deep, which a 64 KiB message reaches easily.
MAX_NESTING = 8
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def parse_message(text: str) -> dict | None:
    """A tab's JSON text message as an object with a "type", or None when it is not one (not
    JSON, not an object, or nested deeper than MAX_NESTING)."""
    depth = 0
    for char in _STRING.sub("", text):  # brackets inside strings do not nest
        depth += (char in "[{") - (char in "]}")
        if depth > MAX_NESTING:
            return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "type" in data else None


def is_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def clean_input(data: dict) -> dict:
    """Keys: up to 32 strings; axes: up to 16 finite numbers clipped to [-1, 1]."""
    raw_keys = data.get("keys")
    keys = [k for k in raw_keys if isinstance(k, str)][:32] if isinstance(raw_keys, list) else []
    raw = data.get("axes")
    raw = raw if isinstance(raw, list) else []
    axes = [max(-1.0, min(1.0, float(a))) if isinstance(a, int | float) and math.isfinite(a) else 0.0
            for a in raw[:16]]
    return {"keys": keys, "axes": axes}
