"""Collect ground-truth sweep play (scripted primitives, pipeline.sweep.primitives) into an
EpisodeStore.

Alignment as in PushT (LeRobot / Diffusion Policy convention): step t holds frame t of each
camera, the observation before action t; state t (both pushers' positions), particles t,
in_goal t and success t describe that observation; action t, the targets then sent, yields
observation t+1.

Determinism: episode `index` draws its pile and every choice of its play from
SeedSequence(seed, index), and episodes never depend on one another, so any number of worker
processes gives byte-identical stores; the parent appends in index order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pipeline.sweep.env import MAX_PARTICLES, SUCCESS_FRACTION, State, SweepSim, draw_pile
from pipeline.sweep.features import sweep_features
from pipeline.sweep.primitives import PRIMITIVES
from pipeline.sweep.render import render
from pipeline.tasks import collecting
from schemas import EpisodeMeta
from sim_model.data.episode import Episode

TASK = "Sweep the pile of discs into the green goal with both pushers"
DEFAULT_MIX = {"sweep": 0.45, "spread": 0.2, "roam": 0.15, "cross": 0.2}


def parse_mix(text: str) -> dict[str, float]:
    """'sweep=0.5,cross=0.2' -> weights (unnormalised); SpecError names what is wrong."""
    return collecting.parse_mix(text, PRIMITIVES)


@dataclass(frozen=True)
class CollectConfig(collecting.PlayConfig):
    """What to collect; validated on construction (SpecError with the offending value)."""

    primitives: ClassVar[Mapping[str, object]] = PRIMITIVES
    min_resolution: ClassVar[int] = 16
    max_resolution: ClassVar[int] = 512
    why_max: ClassVar[str] = "the arena is 512 units across"

    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))


def play(config: CollectConfig, index: int) -> Episode:
    """Episode `index`: a pile drawn from (seed, index), then primitives until --steps."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, index]))
    names = sorted(name for name, weight in config.mix.items() if weight > 0)
    weights = np.array([config.mix[name] for name in names])
    sim = SweepSim()
    state = sim.reset_to(*draw_pile(rng))
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
    return _to_episode(config, index, states, actions, played)


def _to_episode(config: CollectConfig, index: int, states: list[State], actions: list[np.ndarray],
                played: list[str]) -> Episode:
    count = len(states[0].particles)
    particles = np.zeros((len(states), MAX_PARTICLES, 2), np.float32)
    particles[:, :count] = [s.particles for s in states]
    in_goal = np.array([s.in_goal for s in states], np.float32)
    views = [render(s.pushers, s.particles, config.resolution) for s in states]
    meta = EpisodeMeta(
        episode_id=f"sweep-s{config.seed}-{index:06d}", length=config.steps, task=TASK,
        source="sweep:" + "+".join(dict.fromkeys(played)), fps=10.0,
        info={"index": index, "collect_seed": config.seed, "mix": config.mix_text(),
              "segments": len(played), "primitives": ",".join(played),
              "particles": count},
    )
    return Episode(
        frames={camera: np.stack([v[camera] for v in views]) for camera in ("top", "side")},
        action=np.stack(actions).astype(np.float32),
        meta=meta,
        state=np.stack([s.pushers.reshape(4) for s in states]).astype(np.float32),
        extras={"particles": particles,
                "particle_count": np.full(len(states), count, np.int32),
                "in_goal": in_goal,
                "success": in_goal >= SUCCESS_FRACTION},
    )


def _make(_: None, config: CollectConfig, index: int) -> Episode:
    return play(config, index)


@dataclass
class CollectStats:
    """What a collection added: episodes, steps, steps in which some disc moved, and the
    in-goal fraction at the first and last step of each episode."""

    episodes: int = 0
    steps: int = 0
    moving: int = 0
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)

    def add(self, episode: Episode) -> None:
        count = int(episode.extras["particle_count"][0])
        moved = np.abs(np.diff(episode.extras["particles"][:, :count], axis=0)).max(axis=(1, 2))
        self.episodes += 1
        self.steps += len(moved)
        self.moving += int((moved > 0.5).sum())
        self.start.append(float(episode.extras["in_goal"][0]))
        self.end.append(float(episode.extras["in_goal"][-1]))

    def table(self) -> str:
        return ("| episodes | discs moved (% of steps) | in goal at start (mean) | at end (mean, max) |\n"
                "|---|---|---|---|\n"
                f"| {self.episodes} | {100 * self.moving / max(self.steps, 1):.1f} | "
                f"{np.mean(self.start):.3f} | {np.mean(self.end):.3f}, {np.max(self.end):.3f} |")


COLLECTOR = collecting.Collector(features=sweep_features, make=_make, stats=CollectStats)
generate, collect, open_output = COLLECTOR.generate, COLLECTOR.collect, COLLECTOR.open_output
