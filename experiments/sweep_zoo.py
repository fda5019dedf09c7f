"""Sweep policies of graded skill, for ranking in the sweep model (issue 31's second regime): the
pixel sweeper, degraded versions of it, and trivial baselines (experiments.policy_zoo's, on both
pushers' 4-D targets), as `module:Class` policies, e.g. `experiments.sweep_zoo:SweepNoisy30` (run
from the repository root so `experiments` imports).

    iws eval ranking --model sweep --init data/sweep_heldout_starts.zarr --ground-truth sweep \\
        $(for p in SweepDemonstrator SweepNoisy30 SweepNoisy90 SweepSluggish SweepStill SweepRandom; \\
          do echo --policy experiments.sweep_zoo:$p; done) --out runs/ranking_sweep
"""

from __future__ import annotations

from experiments.policy_zoo import NoisyMixin, Random, SluggishMixin, Still
from pipeline.sweep.demonstrator import SweepDemonstrator
from pipeline.sweep.env import WORKSPACE


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
