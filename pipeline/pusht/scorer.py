"""PushT task score from pixels alone: how much of the goal region the T covers.

The T's pose is estimated from each frame (pipeline.pusht.vision), the T polygon is placed at
that pose and intersected with the goal polygon exactly as gym-pusht 0.1.8's `_get_coverage`
does (shapely MultiPolygon of the two rectangles of `add_tee`, goal body at (256, 256, pi/4)):
coverage = area(goal & T) / area(goal). Success is coverage > 0.95 (gym-pusht's
`success_threshold`). Nothing here imports gym-pusht, so frames from a world model score the
same way as frames from the simulator.

An episode's score is its best coverage over the frames and it succeeds when any frame is past
the threshold: gym-pusht ends an episode at its first success, which is what LeRobot's
evaluation counts.

A frame earns coverage only when it shows a rigid T: the fitted T must match the frame's T
pixels with IoU >= MIN_SHAPE (the rigid-shape score; real gym-pusht frames score 0.92-0.99).
Generated frames where the T has melted or smeared over the goal would otherwise be fitted a
T there and be credited with coverage the physics never produced.

Two looser scorers, for in-model evaluation where the model bends the T (`iws eval ranking
--also-score`): `loose_shape_score` (the same fit, a frame counts from shape score LOOSE_SHAPE)
and `pixel_coverage_score` (no fit at all: the share of the goal's pixels that are T-coloured,
in frames whose T-coloured area is within PIXEL_AREA_RANGE of a T's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely
import shapely.geometry as sg

from pipeline.pusht.tee_fit import T_AREA, pixel_centres
from pipeline.pusht.vision import BLOCK, PushTAnalyzer, class_fractions, fit_block
from pipeline.tasks.plausibility import first_camera, probe_steps
from sim_model.data.episode import Episode
from workers.scoring import TaskScore

GOAL_POSE = np.array([256.0, 256.0, np.pi / 4])  # gym-pusht's goal_pose: x, y, angle
SUCCESS_THRESHOLD = 0.95  # gym-pusht: is_success = coverage > 0.95
# Least rigid-shape score of a frame's T for its coverage to count. Over 500 held-out gym-pusht
# frames at 96 x 96 the score was 0.918 at its lowest and 0.973 at the median.
MIN_SHAPE = 0.85
LOOSE_SHAPE = 0.6  # loose_shape_score's gate: a bent T still counts
PIXEL_AREA_RANGE = (0.5, 1.5)  # pixel_coverage_score: T-coloured area, in T areas, of a counted frame
# add_tee(scale=30, length=4): the crossbar's and the stem's vertices, in gym-pusht's order.
_TEE_POLYS = (
    np.array([(-60.0, 30.0), (60.0, 30.0), (60.0, 0.0), (-60.0, 0.0)]),
    np.array([(-15.0, 30.0), (-15.0, 120.0), (15.0, 120.0), (15.0, 30.0)]),
)


def tee_geometry(pose: np.ndarray) -> sg.MultiPolygon:
    """The T at pose (x, y, angle) as gym-pusht's pymunk_to_shapely builds it (body origin at
    (x, y), local vertex v at (x, y) + R(angle) v)."""
    c, s = np.cos(pose[2]), np.sin(pose[2])
    rot = np.array([[c, -s], [s, c]])
    polys = []
    for local in _TEE_POLYS:
        verts = local @ rot.T + np.asarray(pose[:2], dtype=np.float64)
        polys.append(sg.Polygon([*map(tuple, verts), tuple(verts[0])]))
    return sg.MultiPolygon(polys)


_GOAL = tee_geometry(GOAL_POSE)


def coverage_of_pose(pose: np.ndarray | None) -> float:
    """Fraction of the goal region a T at `pose` covers, in [0, 1]; 0.0 for no T (None)."""
    if pose is None:
        return 0.0
    return float(_GOAL.intersection(tee_geometry(pose)).area / _GOAL.area)


def frame_coverage(frame: np.ndarray, min_shape: float = MIN_SHAPE) -> float:
    """Coverage of the goal by the T seen in one RGB frame (H, W, 3); 0.0 when no rigid T is
    found (no T pixels, or a T shape score under `min_shape`)."""
    fit = fit_block(frame)
    return 0.0 if fit is None or fit.iou < min_shape else coverage_of_pose(fit.pose)


_GOAL_PIXELS: dict[tuple[int, int], np.ndarray] = {}


def goal_pixels(h: int, w: int) -> np.ndarray:
    """(H, W) bool: the pixels of an H x W frame whose centre lies in the goal region."""
    if (h, w) not in _GOAL_PIXELS:
        x, y = pixel_centres(h, w)
        _GOAL_PIXELS[(h, w)] = shapely.contains_xy(_GOAL, x, y)
    return _GOAL_PIXELS[(h, w)]


def pixel_coverage(frame: np.ndarray) -> float:
    """Share of the goal's pixels that are T-coloured (soft: each pixel's T fraction), with no
    fit of the T's shape; 0.0 when the frame's T-coloured area is outside PIXEL_AREA_RANGE of a
    T's (no T, or one smeared over the table)."""
    block = class_fractions(frame)[..., BLOCK]
    h, w = block.shape
    area = block.sum() * (512.0 / w) * (512.0 / h) / T_AREA
    if not PIXEL_AREA_RANGE[0] <= area <= PIXEL_AREA_RANGE[1]:
        return 0.0
    goal = goal_pixels(h, w)
    return float(block[goal].sum() / goal.sum())


