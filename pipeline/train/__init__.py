"""Training on Ray: `iws train --workers N` on Ray Train (cluster.py) and `iws submit ... train`,
a training stage as a Ray job (submit.py). The stages themselves are sim_model.train's."""
