"""Job expansion: JobSpec -> EpisodeSpecs -> fixed groups. Deterministic: same spec, same episodes.

Ids, seeds, sources and initial frames derive from (job name, job seed, index) alone, not from
the number of episodes, so a rerun recognises its committed episodes, a retried episode gets the
same seed, and a job grown to more episodes keeps the ones it has. Groups are consecutive runs of `batch_size`
indices; a replica always rolls a whole group, which keeps a retried batch byte-identical.

The job's first group is split in two (`job_groups`), so the first episodes are committed after a
rollout of LEAD_GROUP episodes rather than of `batch_size`. That leaves every episode's bytes as
they were: with scripted and replayed actions (seeded per episode) the rows of a batch do not
depend on each other, and the model's kernels give a row the same result in any batch of two or
more that this check covers (tests/pipeline/generate/test_generate_groups.py, on the bundled
model's architecture). Smaller batches can take other kernels: a batch of one does everywhere,
and on an AMD EPYC (2026-12) a batch of two gave other bytes than the same rows among eight, so
the first group is split as [4, batch - 4] and no sub-group is smaller than four; policy sources
see the whole batch, and GPU kernels were not checked, so such jobs keep their groups as they are.
"""

from __future__ import annotations

import hashlib

import numpy as np

from schemas import EpisodeSpec, JobSpec
from schemas.job import PolicySource

LEAD_GROUP = 4  # episodes in the job's first group when it is split
SOURCE_BLOCK = 10  # consecutive episodes whose sources are shuffled among themselves (assign_sources)


def episode_id(job: str, index: int) -> str:
    return f"{job}-{index:06d}"


def episode_seed(job: str, job_seed: int, index: int) -> int:
    """63-bit seed from a hash, so neighbouring indices get unrelated random streams."""
    digest = hashlib.sha256(f"{job}/{job_seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def assign_sources(spec: JobSpec) -> list[str]:
    """Source name per episode. Each next episode goes to the source furthest behind its share of
    the weights (so every prefix is within one of the shares), then each block of SOURCE_BLOCK
    consecutive episodes is shuffled with the job seed, so sources mix and do not fall in step
    with the initial frames. Whole blocks are assigned and the job's episodes cut from them, so
    episode i's source does not depend on how many episodes the job has: a grown job keeps the
    episodes it has."""
    names = list(spec.action_sources)
    shares = np.array([spec.action_sources[n].weight for n in names], np.float64)
    shares /= shares.sum()
    counts = np.zeros(len(names))
    order = []
    for i in range(-(-spec.episodes // SOURCE_BLOCK) * SOURCE_BLOCK):  # whole blocks, then cut
        pick = int(np.argmax(shares * (i + 1) - counts))  # ties: the first source
        counts[pick] += 1
        order.append(pick)
    for start in range(0, len(order), SOURCE_BLOCK):
        block = np.array(order[start:start + SOURCE_BLOCK])
        np.random.default_rng([spec.seed, 1, start // SOURCE_BLOCK]).shuffle(block)
        order[start:start + SOURCE_BLOCK] = block.tolist()
    return [names[k] for k in order[:spec.episodes]]


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


def lead_size(spec: JobSpec) -> int:
    """Episodes in the job's first group: LEAD_GROUP when splitting keeps the bytes (see above),
    else the whole batch."""
    has_policy = any(isinstance(s, PolicySource) for s in spec.action_sources.values())
    on_gpu = spec.resources.num_gpus > 0  # row-independence checked on CPU kernels only
    if has_policy or on_gpu or spec.batch_size < 2 * LEAD_GROUP:
        return spec.batch_size
    return LEAD_GROUP


def job_groups(spec: JobSpec, episodes: list[EpisodeSpec]) -> list[list[EpisodeSpec]]:
    """The groups a job rolls: `groups(episodes, batch_size)` with the first one split in two,
    the first part `lead_size(spec)` episodes. Depends on the spec alone, so a rerun or a retry
    rolls the same groups."""
    rolled = groups(episodes, spec.batch_size)
    lead = lead_size(spec)
    if not rolled or lead >= len(rolled[0]) or len(rolled[0]) - lead < LEAD_GROUP:
        return rolled
    return [rolled[0][:lead], rolled[0][lead:], *rolled[1:]]