@dataclass(frozen=True)
class CoverageTrace:
    """Per-frame coverage of one episode and what it adds up to."""

    steps: np.ndarray  # (K,) int, the frames that were scored
    coverage: np.ndarray  # (K,) float64 in [0, 1]

    @property
    def best(self) -> float:
        return float(self.coverage.max())

    @property
    def final(self) -> float:
        return float(self.coverage[-1])

    @property
    def success(self) -> bool:
        return self.best > SUCCESS_THRESHOLD

    @property
    def first_success(self) -> int | None:
        """First scored frame past the threshold, or None."""
        hits = np.flatnonzero(self.coverage > SUCCESS_THRESHOLD)
        return int(self.steps[hits[0]]) if hits.size else None


def coverage_trace(frames: np.ndarray, stride: int = 1,
                   coverage: Callable[[np.ndarray], float] = frame_coverage) -> CoverageTrace:
    """`coverage` of frames (T, H, W, 3) uint8: every `stride`-th frame and always the last one
    (a T fit costs ~30 ms at 96 x 96, so a stride trades a coarser trace for speed)."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise ValueError(f"expected frames (T, H, W, 3) with T >= 1, got shape {frames.shape}")
    if stride < 1:
        raise ValueError(f"stride must be at least 1, got {stride}")
    steps = np.unique(np.append(np.arange(0, len(frames), stride), len(frames) - 1))
    return CoverageTrace(steps=steps, coverage=np.array([coverage(frames[i]) for i in steps]))


def episode_frames(episode: Episode) -> np.ndarray:
    """The frames to score: camera 'top', or the only camera."""
    if "top" in episode.frames:
        return episode.frames["top"]
    if len(episode.frames) == 1:
        return next(iter(episode.frames.values()))
    raise ValueError(f"the PushT scorer reads camera 'top' (or a single camera); the episode has "
                     f"{sorted(episode.frames)}")


def score_episode(episode: Episode) -> TaskScore:
    """The `pusht_coverage` scorer: best goal coverage over the episode's frames, success when
    it passes 0.95 - estimated from the pixels alone, every frame."""
    trace = coverage_trace(episode_frames(episode))
    return TaskScore(trace.best, trace.success)


def loose_shape_score(episode: Episode) -> TaskScore:
    """As `score_episode`, a frame's coverage counting from a T shape score of LOOSE_SHAPE."""
    trace = coverage_trace(episode_frames(episode), coverage=lambda f: frame_coverage(f, LOOSE_SHAPE))
    return TaskScore(trace.best, trace.success)


def pixel_coverage_score(episode: Episode) -> TaskScore:
    """Best `pixel_coverage` over the episode's frames; success past SUCCESS_THRESHOLD."""
    trace = coverage_trace(episode_frames(episode), coverage=pixel_coverage)
    return TaskScore(trace.best, trace.success)


def plausibility(episode: Episode) -> dict[str, float]:
    """PushT's plausibility check (pipeline/tasks/plausibility.py): at each probed frame, the
    T's rigid-shape score when both the T and the agent are in view, else 0; 'plausibility' is
    the worst of them. Also 'rigid_shape' (the mean) and 'visible' (share of probes showing
    both). Real gym-pusht frames score 0.92-0.99 a frame."""
    frames, analyzer = first_camera(episode), PushTAnalyzer()
    probes = [analyzer.probe(frames[t]) for t in probe_steps(len(frames))]
    shape = np.array([p["rigid_shape"] for p in probes])
    visible = np.array([p["agent_visible"] > 0 and p["block_pixels"] > 0 for p in probes], dtype=np.float64)
    return {"plausibility": float(np.min(shape * visible)), "rigid_shape": float(shape.mean()),
            "visible": float(visible.mean())}
