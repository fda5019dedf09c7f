"""Ray's Jobs API for what `iws submit` sends to a cluster: a generation job (generate/submit.py)
and a training stage (train/submit.py) each become a `Submission` (entrypoint, working directory
to upload), which is submitted, followed and stopped here the same way."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from schemas import SpecError

log = logging.getLogger(__name__)

# Never uploaded: version control, virtual environments, caches. Ray's own upload limit is 100 MiB.
EXCLUDES = [".git", ".venv", "venv", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache"]
STOP_WAIT_S = 60.0


@dataclass(frozen=True)
class Submission:
    """What `iws submit` hands to the Jobs API."""

    job_name: str
    entrypoint: str
    working_dir: Path | None  # None: nothing is uploaded
    excludes: list[str]

    def runtime_env(self) -> dict[str, Any]:
        if self.working_dir is None:
            return {}
        return {"working_dir": str(self.working_dir), "excludes": self.excludes}


def submit(client: Any, submission: Submission) -> str:
    """Submit through a JobSubmissionClient; returns the submission id."""
    job_id = client.submit_job(entrypoint=submission.entrypoint, runtime_env=submission.runtime_env(),
                               metadata={"iws_job": submission.job_name})
    log.debug("submitted %s as %s", submission.entrypoint, job_id)
    return str(job_id)


def follow(client: Any, job_id: str, out: TextIO) -> str:
    """Copy the job's log (the driver's progress lines included) to `out` until it ends; returns
    the final status ('SUCCEEDED', 'FAILED', 'STOPPED')."""

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    asyncio.run(tail())
    return wait_until_done(client, job_id)


def wait_until_done(client: Any, job_id: str, timeout_s: float = STOP_WAIT_S) -> str:
    """Poll the job's status until it is terminal (the log stream can end a moment earlier)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.get_job_status(job_id)
        if status.is_terminal() or time.monotonic() > deadline:
            return str(status.value)
        time.sleep(0.5)


def stop(client: Any, job_id: str) -> str:
    """Ask the cluster to stop the job (SIGTERM to its driver, which writes what is committed to
    the manifest) and wait for it to end; returns the final status."""
    try:
        client.stop_job(job_id)
    except RuntimeError as error:
        raise SpecError(f"cannot stop job {job_id}: {error}") from None
    return wait_until_done(client, job_id)
