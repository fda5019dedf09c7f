"""The Task interface: what the pipeline asks of one robot task (PushT, ...).

A task is everything about one setup that is not the world model: the shape of its recordings,
how ground-truth play is collected, how a finished episode is scored, which object checks apply
to its frames, the simulator that scores a policy for real, a scripted demonstrator, and the
bundled model trained on it. Any number of cameras and any action size fit; nothing here
assumes PushT's one camera or 2-D actions.

Implementations import their heavy dependencies (a simulator, pygame, shapely) inside the
methods, so that the registry stays cheap for `iws --help`. Everything a method returns
(scorers above all) must be picklable by reference - a module-level function or class - since
the driver hands it to Ray workers.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import numpy as np

    from schemas import EpisodeSpec, FeatureSpec
    from sim_model.evaluate import FrameAnalyzer
    from workers.actions.base import ActionSource
    from workers.scoring import PlausibilityCheck, Scorer

CollectProgress = Callable[[int, int], None]  # (episodes in the store, episodes asked for)
StepProgress = Callable[[int], None]  # episode-steps just done


class SideScore(BaseModel):
    """One episode's score on one side of a policy evaluation: in the world model (the task's
    scorer on generated frames) or in the task's real environment (`Task.roll_ground_truth`)."""

    model_config = ConfigDict(extra="forbid")

    score: float
    success: bool
    final: float | None = Field(default=None, description="Ground truth: coverage at the last frame.")


class Task(Protocol):
    """One task. The five names below are plain class attributes in a task (read-only here);
    the CLI reads them when it builds its parser."""

    @property
    def name(self) -> str:
        """Registry key: `iws collect NAME`, `--ground-truth NAME`, `--object-mask NAME`."""
        ...

    @property
    def summary(self) -> str:
        """One line for `iws collect --help`."""
        ...

    @property
    def scorer_name(self) -> str:
        """The task's scorer in job specs and `--scorer`, e.g. 'pusht_coverage'."""
        ...

    @property
    def demonstrator(self) -> str:
        """'package.module:Class' of its scripted policy, usable as a `--policy` source."""
        ...

    @property
    def bundled_model(self) -> str | None:
        """Its model among sim_model's bundled checkpoints (its folder under sim_model/bundled/), if one ships."""
        ...

    def features(self) -> FeatureSpec:
        """What one step of the task's recordings holds, at the task's native resolution."""
        ...

    def add_collect_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The task's own flags and description for `iws collect NAME`; the command adds
        --episodes, --steps, DEST/--out, --seed, --overwrite, --resume and --no-progress."""
        ...

    def collect(self, args: argparse.Namespace, out: str, progress: CollectProgress) -> str:
        """Record ground-truth play into the episode store at `out` as `args` asks (new,
        --overwrite, or --resume of an interrupted run); call `progress` once the store is open
        and after every episode. Returns the summary the command prints."""
        ...

    def scorer(self) -> Scorer:
        """The task score of a finished episode, from what it recorded (frames, state, actions)."""
        ...

    def object_analyzer(self) -> FrameAnalyzer:
        """Object mask, shape score and health probes of one frame (`--object-mask NAME`)."""
        ...

    def plausibility(self) -> PlausibilityCheck:
        """The task's own object checks of a generated episode, from its frames alone (named
        values in [0, 1], 'plausibility' the headline; pipeline/tasks/plausibility.py), which a
        job records per episode and `filter.plausibility` thresholds."""
        ...

    def roll_ground_truth(self, policy: ActionSource, specs: Sequence[EpisodeSpec],
                          features: FeatureSpec, horizon: int, batch_size: int, videos: int,
                          progress: StepProgress | None = None,
                          ) -> tuple[list[SideScore], list[np.ndarray]]:
        """Run `policy` closed loop for `horizon` steps in the task's real environment from each
        spec's initial frame (`features`: the world model's, which the policy was built for):
        a score per spec, and first-camera frames (T+1, H, W, 3) of those with index < videos."""
        ...
