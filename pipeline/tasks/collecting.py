"""What every task's `iws collect TASK` shares: the --mix option, the checks on what to collect,
and the command's run (open the store, collect, summarise). Each task brings its primitives and
its own collector module (pipeline/<task>/collect.py)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Collection, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from schemas import SpecError


def parse_mix(text: str, primitives: Collection[str]) -> dict[str, float]:
    """'push=0.4,rotate=0.2' -> weights (unnormalised); SpecError names what is wrong."""
    mix: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            raise SpecError(f"--mix entry '{item}' has no weight; write NAME=WEIGHT, e.g. "
                            f"{next(iter(primitives))}=0.4.")
        if name not in primitives:
            raise SpecError(f"--mix names unknown primitive '{name}'; known primitives are "
                            f"{', '.join(primitives)}.")
        try:
            mix[name] = float(value)
        except ValueError:
            raise SpecError(f"--mix weight of '{name}' is '{value}', not a number.") from None
    return mix


def check_config(config: Any, mix: Mapping[str, float], primitives: Collection[str], *,
                 min_resolution: int, max_resolution: int, why_max: str) -> None:
    """SpecError unless episodes, steps, seed and resolution are integers in range and the mix
    names known primitives with finite weights >= 0, not all 0."""
    for name, low in (("episodes", 1), ("steps", 2), ("seed", 0), ("resolution", min_resolution)):
        value = getattr(config, name)
        if not isinstance(value, int) or value < low:
            raise SpecError(f"--{name} must be an integer >= {low}, got {value!r}.")
    resolution = config.resolution
    if resolution > max_resolution:
        raise SpecError(f"--resolution {resolution} is too large; {why_max}, so use at most "
                        f"{max_resolution}.")
    unknown = sorted(set(mix) - set(primitives))
    if unknown:
        raise SpecError(f"mix names unknown primitives {unknown}; known: {', '.join(primitives)}.")
    weights = np.array(list(mix.values()), dtype=np.float64)
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
        raise SpecError(f"mix weights must be finite, >= 0 and not all 0, got {dict(mix)}.")


def mix_text(mix: Mapping[str, float]) -> str:
    return ",".join(f"{name}={mix[name]:g}" for name in sorted(mix))


def run_collect(collector: ModuleType, args: argparse.Namespace, out: str,
                progress: Callable[[int, int], None], cameras: str = "") -> str:
    """`iws collect TASK` with the task's collector module, which provides DEFAULT_MIX,
    PRIMITIVES, CollectConfig, open_output and collect. Returns the summary to print."""
    mix = (parse_mix(args.mix, collector.PRIMITIVES) if args.mix is not None
           else dict(collector.DEFAULT_MIX))
    config = collector.CollectConfig(episodes=args.episodes, steps=args.steps, seed=args.seed,
                                     resolution=args.resolution, mix=mix)
    workers = args.workers if args.workers is not None else len(os.sched_getaffinity(0))
    if workers < 1:
        raise SpecError(f"--workers must be at least 1, got {workers}.")
    store = collector.open_output(config, out, overwrite=args.overwrite, resume=args.resume)
    progress(len(store), config.episodes)
    stats = collector.collect(config, store, workers=workers,
                              on_episode=lambda _: progress(len(store), config.episodes))
    lines = [f"{out}: {stats.episodes} episodes x {config.steps} steps at "
             f"{config.resolution}x{config.resolution}{cameras} added, {len(store)} in the store "
             f"(mix {mix_text(config.mix)})"]
    if stats.episodes:
        lines.append(stats.table())
    return "\n".join(lines)
