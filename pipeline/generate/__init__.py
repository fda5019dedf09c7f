"""Generation jobs: expand a JobSpec into episodes, roll them on Ray replicas, commit, consolidate."""

from pipeline.generate.driver import Progress, run_job
from pipeline.generate.spec import load_job

__all__ = ["Progress", "load_job", "run_job"]
