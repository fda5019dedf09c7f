"""What every task's `iws collect TASK` shares: the --mix option, the checks on what to collect,
opening the output store (new, replaced or resumed, with its checks), appending the episodes,
the worker processes, and the command's run (open the store, collect, summarise). Each task
brings its primitives, its episode maker and its stats, and its collector module
(pipeline/<task>/collect.py) makes a `Collector` of them."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from schemas import FeatureSpec, SpecError
from sim_model.data.episode import Episode
from sim_model.data.store import EpisodeStore

log = logging.getLogger(__name__)


class Stats(Protocol):
    episodes: int

    def add(self, episode: Episode) -> None: ...


S = TypeVar("S", bound=Stats)


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


@dataclass(frozen=True)
class PlayConfig:
    """What to collect of a task's scripted play; validated on construction (SpecError with the
    offending value). A task's CollectConfig subclasses it: it gives `mix` its default and sets
    the class attributes (its primitives and the resolutions it renders)."""

    primitives: ClassVar[Collection[str]] = ()
    min_resolution: ClassVar[int] = 16
    max_resolution: ClassVar[int] = 512
    why_max: ClassVar[str] = ""  # why resolutions above max_resolution are refused

    episodes: int
    steps: int = 200
    seed: int = 0
    resolution: int = 96
    mix: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_config(self, self.mix, self.primitives, min_resolution=self.min_resolution,
                     max_resolution=self.max_resolution, why_max=self.why_max)

    def mix_text(self) -> str:
        return mix_text(self.mix)


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


def open_output(config: Any, out: str | os.PathLike[str], features: FeatureSpec, *,
                overwrite: bool = False, resume: bool = False) -> EpisodeStore:
    """The store to collect into: a new one, a replaced one (`overwrite`), or one an interrupted
    collection of the same config left (`resume`: the same features, seed, mix and steps, no more
    episodes than asked). SpecError before any work when `out` exists, is a file, or cannot be
    written. `config` has episodes, seed, steps and mix_text() (a task's CollectConfig)."""
    if overwrite and resume:
        raise SpecError("--overwrite and --resume contradict each other; pass one of them.")
    location = os.fspath(out)
    exists = False
    if "://" not in location:
        exists = _check_local_output(Path(location), may_exist=overwrite or resume)
    if resume and exists:
        store = EpisodeStore.open(location, "a")
        _check_resumable(store, config, features)
        return store
    return EpisodeStore.create(location, features, overwrite=overwrite)


def append_episodes(store: EpisodeStore, episodes: Iterable[Episode], stats: S,
                    on_episode: Callable[[Episode], None] | None = None) -> S:
    """Append `episodes` (those the store still lacks, in order) to `store`, counting them in
    `stats`; a resumed store so ends up equal to an uninterrupted run."""
    for episode in episodes:
        store.append(episode)
        stats.add(episode)
        if on_episode is not None:
            on_episode(episode)
    return stats


@dataclass(frozen=True)
class Collector(Generic[S]):
    """A task's collection from its parts: `features(resolution)`, the task's FeatureSpec;
    `make(resource, config, index)`, episode `index` of a config (a module-level function, see
    `generate`); `stats()`, a fresh count of what a collection added; `setup(config)`, the
    per-process resource `make` uses (a simulator), if any. Its methods are what a collector
    module exports as `generate`, `collect` and `open_output`."""

    features: Callable[[int], FeatureSpec]
    make: Maker
    stats: Callable[[], S]
    setup: Setup | None = None

    def generate(self, config: Any, indices: range, workers: int = 1) -> Iterator[Episode]:
        """Episodes for `indices`, in order, made by `workers` processes (1: in this process)."""
        return generate(self.make, config, indices, workers, setup=self.setup)

    def collect(self, config: Any, store: EpisodeStore, *, workers: int = 1,
                on_episode: Callable[[Episode], None] | None = None) -> S:
        """Append episodes len(store) .. config.episodes - 1 to `store` (from `open_output`); a
        resumed store ends up equal to an uninterrupted run. Returns what was added."""
        return append_episodes(store, self.generate(config, range(len(store), config.episodes), workers),
                               self.stats(), on_episode)

    def open_output(self, config: Any, out: str | os.PathLike[str], *, overwrite: bool = False,
                    resume: bool = False) -> EpisodeStore:
        """The store to collect into (`open_output` with the task's features)."""
        return open_output(config, out, self.features(config.resolution), overwrite=overwrite, resume=resume)


def _check_local_output(path: Path, *, may_exist: bool) -> bool:
    """Whether `path` exists; SpecError when it may not be written."""
    if path.exists():
        if path.is_file():
            raise SpecError(f"--out {path} is a file; give a directory path for the Zarr store.")
        if not may_exist:
            raise SpecError(f"--out {path} already exists; pass --overwrite to replace it, "
                            "--resume to finish an interrupted collection, or another --out.")
        return True
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SpecError(f"cannot create --out {path}: {ancestor} is a file, not a directory.")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise SpecError(f"cannot create --out {path}: {ancestor} is not writable by this user; "
                        "choose a --out in a directory you can write to.")
    return False


def _check_resumable(store: EpisodeStore, config: Any, features: FeatureSpec) -> None:
    if store.features != features:
        raise SpecError(f"cannot resume {store.path}: it holds different features (another "
                        "--resolution?); pass --overwrite to start over.")
    if len(store) > config.episodes:
        raise SpecError(f"cannot resume {store.path}: it already holds {len(store)} episodes, "
                        f"more than --episodes {config.episodes}.")
    if len(store):
        info = store.meta(0).info
        was = (info.get("collect_seed"), info.get("mix"), store.meta(0).length)
        now = (config.seed, config.mix_text(), config.steps)
        if was != now:
            raise SpecError(f"cannot resume {store.path}: it was collected with (seed, mix, steps)="
                            f"{was}, not {now}; rerun with those or pass --overwrite.")
        log.info("resuming %s: %d of %d episodes already there", store.path, len(store),
                 config.episodes)


# -- many episodes, one or more processes --------------------------------------------------

# `make(resource, config, index) -> Episode` makes episode `index`; `setup(config)` makes what one
# process reuses across its episodes (a simulator; closed with its close() if it has one).
Maker = Callable[[Any, Any, int], Episode]
Setup = Callable[[Any], Any]

_worker: tuple[Maker, Any, Any] | None = None  # per worker process: maker, its resource, config


def _init_worker(make: Maker, setup: Setup | None, config: Any) -> None:
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _worker = (make, setup(config) if setup is not None else None, config)


def _worker_episode(index: int) -> Episode:
    assert _worker is not None, "worker process was not initialised"
    make, resource, config = _worker
    return make(resource, config, index)


def generate(make: Maker, config: Any, indices: range, workers: int = 1, *,
             setup: Setup | None = None) -> Iterator[Episode]:
    """Episodes for `indices`, in order, made by `workers` processes (1: in this process), each
    process calling `setup(config)` once. The same episodes for any `workers`: each is made from
    (config, index) alone. `make` and `setup` are module-level functions (spawned processes
    import them by name)."""
    if not indices:
        return
    workers = max(1, min(workers, len(indices)))
    if workers == 1:
        resource = setup(config) if setup is not None else None
        try:
            for index in indices:
                yield make(resource, config, index)
        finally:
            if hasattr(resource, "close"):
                resource.close()
        return
    # spawn, not fork: the parent may hold torch or Ray threads that a fork would copy mid-lock.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(make, setup, config)) as pool:
        # imap keeps index order; chunks of 1 balance episodes of unequal cost.
        yield from pool.imap(_worker_episode, indices, chunksize=1)
