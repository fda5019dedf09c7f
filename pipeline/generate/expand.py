"""Job expansion: JobSpec -> EpisodeSpecs -> fixed groups. Deterministic: same spec, same episodes.

Ids and seeds derive from (job name, job seed, index) alone, so a rerun recognises its committed
episodes and a retried episode gets the same seed. Groups are consecutive runs of `batch_size`
indices; a replica always rolls a whole group, which keeps a retried batch byte-identical.
"""

from __future__ import annotations

import hashlib

import numpy as np

from schemas import EpisodeSpec, JobSpec


def episode_id(job: str, index: int) -> str:
    return f"{job}-{index:06d}"


def episode_seed(job: str, job_seed: int, index: int) -> int:
    """63-bit seed from a hash, so neighbouring indices get unrelated random streams."""
    digest = hashlib.sha256(f"{job}/{job_seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def assign_sources(spec: JobSpec) -> list[str]:
    """Source name per episode: counts proportional to weights (largest remainder), order shuffled
    with the job seed so every stretch of the job mixes the sources."""
    names = list(spec.action_sources)
    weights = np.array([spec.action_sources[n].weight for n in names], np.float64)
    quota = weights / weights.sum() * spec.episodes
    counts = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - counts), kind="stable")[: spec.episodes - counts.sum()]:
        counts[i] += 1
    order = np.repeat(np.arange(len(names)), counts)
    np.random.default_rng([spec.seed, 1]).shuffle(order)
    return [names[i] for i in order]


def assign_inits(spec: JobSpec, refs: list[str]) -> list[str]:
    """Initial-frame reference per episode: a seeded permutation of `refs`, cycled."""
    perm = np.random.default_rng([spec.seed, 2]).permutation(len(refs))
    return [refs[perm[i % len(refs)]] for i in range(spec.episodes)]


def expand(spec: JobSpec, init_refs: list[str]) -> list[EpisodeSpec]:
    sources, inits = assign_sources(spec), assign_inits(spec, init_refs)
    return [EpisodeSpec(job_id=spec.name, index=i, episode_id=episode_id(spec.name, i),
                        seed=episode_seed(spec.name, spec.seed, i), init_ref=inits[i],
                        action_source=sources[i], horizon=spec.horizon)
            for i in range(spec.episodes)]


def groups(episodes: list[EpisodeSpec], batch_size: int) -> list[list[EpisodeSpec]]:
    return [episodes[i:i + batch_size] for i in range(0, len(episodes), batch_size)]
