"""Collect ground-truth rope play (scripted primitives, pipeline.rope.primitives) into an
EpisodeStore.

Alignment as in PushT and sweep (LeRobot / Diffusion Policy convention): step t holds frame t,
the observation before action t; state t (the effector), rope t, clip t and inserted t describe
that observation; action t, the target then sent, yields observation t+1.

Determinism: episode `index` draws its start and every choice of its play from
SeedSequence(seed, index), and episodes never depend on one another, so any number of worker
processes gives byte-identical stores; the parent appends in index order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pipeline.rope.env import RopeSim, State, draw_start
from pipeline.rope.features import rope_features
from pipeline.rope.primitives import PRIMITIVES
from pipeline.rope.render import render
from pipeline.tasks import collecting
from schemas import EpisodeMeta
from sim_model.data.episode import Episode

TASK = "Route the rope into the green clip"
DEFAULT_MIX = {"route": 0.35, "swing": 0.25, "graze": 0.2, "roam": 0.2}


def parse_mix(text: str) -> dict[str, float]:
    """'route=0.5,swing=0.2' -> weights (unnormalised); SpecError names what is wrong."""
    return collecting.parse_mix(text, PRIMITIVES)


@dataclass(frozen=True)
class CollectConfig(collecting.PlayConfig):
    """What to collect; validated on construction (SpecError with the offending value)."""

    primitives: ClassVar[Mapping[str, object]] = PRIMITIVES
    min_resolution: ClassVar[int] = 16
    max_resolution: ClassVar[int] = 512
    why_max: ClassVar[str] = "the table is 512 units across"

    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))


def play(_: None, config: CollectConfig, index: int) -> Episode:
    """Episode `index`: a start drawn from (seed, index), then primitives until --steps."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, index]))
    names = sorted(name for name, weight in config.mix.items() if weight > 0)
    weights = np.array([config.mix[name] for name in names])
    sim = RopeSim()
    state = sim.reset_to(draw_start(rng))
    states: list[State] = []
    actions: list[np.ndarray] = []
    played: list[str] = []
    while len(actions) < config.steps:
        name = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        played.append(name)
        for target in PRIMITIVES[name](state, rng)[:config.steps - len(actions)]:
            states.append(state)
            actions.append(target)
            state = sim.step(target)
    meta = EpisodeMeta(
        episode_id=f"rope-s{config.seed}-{index:06d}", length=config.steps, task=TASK,
        source="rope:" + "+".join(dict.fromkeys(played)), fps=10.0,
        info={"index": index, "collect_seed": config.seed, "mix": config.mix_text(),
              "segments": len(played), "primitives": ",".join(played)},
    )
    inserted = np.array([s.inserted for s in states])
    return Episode(
        frames={"top": np.stack([render(s, config.resolution)["top"] for s in states])},
        action=np.stack(actions).astype(np.float32),
        meta=meta,
        state=np.stack([s.effector for s in states]).astype(np.float32),
        extras={"rope": np.stack([s.rope for s in states]).astype(np.float32),
                "clip": np.array([[*s.clip, s.clip_angle] for s in states], np.float32),
                "inserted": inserted},
    )


@dataclass
class CollectStats:
    """What a collection added: episodes, steps, steps in which the rope moved, and episodes
    that end with the rope through the clip."""

    episodes: int = 0
    steps: int = 0
    moving: int = 0
    inserted: int = 0

    def add(self, episode: Episode) -> None:
        moved = np.abs(np.diff(episode.extras["rope"], axis=0)).max(axis=(1, 2))
        self.episodes += 1
        self.steps += len(moved)
        self.moving += int((moved > 0.5).sum())
        self.inserted += int(episode.extras["inserted"][-1])

    def table(self) -> str:
        return ("| episodes | rope moved (% of steps) | inserted at the end |\n|---|---|---|\n"
                f"| {self.episodes} | {100 * self.moving / max(self.steps, 1):.1f} | "
                f"{self.inserted} ({100 * self.inserted / max(self.episodes, 1):.0f} %) |")


COLLECTOR = collecting.Collector(features=rope_features, make=play, stats=CollectStats)
generate, collect, open_output = COLLECTOR.generate, COLLECTOR.collect, COLLECTOR.open_output
