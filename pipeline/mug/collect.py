"""Collect ground-truth mug play (scripted primitives, pipeline.mug.primitives) into an
EpisodeStore, every camera in each step.

Alignment as in the other tasks (LeRobot / Diffusion Policy convention): step t holds the
frames t, the observation before action t; state t (gripper), mug_pose t and held t describe
that observation; action t, the target then sent, yields observation t+1.

Determinism: episode `index` draws its start and every choice of its play from
SeedSequence(seed, index) and starts from a fresh reset, so any number of worker processes gives
byte-identical stores; each process keeps one simulator (its offscreen context) for all its
episodes; the parent appends in index order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pipeline.mug.env import CAMERAS, MugSim, State, draw_start
from pipeline.mug.features import mug_features
from pipeline.mug.primitives import PRIMITIVES
from pipeline.tasks import collecting
from schemas import EpisodeMeta
from sim_model.data.episode import Episode

TASK = "Pick up the mug and hold it"
DEFAULT_MIX = {"grasp": 0.3, "weak": 0.2, "offcentre": 0.2, "nudge": 0.2, "roam": 0.1}


def parse_mix(text: str) -> dict[str, float]:
    """'grasp=0.5,weak=0.2' -> weights (unnormalised); SpecError names what is wrong."""
    return collecting.parse_mix(text, PRIMITIVES)


@dataclass(frozen=True)
class CollectConfig(collecting.PlayConfig):
    """What to collect; validated on construction (SpecError with the offending value)."""

    primitives: ClassVar[Mapping[str, object]] = PRIMITIVES
    min_resolution: ClassVar[int] = 16
    max_resolution: ClassVar[int] = 256
    why_max: ClassVar[str] = "the offscreen buffer is 256 pixels"

    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))


def open_sim(config: CollectConfig) -> MugSim:
    return MugSim(config.resolution)


def play(sim: MugSim, config: CollectConfig, index: int) -> Episode:
    """Episode `index`: a start drawn from (seed, index), then primitives until --steps."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, index]))
    names = sorted(name for name, weight in config.mix.items() if weight > 0)
    weights = np.array([config.mix[name] for name in names])
    state = sim.reset_to(draw_start(rng))
    states: list[State] = []
    frames: dict[str, list[np.ndarray]] = {name: [] for name in CAMERAS}
    held: list[bool] = []
    actions: list[np.ndarray] = []
    played: list[str] = []
    while len(actions) < config.steps:
        name = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        played.append(name)
        for target in PRIMITIVES[name](state, rng)[:config.steps - len(actions)]:
            states.append(state)
            held.append(sim.held())
            for camera, frame in sim.render().items():
                frames[camera].append(frame)
            actions.append(target)
            state = sim.step(target)
    meta = EpisodeMeta(
        episode_id=f"mug-s{config.seed}-{index:06d}", length=config.steps, task=TASK,
        source="mug:" + "+".join(dict.fromkeys(played)), fps=10.0,
        info={"index": index, "collect_seed": config.seed, "mix": config.mix_text(),
              "segments": len(played), "primitives": ",".join(played)},
    )
    return Episode(
        frames={camera: np.stack(stack) for camera, stack in frames.items()},
        action=np.stack(actions).astype(np.float32),
        meta=meta,
        state=np.array([[*s.hand, s.width] for s in states], np.float32),
        extras={"mug_pose": np.array([[*s.mug_pos, *s.mug_quat] for s in states], np.float32),
                "held": np.array(held)},
    )


@dataclass
class CollectStats:
    """What a collection added: episodes, steps, steps in which the mug moved, and episodes in
    which it was ever held and still held at the end."""

    episodes: int = 0
    steps: int = 0
    moving: int = 0
    ever_held: int = 0
    held_at_end: int = 0

    def add(self, episode: Episode) -> None:
        moved = np.abs(np.diff(episode.extras["mug_pose"][:, :3], axis=0)).max(axis=1)
        self.episodes += 1
        self.steps += len(moved)
        self.moving += int((moved > 1e-3).sum())
        self.ever_held += int(episode.extras["held"].any())
        self.held_at_end += int(episode.extras["held"][-1])

    def table(self) -> str:
        share = 100 / max(self.episodes, 1)
        return ("| episodes | mug moved (% of steps) | ever held | held at the end |\n|---|---|---|---|\n"
                f"| {self.episodes} | {100 * self.moving / max(self.steps, 1):.1f} | "
                f"{self.ever_held} ({self.ever_held * share:.0f} %) | "
                f"{self.held_at_end} ({self.held_at_end * share:.0f} %) |")


COLLECTOR = collecting.Collector(features=mug_features, make=play, stats=CollectStats, setup=open_sim)
generate, collect, open_output = COLLECTOR.generate, COLLECTOR.collect, COLLECTOR.open_output
