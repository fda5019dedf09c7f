"""The `square` task: everything pipeline.tasks.base.Task asks, on tiny frames.

The world: a square at position p (x, y in pixels) on a 16x16 frame; action a moves it to
clip(a). State is p. The task is to bring the square to the right edge: an episode scores the
square's x in its last frame, as a fraction of the width, and succeeds past RIGHT.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from pipeline.tasks.base import CollectProgress, SideScore, StepProgress
from schemas import CameraSpec, EpisodeMeta, EpisodeSpec, FeatureSpec
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore
from workers.actions.base import ActionSource, Observation, check_actions
from workers.init_frames import load_init
from workers.scoring import PlausibilityCheck, Scorer

SIZE = 16
LOW, HIGH = 2.0, 13.0  # where the square's centre may go
RIGHT = 0.75  # success: the square's x past this fraction of the width
COLOUR = (230, 180, 40)


def render(pos: np.ndarray) -> np.ndarray:
    """(N, 2) positions -> (N, SIZE, SIZE, 3) uint8 frames."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    frames = np.full((len(pos), SIZE, SIZE, 3), 30, np.uint8)
    for frame, (x, y) in zip(frames, pos, strict=True):
        frame[(np.abs(xx - x) <= 1.5) & (np.abs(yy - y) <= 1.5)] = COLOUR
    return frames


def square_mask(frame: np.ndarray) -> np.ndarray:
    return frame.mean(axis=-1) > 100


def position(frame: np.ndarray) -> np.ndarray:
    """The square's centre (x, y) seen in one frame; the frame's centre when none is seen."""
    ys, xs = np.nonzero(square_mask(frame))
    return np.array([xs.mean(), ys.mean()]) if len(xs) else np.full(2, SIZE / 2)


def score(episode: Episode) -> tuple[float, bool]:
    """The task's scorer: the square's x in the last frame over the width; success past RIGHT."""
    x = float(position(episode.frames["top"][-1])[0]) / (SIZE - 1)
    return x, x > RIGHT


def plausibility(episode: Episode) -> dict[str, float]:
    """The task's plausibility check: the square keeps its size (pixels, against the start's)."""
    from pipeline.tasks.plausibility import conserved, probe_steps

    frames = episode.frames["top"]
    kept = conserved(np.array([square_mask(frames[t]).sum() for t in probe_steps(len(frames))]),
                     float(square_mask(frames[0]).sum()))
    return {"plausibility": float(kept.mean()), "size_min": float(kept.min())}


class SquareAnalyzer:
    name = "square"

    def object_mask(self, frame: np.ndarray) -> np.ndarray:
        return square_mask(frame)

    def shape_score(self, frame: np.ndarray) -> float:
        """Share of the square's bounding box that is square: 1.0 for a crisp one."""
        ys, xs = np.nonzero(square_mask(frame))
        if not len(xs):
            return 0.0
        return len(xs) / ((xs.max() - xs.min() + 1) * (ys.max() - ys.min() + 1))

    def probe(self, frame: np.ndarray) -> dict[str, float]:
        return {"square_pixels": float(square_mask(frame).sum())}


class PushRight:
    """The task's demonstrator: two pixels to the right every step."""

    def __init__(self, features: FeatureSpec) -> None:
        self.features = features

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        pos = (observation.state if observation.state is not None
               else np.stack([position(f[0]) for f in observation.frames]))
        return np.clip(pos + [2.0, 0.0], LOW, HIGH).astype(np.float32)


class Square:
    """Move the square to the right edge."""

    name = "square"
    summary = "a square that jumps to each action, on 16x16 frames (tests only)"
    scorer_name = "square_right"
    demonstrator = "tests.tasks.square.task:PushRight"
    bundled_model = None

    def features(self) -> FeatureSpec:
        return FeatureSpec(cameras=(CameraSpec(name="top", height=SIZE, width=SIZE),), action_dim=2,
                           state_dim=2, action_low=(LOW, LOW), action_high=(HIGH, HIGH))

    def add_collect_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.description = "Random walks of the square."
        parser.add_argument("--jitter", type=float, default=1.5, help="walk step in pixels")

    def collect(self, args: argparse.Namespace, out: str, progress: CollectProgress) -> str:
        store = (EpisodeStore.open(out, "a") if args.resume
                 else EpisodeStore.create(out, self.features(), overwrite=args.overwrite))
        progress(len(store), args.episodes)
        for index in range(len(store), args.episodes):
            rng = np.random.default_rng((args.seed, index))
            pos = np.empty((args.steps, 2), np.float32)
            pos[0] = rng.uniform(LOW, HIGH, 2)
            noise = rng.normal(0, args.jitter, pos.shape)
            action = np.empty_like(pos)
            for t in range(args.steps):  # each action jumps the square: the next position
                action[t] = np.clip(pos[t] + noise[t], LOW, HIGH)
                if t + 1 < args.steps:
                    pos[t + 1] = action[t]
            meta = EpisodeMeta(episode_id=f"square-{index:04d}", length=args.steps, source="square:walk")
            store.append(Episode(frames={"top": render(pos)}, action=action, meta=meta, state=pos))
            progress(len(store), args.episodes)
        return f"{out}: {len(store)} square episodes"

    def scorer(self) -> Scorer:
        return score

    def object_analyzer(self) -> SquareAnalyzer:
        return SquareAnalyzer()

    def plausibility(self) -> PlausibilityCheck:
        return plausibility

    def roll_ground_truth(self, policy: ActionSource, specs: Sequence[EpisodeSpec],
                          features: FeatureSpec, horizon: int, batch_size: int, videos: int,
                          progress: StepProgress | None = None,
                          ) -> tuple[list[SideScore], list[np.ndarray]]:
        """The square world itself, from each spec's initial frame, all rows in lockstep."""
        frames0, _ = load_init([s.init_ref for s in specs], features)  # (N, 1, H, W, 3)
        pos = np.stack([position(f[0]) for f in frames0]).astype(np.float32)
        frames = np.empty((len(specs), horizon + 1, SIZE, SIZE, 3), np.uint8)
        frames[:, 0] = render(pos)
        policy.reset(specs, Observation(frames[:, :1], pos))
        for t in range(horizon):
            pos = np.clip(check_actions(policy.actions(t, Observation(frames[:, t:t + 1], pos)),
                                        len(specs), 2, "policy"), LOW, HIGH)
            frames[:, t + 1] = render(pos)
            if progress is not None:
                progress(len(specs))
        scores = [score(Episode(frames={"top": f}, action=np.zeros((len(f), 2), np.float32),
                                meta=EpisodeMeta(episode_id=s.episode_id, length=len(f))))
                  for s, f in zip(specs, frames, strict=True)]
        return ([SideScore(score=x, success=ok, final=x) for x, ok in scores],
                [frames[i] for i, s in enumerate(specs) if s.index < videos])
