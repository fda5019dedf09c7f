"""PushT as a task of the registry (pipeline.tasks.registry): gym-pusht play, the pixel coverage
scorer, T-mask checks, gym-pusht as ground truth, the pixel demonstrator and the bundled model.

Cheap to import: each method imports the module it needs (gym-pusht, pymunk, shapely) when called.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.pusht.features import pusht_features
from schemas import FeatureSpec

if TYPE_CHECKING:
    import numpy as np

    from pipeline.tasks.base import CollectProgress, SideScore, StepProgress
    from schemas import EpisodeSpec
    from sim_model.evaluate import FrameAnalyzer
    from workers.actions.base import ActionSource
    from workers.scoring import PlausibilityCheck, Scorer


class PushT:
    """Push the T-shaped block onto the green target, in gym-pusht 0.1.8 (96 x 96 pixels)."""

    name = "pusht"
    summary = "gym-pusht with scripted play primitives"
    scorer_name = "pusht_coverage"
    demonstrator = "pipeline.pusht.demonstrator:PushTDemonstrator"
    bundled_model = "pusht"

    def features(self) -> FeatureSpec:
        return pusht_features()

    def add_collect_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.description = (
            "Scripted play in gym-pusht. Primitives: push (approach a point of the T, push it "
            "100-160 of 512 canvas units), rotate (turn it 25-35 degrees by pushing an arm), contact "
            "(small random touches), roam (motion that avoids the block), chain (a random sequence "
            "of those within one episode). Each episode plays one primitive drawn from --mix, "
            "repeated to fill --steps, and is kept only when it did what it means. Deterministic "
            "for a seed, whatever --workers.")
        parser.add_argument("--resolution", type=int, default=96,
                            help="square frame size in pixels (default 96, gym-pusht's own)")
        parser.add_argument("--workers", type=int, default=None, help="worker processes, one env "
                            "each (default: the CPU cores this process may use)")
        parser.add_argument("--mix", default=None,
                            help="primitive weights, e.g. push=0.4,rotate=0.2,contact=0.1,roam=0.1,"
                            "chain=0.2 (default: push=0.35,rotate=0.25,contact=0.1,roam=0.1,chain=0.2)")

    def collect(self, args: argparse.Namespace, out: str, progress: CollectProgress) -> str:
        from pipeline.pusht import collect as collector
        from pipeline.tasks.collecting import run_collect

        return run_collect(collector, args, out, progress)

    def scorer(self) -> Scorer:
        from pipeline.pusht.scorer import score_episode

        return score_episode

    def plausibility(self) -> PlausibilityCheck:
        from pipeline.pusht.scorer import plausibility

        return plausibility

    def object_analyzer(self) -> FrameAnalyzer:
        from pipeline.pusht.vision import PushTAnalyzer

        return PushTAnalyzer()

    def roll_ground_truth(self, policy: ActionSource, specs: Sequence[EpisodeSpec],
                          features: FeatureSpec, horizon: int, batch_size: int, videos: int,
                          progress: StepProgress | None = None,
                          ) -> tuple[list[SideScore], list[np.ndarray]]:
        from pipeline.pusht.truth import evaluate_in_pusht

        return evaluate_in_pusht(policy, specs, features, horizon, batch_size, videos, progress)
