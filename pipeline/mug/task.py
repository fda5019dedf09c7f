"""Mug grasping as a task of the registry (pipeline.tasks.registry): the MuJoCo table's play with
three cameras, the two-view pixel scorer and plausibility check, the mug's pixel checks, the
table as ground truth, the pixel-only picker demonstrator and the bundled model
(docs/models/mug.md).

Cheap to import: each method imports the module it needs (MuJoCo) when called.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.mug.features import mug_features
from schemas import FeatureSpec

if TYPE_CHECKING:
    import numpy as np

    from pipeline.tasks.base import CollectProgress, SideScore, StepProgress
    from schemas import EpisodeSpec
    from sim_model.evaluate import FrameAnalyzer
    from workers.actions.base import ActionSource
    from workers.scoring import PlausibilityCheck, Scorer


class Mug:
    """Pick up a mug with a parallel-jaw gripper, seen by three cameras (front, side, wrist;
    96 x 96 pixels); 4-D actions: the gripper's target position and closure."""

    name = "mug"
    summary = "mug grasping in MuJoCo (gripper, slip), three cameras incl. wrist, scripted play"
    scorer_name = "mug_held"
    demonstrator = "pipeline.mug.demonstrator:MugDemonstrator"
    bundled_model = "mug"

    def features(self) -> FeatureSpec:
        return mug_features()

    def add_collect_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.description = (
            "Scripted play on a MuJoCo table (pip install 'iws[mug]'; offscreen rendering with "
            "OSMesa): a parallel-jaw gripper and a mug with a handle; cameras front, side and wrist. "
            "Each episode plays primitives drawn from --mix until --steps: grasp (close firmly and "
            "lift: held), weak (a weak closure: the mug slips out as it rises), offcentre (a firm "
            "grasp beside the mug's axis: it tips or slips), nudge (push the handle: the mug turns), "
            "roam (random waypoints and closures). Deterministic for a seed, whatever --workers.")
        parser.add_argument("--resolution", type=int, default=96,
                            help="square frame size in pixels, every camera (default 96)")
        parser.add_argument("--workers", type=int, default=None, help="worker processes (default: "
                            "the CPU cores this process may use)")
        parser.add_argument("--mix", default=None, help="primitive weights, e.g. grasp=0.5,weak=0.5 "
                            "(default: grasp=0.3,weak=0.2,offcentre=0.2,nudge=0.2,roam=0.1)")

    def collect(self, args: argparse.Namespace, out: str, progress: CollectProgress) -> str:
        from pipeline.mug import collect as collector
        from pipeline.tasks.collecting import run_collect

        return run_collect(collector, args, out, progress, cameras=" (cameras front, side, wrist)")

    def scorer(self) -> Scorer:
        from pipeline.mug.scorer import score_episode

        return score_episode

    def plausibility(self) -> PlausibilityCheck:
        from pipeline.mug.scorer import plausibility

        return plausibility

    def object_analyzer(self) -> FrameAnalyzer:
        from pipeline.mug.vision import MugAnalyzer

        return MugAnalyzer()

    def roll_ground_truth(self, policy: ActionSource, specs: Sequence[EpisodeSpec],
                          features: FeatureSpec, horizon: int, batch_size: int, videos: int,
                          progress: StepProgress | None = None,
                          ) -> tuple[list[SideScore], list[np.ndarray]]:
        from pipeline.mug.truth import evaluate_in_mug

        return evaluate_in_mug(policy, specs, features, horizon, batch_size, videos, progress)
