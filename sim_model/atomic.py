"""Moved to sim_model.storage.atomic. This name stays only for modules not moved yet
(sim_model/train/, experiments/); new code imports sim_model.storage.atomic."""

from sim_model.storage.atomic import *  # noqa: F403
