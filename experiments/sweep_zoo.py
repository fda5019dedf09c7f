"""Sweep policies of graded skill, for ranking in the sweep model (issue 31's second regime): the
pixel sweeper, degraded versions of it, and trivial baselines (experiments.policy_zoo's, on both
pushers' 4-D targets), as `module:Class` policies, e.g. `experiments.sweep_zoo:SweepNoisy30` (run
from the repository root so `experiments` imports).

    iws eval ranking --model sweep --init data/sweep_heldout_starts.zarr --ground-truth sweep \\
        $(for p in SweepDemonstrator SweepNoisy30 SweepNoisy90 SweepSluggish SweepStill SweepRandom; \\
          do echo --policy experiments.sweep_zoo:$p; done) --out runs/ranking_sweep

Run as a script it also builds the lerobot side of the sweep zoo: the demonstrator rolled in the
pymunk arena from piles that neither the held-out starts nor `iws collect sweep`'s defaults draw
(seed DEMO_SEED), recorded with both cameras, exported as LeRobot v3.0
(`observation.images.top`, `observation.images.side`), and ACT trained on it by `lerobot-train`
(experiments.lerobot_zoo's configuration) with checkpoints along the way; `--print-policies`
prints every `--policy` argument of the sweep ranking:

    python -m experiments.sweep_zoo --work runs/sweep_zoo --demos 64 --horizon 150
    iws eval ranking --model sweep --init data/sweep_heldout_starts.zarr --ground-truth sweep \\
        --horizon 120 $(python -m experiments.sweep_zoo --work runs/sweep_zoo --print-policies) \\
        --out runs/ranking_sweep
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from experiments.lerobot_zoo import STEPS, checkpoints, train_family
from experiments.policy_zoo import NoisyMixin, Random, SluggishMixin, Still
from pipeline.sweep.collect import TASK
from pipeline.sweep.demonstrator import SweepDemonstrator
from pipeline.sweep.env import WORKSPACE, State, draw_pile
from pipeline.sweep.features import sweep_features
from pipeline.sweep.truth import roll_sweep
from schemas import EpisodeMeta, EpisodeSpec
from sim_model.data.episode import Episode
from sim_model.data.formats.lerobot_writer import export_lerobot
from sim_model.data.store import EpisodeStore
from workers.actions.base import Observation

log = logging.getLogger("sweep_zoo")

DEMO_SEED = 41_000  # the piles of the demonstrations; held-out starts are `--seed 20000`
BATCH = 16


class SweepNoisy30(NoisyMixin, SweepDemonstrator):
    sigma, high, stream = 30.0, WORKSPACE, "sweep-zoo-noise"


class SweepNoisy90(NoisyMixin, SweepDemonstrator):
    sigma, high, stream = 90.0, WORKSPACE, "sweep-zoo-noise"


class SweepSluggish(SluggishMixin, SweepDemonstrator):
    pass


class SweepStill(Still):
    dims = 4


class SweepRandom(Random):
    dims, high, stream = 4, WORKSPACE, "sweep-zoo-random"


ZOO = ["SweepDemonstrator", "SweepNoisy30", "SweepNoisy90", "SweepSluggish", "SweepStill", "SweepRandom"]


class _Recorder:
    """Wraps a policy and keeps what it saw (every camera, the state) and did, step by step."""

    def __init__(self, policy: SweepDemonstrator) -> None:
        self.policy = policy
        self.frames: list[np.ndarray] = []
        self.state: list[np.ndarray] = []
        self.action: list[np.ndarray] = []

    def reset(self, episodes: Sequence[EpisodeSpec], observation: Observation) -> None:
        self.policy.reset(episodes, observation)

    def actions(self, step: int, observation: Observation) -> np.ndarray:
        out = self.policy.actions(step, observation)
        self.frames.append(observation.frames.copy())
        self.state.append(np.asarray(observation.state, np.float32).copy())
        self.action.append(np.asarray(out, np.float32).copy())
        return out


def collect_demos(path: Path, n: int, horizon: int) -> EpisodeStore:
    """n demonstrator episodes of `horizon` steps in the arena, both cameras, from fresh piles
    (pile i drawn as `iws collect sweep --seed DEMO_SEED` draws its episode i); resumed by batch."""
    features = sweep_features(96).model_copy(update={"extras": ()})
    store = EpisodeStore.open(path, "a") if path.exists() else EpisodeStore.create(path, features)
    cameras = features.camera_names
    while len(store) < n:
        first = len(store)
        rows = range(first, min(first + BATCH, n))
        starts = [State(*draw_pile(np.random.default_rng(np.random.SeedSequence([DEMO_SEED, i]))))
                  for i in rows]
        specs = [EpisodeSpec(job_id="sweep-demos", index=i, episode_id=f"sweep-demo-{i:06d}",
                             seed=DEMO_SEED + i, init_ref=f"pile:{DEMO_SEED}:{i}",
                             action_source="demonstrator", horizon=horizon) for i in rows]
        recorder = _Recorder(SweepDemonstrator(features))
        in_goal, _ = roll_sweep(recorder, specs, starts, cameras, 96, horizon)
        frames = np.stack(recorder.frames, axis=1)  # (B, T, V, H, W, 3)
        state, action = np.stack(recorder.state, axis=1), np.stack(recorder.action, axis=1)
        for row, spec in enumerate(specs):
            meta = EpisodeMeta(episode_id=spec.episode_id, length=horizon, task=TASK,
                               source="policy:sweep-demonstrator", seed=spec.seed, fps=10.0,
                               info={"env": "sweep-arena", "in_goal_start": float(in_goal[row, 0]),
                                     "in_goal_end": float(in_goal[row, -1])})
            store.append(Episode(frames={c: frames[row, :, v] for v, c in enumerate(cameras)},
                                 action=action[row], state=state[row], meta=meta))
        log.info("demos: %d of %d (in-goal %.2f -> %.2f on this batch)", len(store), n,
                 in_goal[:, 0].mean(), in_goal[:, -1].mean())
    return store


def exported(store: EpisodeStore, dest: Path) -> Path:
    """The LeRobot v3.0 copy a user would train ACT on (made again when the store has grown)."""
    if dest.exists():
        from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

        if LeRobotDatasetMetadata(f"iws/{dest.name}", root=dest).total_episodes == len(store):
            return dest
    return Path(export_lerobot(store, dest, repo_id=f"iws/{dest.name}", overwrite=True))


def policy_arguments(work: Path) -> list[str]:
    """`--policy` arguments of `iws eval ranking --model sweep` for the scripted and ACT zoo."""
    args = [a for name in ZOO for a in ("--policy", f"experiments.sweep_zoo:{name}")]
    if checkpoints(work / "act"):
        args += ["--policy", f"act={work / 'act'}/checkpoints/[0-9]*/pretrained_model"]
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs/sweep_zoo"))
    parser.add_argument("--demos", type=int, default=64, help="demonstrator episodes")
    parser.add_argument("--horizon", type=int, default=150, help="steps per demonstration")
    parser.add_argument("--steps", type=int, default=STEPS["act"], help="ACT training steps")
    parser.add_argument("--saves", type=int, default=5, help="checkpoints along the run")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--print-policies", action="store_true",
                        help="print the --policy arguments for `iws eval ranking` and exit")
    args = parser.parse_args()
    if args.print_policies:
        print(" ".join(policy_arguments(args.work)))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)
    store = collect_demos(args.work / "demos.zarr", args.demos, args.horizon)
    dataset = exported(store, args.work / "demos_lerobot")
    built = train_family("act", dataset, args.work / "act", args.steps, args.saves, args.threads,
                         args.batch_size)
    log.info("act: %d checkpoints", len(built))


if __name__ == "__main__":
    main()
