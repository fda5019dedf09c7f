"""Bimanual pile sweeping as a task of the registry (pipeline.tasks.registry): the pymunk arena's
play, the in-goal pixel scorer, the pile's pixel checks, the arena as ground truth and the broom
demonstrator, and its bundled model (docs/models/sweep.md).

Cheap to import: each method imports the module it needs (pymunk, PIL) when called.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.sweep.features import sweep_features
from schemas import FeatureSpec

if TYPE_CHECKING:
    import numpy as np

    from pipeline.tasks.base import CollectProgress, SideScore, StepProgress
    from schemas import EpisodeSpec
    from sim_model.evaluate import FrameAnalyzer
    from workers.actions.base import ActionSource
    from workers.scoring import PlausibilityCheck, Scorer


class Sweep:
    """Sweep a pile of 40-80 discs into the goal square with two pushers, seen by a top and a
    side camera (96 x 96 pixels), 4-D actions: both pushers' targets."""

    name = "sweep"
    summary = "bimanual pile sweeping in pymunk, two cameras, scripted play"
    scorer_name = "sweep_in_goal"
    demonstrator = "pipeline.sweep.demonstrator:SweepDemonstrator"
    bundled_model = "sweep"

    def features(self) -> FeatureSpec:
        return sweep_features()

    def add_collect_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.description = (
            "Scripted bimanual play in a pymunk arena: two pushers, a pile of 40-80 discs, a goal "
            "square; cameras top (orthographic) and side (perspective). Each episode plays "
            "primitives drawn from --mix until --steps: sweep (both pushers as a broom push a swath "
            "into the goal), spread (each arm cuts through the pile), roam (random waypoints per "
            "arm), cross (the arms swap sides through one point). Deterministic for a seed, "
            "whatever --workers.")
        parser.add_argument("--resolution", type=int, default=96,
                            help="square frame size of both cameras in pixels (default 96)")
        parser.add_argument("--workers", type=int, default=None, help="worker processes (default: "
                            "the CPU cores this process may use)")
        parser.add_argument("--mix", default=None, help="primitive weights, e.g. sweep=0.5,cross=0.5 "
                            "(default: sweep=0.45,spread=0.2,roam=0.15,cross=0.2)")

    def collect(self, args: argparse.Namespace, out: str, progress: CollectProgress) -> str:
        from pipeline.sweep import collect as collector
        from pipeline.tasks.collecting import run_collect

        return run_collect(collector, args, out, progress, cameras=" (cameras top, side)")

    def scorer(self) -> Scorer:
        from pipeline.sweep.scorer import score_episode

        return score_episode

    def plausibility(self) -> PlausibilityCheck:
        from pipeline.sweep.scorer import plausibility

        return plausibility

    def object_analyzer(self) -> FrameAnalyzer:
        from pipeline.sweep.vision import SweepAnalyzer

        return SweepAnalyzer()

    def roll_ground_truth(self, policy: ActionSource, specs: Sequence[EpisodeSpec],
                          features: FeatureSpec, horizon: int, batch_size: int, videos: int,
                          progress: StepProgress | None = None,
                          ) -> tuple[list[SideScore], list[np.ndarray]]:
        from pipeline.sweep.truth import evaluate_in_sweep

        return evaluate_in_sweep(policy, specs, features, horizon, batch_size, videos, progress)
