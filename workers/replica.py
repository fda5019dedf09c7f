"""WorldModelReplica: loads a checkpoint once, then rolls fixed groups of episodes in lockstep.

It is a plain class with no Ray import: the driver makes each replica a Ray actor
(pipeline/generate/ray_exec.py; restarted if killed, its call retried) and hands groups to
whichever replica is free, and rolls groups in-process with one while Ray starts. One call is one
*group*: the JSON list of EpisodeSpecs that always roll together, so a retried group replays
exactly the same batch and writes byte-identical episodes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from schemas import EpisodeMeta, EpisodeRecord, EpisodeSpec, JobSpec, SpecError
from sim_model.data.episode import Episode
from workers.actions import GroupActions, Observation, make_action_source
from workers.init_frames import load_init
from workers.scoring import Scorer, import_scorer, score_episode
from workers.writer import episode_features, read_commit, write_episode

if TYPE_CHECKING:
    from sim_model.world_model import WorldModel

log = logging.getLogger(__name__)


class GroupAbandoned(Exception):
    """A rollout stopped on request before anything of its group was written."""


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when this process can see a GPU, else 'cpu'."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class WorldModelReplica:
    """One model replica. `roll_json` maps a group to the records of its episodes."""

    def __init__(self, job: str, out: str, model: WorldModel | None = None,
                 scorer: Scorer | None = None) -> None:
        self.job = JobSpec.model_validate_json(job)
        self.out = out
        self.abandon: Callable[[], bool] | None = None  # polled every step; True: GroupAbandoned
        # A user error (bad checkpoint, policy, scorer) is reported as a value, not raised: Ray
        # wraps exceptions in its own types and keeps only their text.
        self.error = ""
        try:
            self._setup(model, scorer)
        except SpecError as error:
            self.error = str(error)

    @classmethod
    def with_model(cls, job: JobSpec, out: str, model: WorldModel,
                   scorer: Scorer | None = None) -> WorldModelReplica:
        """A replica around a model already loaded (on job.device), e.g. the one preflight loaded."""
        return cls(job.model_dump_json(), out, model, scorer)

    def _setup(self, model: WorldModel | None, scorer: Scorer | None) -> None:
        from sim_model.world_model import WorldModel

        self.device = resolve_device(self.job.device)
        self.wm = model if model is not None else WorldModel.load(self.job.model, device=self.device)
        self.features = episode_features(self.wm.features, self.wm.has_state)
        self.sources = {name: make_action_source(cfg, self.wm.features, self.device)
                        for name, cfg in self.job.action_sources.items()}
        # The driver hands over the filter's scorer (pipeline.tasks.resolve_scorer); without
        # one, a 'module:function' in the spec is imported here.
        if scorer is None and self.job.filter is not None:
            scorer = import_scorer(self.job.filter.scorer)
        self.scorer = scorer
        log.info("replica ready: model %s on %s", self.wm.checkpoint_hash, self.device)

    def ready(self) -> str:
        """"" once the model is loaded, else the user error that stopped it (bad checkpoint...)."""
        return self.error

    def roll_json(self, group: str) -> tuple[list[str], str]:
        """Group JSON (a list of EpisodeSpecs) -> (EpisodeRecord JSONs, ""); on a user error
        ([], the message)."""
        try:
            if self.error:
                raise SpecError(self.error)
            specs = [EpisodeSpec.model_validate(item) for item in json.loads(group)]
            return [r.model_dump_json() for r in self.roll_group(specs)], ""
        except SpecError as error:
            return [], str(error)

    def roll_group(self, specs: list[EpisodeSpec]) -> list[EpisodeRecord]:
        """Roll a group in lockstep and commit every episode not committed yet."""
        existing = [read_commit(self.out, s.episode_id) for s in specs]
        if all(r is not None for r in existing):
            return [r for r in existing if r is not None]
        start = time.perf_counter()
        frames, state, actions, labels = self.rollout(specs)
        records = []
        for row, spec in enumerate(specs):
            record = existing[row]
            if record is None:  # rolled again only to keep the batch identical; already stored
                episode = self._episode(spec, row, frames, state, actions, labels[row])
                score, success = (None, None) if self.scorer is None else score_episode(self.scorer, episode)
                record = write_episode(self.out, episode, spec.index, self.features, score=score,
                                       success=success)
            records.append(record)
        log.debug("group %s..%s: %d episodes x %d steps in %.2fs", specs[0].episode_id,
                  specs[-1].episode_id, len(specs), specs[0].horizon, time.perf_counter() - start)
        return records

    def rollout(self, specs: list[EpisodeSpec]
                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, list[str]]:
        """Frames (B, T, V, H, W, 3) uint8, state (B, T, S) or None, actions (B, T, A), source labels.

        Step t records the frame the policy saw and the action it took there (Diffusion Policy /
        LeRobot convention), so T frames need T-1 model steps.
        """
        horizon = specs[0].horizon
        frames0, state0 = load_init([s.init_ref for s in specs], self.wm.features)  # (B, V, H, W, 3)
        self.wm.reset(frames0, state=state0, seeds=[s.seed for s in specs])
        b = len(specs)
        frames = np.empty((b, horizon, *frames0.shape[1:]), np.uint8)
        actions = np.empty((b, horizon, self.wm.features.action_dim), np.float32)
        state = np.empty((b, horizon, self.wm.features.state_dim), np.float32) if self.wm.has_state else None
        frames[:, 0] = frames0
        obs = Observation(frames0, state0)
        driver = GroupActions(self.sources, self.wm.features.action_dim)
        driver.reset(specs, obs)
        for t in range(horizon):
            actions[:, t] = driver.actions(t, obs)
            if t == horizon - 1:
                break
            if self.abandon is not None and self.abandon():
                raise GroupAbandoned(f"group {specs[0].episode_id}.. abandoned at step {t}")
            res = self.wm.step(actions[:, t])
            frames[:, t + 1] = res.frames
            if state is not None and res.state is not None:
                state[:, t + 1] = res.state
            obs = Observation(res.frames, res.state)
        if state is not None:
            # Without a recorded initial state, the first predicted one stands in for it.
            state[:, 0] = state0 if state0 is not None else state[:, min(1, horizon - 1)]
        return frames, state, actions, [driver.describe(r) for r in range(b)]

    def _episode(self, spec: EpisodeSpec, row: int, frames: np.ndarray, state: np.ndarray | None,
                 actions: np.ndarray, label: str) -> Episode:
        meta = EpisodeMeta(episode_id=spec.episode_id, length=spec.horizon, task=self.job.task,
                           source=label, seed=spec.seed, model_hash=self.wm.checkpoint_hash,
                           job_id=spec.job_id, fps=self.features.fps,
                           info={"index": spec.index, "init": spec.init_ref,
                                 "action_source": spec.action_source})
        cams = self.features.camera_names
        return Episode(frames={c: frames[row, :, v] for v, c in enumerate(cams)}, action=actions[row],
                       meta=meta, state=None if state is None else state[row])
