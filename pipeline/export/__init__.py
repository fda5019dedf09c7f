"""Moved to sim_model.data.formats (the data floor under the workers). Kept only for the
modules not moved yet (experiments/); new code imports sim_model.data.formats."""
