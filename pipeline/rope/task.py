"""Rope routing as a task of the registry (pipeline.tasks.registry): the pymunk table's play, the
through-the-clip pixel scorer, the rope's pixel checks, the table as ground truth and the router
demonstrator, and its bundled model (sim_model/bundled/rope; card: docs/models/rope.md).

Cheap to import: each method imports the module it needs (pymunk, PIL) when called.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.rope.features import rope_features
from schemas import FeatureSpec

if TYPE_CHECKING:
    import numpy as np

    from pipeline.tasks.base import CollectProgress, SideScore, StepProgress
    from schemas import EpisodeSpec
    from sim_model.evaluate import FrameAnalyzer
    from workers.actions.base import ActionSource
    from workers.scoring import PlausibilityCheck, Scorer


class Rope:
    """Route a rope held at one end through a two-post clip, seen from above (96 x 96 pixels),
    2-D actions: the effector's target."""

    name = "rope"
    summary = "rope routing in pymunk (deformable), one camera, scripted play"
    scorer_name = "rope_inserted"
    demonstrator = "pipeline.rope.demonstrator:RopeDemonstrator"
    bundled_model = "rope"

    def features(self) -> FeatureSpec:
        return rope_features()

    def add_collect_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.description = (
            "Scripted play on a pymunk table: a rope of 20 linked segments held at one end by an "
            "effector, a clip of two posts; camera top. Each episode plays primitives drawn from "
            "--mix until --steps: route (pull the rope through the clip's gap), swing (pull it past "
            "beside a post), graze (at the gap's edge: either outcome), roam (random waypoints). "
            "Deterministic for a seed, whatever --workers.")
        parser.add_argument("--resolution", type=int, default=96,
                            help="square frame size in pixels (default 96)")
        parser.add_argument("--workers", type=int, default=None, help="worker processes (default: "
                            "the CPU cores this process may use)")
        parser.add_argument("--mix", default=None, help="primitive weights, e.g. route=0.5,swing=0.5 "
                            "(default: route=0.35,swing=0.25,graze=0.2,roam=0.2)")

    def collect(self, args: argparse.Namespace, out: str, progress: CollectProgress) -> str:
        from pipeline.rope import collect as collector
        from pipeline.tasks.collecting import run_collect

        return run_collect(collector, args, out, progress)

    def scorer(self) -> Scorer:
        from pipeline.rope.scorer import score_episode

        return score_episode

    def plausibility(self) -> PlausibilityCheck:
        from pipeline.rope.scorer import plausibility

        return plausibility

    def object_analyzer(self) -> FrameAnalyzer:
        from pipeline.rope.vision import RopeAnalyzer

        return RopeAnalyzer()

    def roll_ground_truth(self, policy: ActionSource, specs: Sequence[EpisodeSpec],
                          features: FeatureSpec, horizon: int, batch_size: int, videos: int,
                          progress: StepProgress | None = None,
                          ) -> tuple[list[SideScore], list[np.ndarray]]:
        from pipeline.rope.truth import evaluate_in_rope

        return evaluate_in_rope(policy, specs, features, horizon, batch_size, videos, progress)
