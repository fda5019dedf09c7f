"""Collect ground-truth PushT play data (scripted primitives in gym-pusht) into an EpisodeStore.

Alignment (LeRobot / Diffusion Policy convention): step t of an episode holds frame t, the
observation *before* action t is applied; state t is the agent position and block_pose t,
coverage t, success t describe that same observation; action t is the agent target then sent,
which yields observation t+1 (the observation after the last action is not recorded).
block_pose is (x, y, angle) with the angle wrapped into [0, 2 pi) like gym-pusht's state
observation; coverage is in [0, 1]; success is coverage > 0.95.

Determinism: every random choice of episode `index` derives from (seed, index): the primitive
from SeedSequence(seed, index), and each attempt's gym reset seed and primitive choices from
SeedSequence(seed, index, attempt). An attempt is kept only when the primitive did what it meant
to (see `kept`), otherwise the next attempt runs. Episodes never depend on one another, so any
number of worker processes gives byte-identical stores; the parent appends in index order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pipeline.pusht.aimed import ALL as PRIMITIVES
from pipeline.pusht.env import PushTSim, wrapped_pose
from pipeline.pusht.features import pusht_features
from pipeline.pusht.primitives import Play, kept, moved_steps, play
from pipeline.tasks import collecting
from schemas import EpisodeMeta, SpecError
from sim_model.data.episode import Episode

log = logging.getLogger(__name__)

TASK = "Push the T-shaped block onto the green target"
FPS = 10.0
DEFAULT_MIX = {"push": 0.35, "rotate": 0.25, "contact": 0.1, "roam": 0.1, "chain": 0.2}
MAX_ATTEMPTS = 25


def parse_mix(text: str) -> dict[str, float]:
    """'push=0.4,rotate=0.2' -> weights (unnormalised); SpecError names what is wrong."""
    return collecting.parse_mix(text, PRIMITIVES)


@dataclass(frozen=True)
class CollectConfig(collecting.PlayConfig):
    """What to collect; validated on construction (SpecError with the offending value)."""

    primitives: ClassVar[Mapping[str, object]] = PRIMITIVES
    min_resolution: ClassVar[int] = 8
    max_resolution: ClassVar[int] = 1024
    why_max: ClassVar[str] = "gym-pusht draws a 512x512 canvas"

    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))

    def primitive(self, index: int) -> str:
        """The primitive episode `index` plays, drawn from the mix."""
        names = sorted(name for name, weight in self.mix.items() if weight > 0)
        weights = np.array([self.mix[name] for name in names])
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, index]))
        return names[int(rng.choice(len(names), p=weights / weights.sum()))]

    def attempt_seed(self, index: int, attempt: int) -> int:
        """gym-pusht reset seed of an attempt at episode `index` (a uint32)."""
        return int(np.random.SeedSequence([self.seed, index, attempt]).generate_state(1)[0])


def make_episode(sim: PushTSim, config: CollectConfig, index: int) -> Episode:
    """Episode `index`: retry attempts until one is kept (SpecError after MAX_ATTEMPTS)."""
    primitive = config.primitive(index)
    for attempt in range(MAX_ATTEMPTS):
        seed = config.attempt_seed(index, attempt)
        record = play(sim, primitive, config.steps, seed, PRIMITIVES)
        if kept(primitive, record):
            return _to_episode(config, index, primitive, attempt, seed, record)
        log.debug("episode %d attempt %d (%s) rejected", index, attempt, primitive)
    raise SpecError(f"episode {index}: {MAX_ATTEMPTS} attempts of primitive '{primitive}' in "
                    f"{config.steps} steps all failed to do what it means; primitives need about "
                    "30 steps to approach and push the block, so raise --steps.")


def _to_episode(config: CollectConfig, index: int, primitive: str, attempt: int, seed: int,
                record: Play) -> Episode:
    decided = [o for o in record.outcomes if o is not None]
    meta = EpisodeMeta(
        episode_id=f"pusht-s{config.seed}-{index:06d}", length=config.steps, task=TASK,
        source=f"pusht:{primitive}", seed=seed, fps=FPS,
        info={"primitive": primitive, "index": index, "attempt": attempt,
              "collect_seed": config.seed, "mix": config.mix_text(),
              "primitives_finished": len(decided), "primitives_succeeded": int(sum(decided))},
    )
    observations = record.observations
    return Episode(
        frames={"top": np.stack([obs.frame for obs in observations])},
        action=np.stack(record.actions).astype(np.float32),
        meta=meta,
        state=np.stack([obs.agent for obs in observations]).astype(np.float32),
        extras={"block_pose": np.stack([wrapped_pose(obs.block_pose) for obs in observations]),
                "coverage": np.array([obs.coverage for obs in observations], dtype=np.float32),
                "success": np.array([obs.success for obs in observations], dtype=bool)},
    )


# -- many episodes, one or more processes --------------------------------------------------

def _process_sim(config: CollectConfig) -> PushTSim:
    """One process's simulator, reused across its episodes."""
    import cv2

    cv2.setNumThreads(1)  # one core per worker process; cv2's resize pool would oversubscribe
    return PushTSim(config.resolution)


@dataclass
class CollectStats:
    """What a collection added, per primitive: episodes, attempts they took, transitions
    t -> t+1, and transitions in which the block moved."""

    counts: dict[str, np.ndarray] = field(default_factory=dict)  # name -> int64 (4,)

    def add(self, episode: Episode) -> None:
        moved = moved_steps(episode.extras["block_pose"].astype(np.float64))
        row = np.array([1, int(episode.meta.info["attempt"] or 0) + 1, len(moved), moved.sum()])
        name = str(episode.meta.info["primitive"])
        self.counts[name] = self.counts.get(name, np.zeros(4, dtype=np.int64)) + row

    @property
    def episodes(self) -> int:
        return int(sum(row[0] for row in self.counts.values()))

    def moved_fraction(self, primitive: str | None = None) -> float:
        """Share of transitions in which the block moved (of one primitive, or all)."""
        rows = [self.counts[primitive]] if primitive else list(self.counts.values())
        total = np.sum(rows, axis=0) if rows else np.zeros(4)
        return float(total[3] / max(total[2], 1))

    def table(self) -> str:
        lines = ["| primitive | episodes | attempts | block moved (% of steps) |", "|---|---|---|---|"]
        for name in [*sorted(self.counts), None]:
            row = self.counts[name] if name else np.sum(list(self.counts.values()), axis=0)
            lines.append(f"| {name or 'all'} | {row[0]} | {row[1]} | "
                         f"{100 * self.moved_fraction(name):.1f} |")
        return "\n".join(lines)


COLLECTOR = collecting.Collector(features=pusht_features, make=make_episode, stats=CollectStats, setup=_process_sim)
generate, collect, open_output = COLLECTOR.generate, COLLECTOR.collect, COLLECTOR.open_output
