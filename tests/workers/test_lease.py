"""The output lease (workers/lease.py): one run owns a job's output at a time, on a local disk and
on a real S3 server (SeaweedFS, tests/fixtures/s3.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from sim_model import storage
from tests.fixtures.ray_cluster import REPO_ROOT
from workers import lease
from workers.lease import LeaseHeld, LeaseLost


def test_a_second_run_is_refused_with_the_owner_named(out: str) -> None:
    first = lease.acquire(out, job="tiny", ttl_s=60)
    with pytest.raises(LeaseHeld) as refused:
        lease.acquire(out, job="other")
    message = str(refused.value)
    for text in (out, "job 'tiny'", socket.gethostname(), f"pid {os.getpid()}", "valid until",
                 "--take-over"):
        assert text in message, message
    first.release()
    assert not storage.exists(lease.lease_uri(out))
    lease.acquire(out, job="other").release()  # free again once released


def test_an_expired_lease_is_taken_over_and_its_old_owner_learns_it(out: str) -> None:
    old = lease.acquire(out, job="tiny", ttl_s=0.5)
    time.sleep(0.7)  # the old owner stopped renewing: stalled, or on a machine we cannot see
    new = lease.acquire(out, job="tiny")
    with pytest.raises(LeaseLost, match="taken over"):
        old.renew()
    old.release()  # no longer the owner: must leave the new lease alone
    new.verify()
    new.release()


def test_take_over_replaces_a_live_lease(out: str) -> None:
    old = lease.acquire(out, job="tiny", ttl_s=60)
    new = lease.acquire(out, job="tiny", take_over=True)
    with pytest.raises(LeaseLost, match="taken over"):
        old.verify()
    new.verify()
    new.release()


def test_the_lease_of_a_dead_run_on_this_machine_is_taken_at_once(out: str) -> None:
    """A driver killed outright (SIGKILL, OOM) never releases its lease; on the same machine its
    process is seen to be gone, so a rerun need not wait for the lease to expire."""
    code = (f"from workers import lease; lease.acquire({out!r}, job='tiny', ttl_s=600); "
            "import os; os._exit(0)")  # exits holding the lease, as a killed driver does
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    taken = lease.acquire(out, job="tiny", ttl_s=60)
    taken.verify()
    taken.release()


def test_a_held_lease_is_renewed_while_its_run_lives(out: str) -> None:
    with lease.hold(out, job="tiny", ttl_s=1.0, renew_every_s=0.1) as held:
        time.sleep(1.5)  # past the first expiry: only renewal keeps it
        with pytest.raises(LeaseHeld):
            lease.acquire(out, job="other")
        held.raise_if_lost()
        held.verify()
    assert not storage.exists(lease.lease_uri(out)), "released when the run ends"
