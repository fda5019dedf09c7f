"""The output lease: one run at a time owns a job's output (OUT/lease.json).

Two runs on one output undo each other: a run's cleanups delete what looks abandoned (local
staging directories, shards no part record names), which is exactly what the other run is still
writing. So the driver takes the lease before it touches the output, renews it while it runs and
releases it at the end, and the cleanups require it (`Lease.verify`).

    take     create lease.json exclusively (local: hard link; S3: PUT If-None-Match: *)
    renew    every TTL/4, a compare-and-swap on the version this run last wrote (local: under a
             flock; S3: PUT If-Match: <ETag>) that moves `expires` one TTL ahead
    release  a compare-and-swap delete

A run that finds the lease held is refused with the owner named (LeaseHeld), unless
- the lease expired: its run stopped renewing it (killed, or cut off from storage);
- the owner ran on this machine and its process is gone (a SIGKILLed driver): no need to wait;
- `take_over=True` (`iws generate --take-over`): the user says the owner is dead.
A run whose lease was taken over learns it at its next renewal or check and stops (LeaseLost).
Expiry compares the hosts' wall clocks, which must agree to well under TTL_S (NTP does).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NoReturn

from pydantic import ValidationError

from schemas import LeaseRecord, SpecError
from sim_model import storage

log = logging.getLogger(__name__)

LEASE_FILE = "lease.json"
TTL_S = 120.0
TAKE_ATTEMPTS = 5


class LeaseHeld(SpecError):
    """Another run owns the output."""


class LeaseLost(SpecError):
    """This run's lease was taken over or expired: it must stop writing the output."""


def lease_uri(out: str) -> str:
    return storage.join(out, LEASE_FILE)


class Lease:
    """This run's hold on one output. `renew` keeps it; `verify` (reads storage) and
    `raise_if_lost` (no I/O) prove it before anything is deleted or committed."""

    def __init__(self, out: str, record: LeaseRecord, version: str) -> None:
        self.out, self.record = out, record
        self._version = version
        self._lost: str | None = None
        self._lock = threading.Lock()  # the renewal thread and the driver share the version

    def renew(self) -> None:
        """Move the expiry one TTL ahead; LeaseLost if another run took the output over."""
        with self._lock:
            self._raise_if_flagged()
            record = self.record.model_copy(update={"expires": _iso(_now() + _ttl(self.record))})
            version = storage.replace_if(lease_uri(self.out), record.model_dump_json(indent=1), self._version)
            if version is None:
                self._lose()
            self.record, self._version = record, version

    def verify(self) -> None:
        """Read the lease back: LeaseLost unless it is still this run's and unexpired."""
        with self._lock:
            self.raise_if_lost()
            current = storage.read_versioned(lease_uri(self.out))
            if current is None or current[1] != self._version:
                self._lose()

    @property
    def lost(self) -> bool:
        """Whether the lease was taken over, released or has expired (no I/O)."""
        return self._lost is not None or _now() >= _parse(self.record.expires)

    def raise_if_lost(self) -> None:
        """LeaseLost if a renewal found the lease taken, or it expired unrenewed."""
        self._raise_if_flagged()
        if _now() >= _parse(self.record.expires):
            raise LeaseLost(f"this run's lease on {self.out} expired at {self.record.expires} before it "
                            "could be renewed (is the storage reachable?); the run stops so that another "
                            "run may take the output over safely. Rerun to resume.")

    def release(self) -> None:
        """Give the output up; leaves the lease alone when it is no longer this run's."""
        with self._lock:
            if self._lost is None and storage.remove_if(lease_uri(self.out), self._version):
                log.debug("released the lease on %s", self.out)
            self._lost = self._lost or f"this run released its lease on {self.out}"

    def _raise_if_flagged(self) -> None:
        if self._lost is not None:
            raise LeaseLost(self._lost)

    def _lose(self) -> NoReturn:
        current = _read(self.out)
        by = "removed" if current is None else f"taken over by {_owner(current[0])}"
        self._lost = (f"this run's lease on {self.out} was {by}; the run stops writing there. Two runs "
                      "must not share an output: let the other one finish, then rerun to check.")
        raise LeaseLost(self._lost)


def acquire(out: str, job: str, *, ttl_s: float = TTL_S, take_over: bool = False) -> Lease:
    """Take the output's lease for a run of `job`; LeaseHeld naming the owner if another run has
    it (see the module docstring for when a held lease is taken over instead)."""
    uri = lease_uri(out)
    record = _new_record(job, ttl_s)
    payload = record.model_dump_json(indent=1)
    for _ in range(TAKE_ATTEMPTS):
        version = storage.create_versioned(uri, payload)
        if version is not None:
            return Lease(out, record, version)
        current = _read(out)
        if current is None:
            continue  # released meanwhile: try to create it again
        held, held_version = current
        reason = _takeover_reason(held, take_over)
        if reason is None:
            raise LeaseHeld(_held_message(out, held))
        version = storage.replace_if(uri, payload, held_version)
        if version is not None:
            log.warning("took over %s from %s: %s", out, _owner(held), reason)
            return Lease(out, record, version)
    raise LeaseHeld(f"the lease on {out} changed hands {TAKE_ATTEMPTS} times while this run tried to "
                    "take it: are several runs starting on this output? Retry in a minute.")


@contextlib.contextmanager
def hold(out: str, job: str, *, ttl_s: float = TTL_S, renew_every_s: float | None = None,
         take_over: bool = False) -> Iterator[Lease]:
    """Hold the output's lease for the block: taken at entry, renewed by a background thread
    (every `renew_every_s`, default TTL/4), released at exit however the block ends."""
    lease = acquire(out, job, ttl_s=ttl_s, take_over=take_over)
    stop = threading.Event()
    renewer = threading.Thread(target=_keep_renewed, args=(lease, stop, renew_every_s or ttl_s / 4),
                               name="iws-lease-renewal", daemon=True)
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join(timeout=30)
        try:
            lease.release()
        except SpecError as error:  # unreachable storage: the lease expires by itself
            log.warning("could not release the lease on %s (%s); it expires at %s", out, error,
                        lease.record.expires)


def _keep_renewed(lease: Lease, stop: threading.Event, every_s: float) -> None:
    while not stop.wait(every_s):
        try:
            lease.renew()
        except LeaseLost as error:
            log.error("%s", error)
            return
        except SpecError as error:  # storage unreachable for now: retried until the lease expires
            log.warning("could not renew the lease on %s: %s", lease.out, error)


def _read(out: str) -> tuple[LeaseRecord | None, str] | None:
    """The lease on `out` (None for a file that is not a valid lease) and its version."""
    current = storage.read_versioned(lease_uri(out))
    if current is None:
        return None
    try:
        return LeaseRecord.model_validate_json(current[0]), current[1]
    except ValidationError:
        return None, current[1]


def _takeover_reason(held: LeaseRecord | None, take_over: bool) -> str | None:
    if held is None:
        return "--take-over was given" if take_over else None
    if _now() >= _parse(held.expires):
        return f"its lease expired at {held.expires}"
    if _owner_is_gone(held):
        return f"its process {held.pid} on this machine has ended"
    if take_over:
        return "--take-over was given"
    return None


def _held_message(out: str, held: LeaseRecord | None) -> str:
    if held is None:
        return (f"{lease_uri(out)} is not a valid lease (damaged, or written by something else). If "
                "no run is using the output, rerun with --take-over.")
    left = (_parse(held.expires) - _now()).total_seconds()
    return (f"{out} is in use by another run: {_owner(held)}, whose lease is valid until "
            f"{held.expires} (in {left:.0f} s; that run renews it while it lives). Two runs on one "
            "output would delete each other's unfinished episodes. Wait for that run to finish; if "
            "it is dead, rerun once its lease has expired, or now with --take-over (a run that is "
            "in fact still alive then stops at its next renewal).")


def _owner(held: LeaseRecord | None) -> str:
    if held is None:
        return "something that is not a valid lease"
    return f"job '{held.job}' on host {held.host} (pid {held.pid}, started {held.started})"


def _new_record(job: str, ttl_s: float) -> LeaseRecord:
    now = _now()
    return LeaseRecord(token=uuid.uuid4().hex, job=job, host=socket.gethostname(), pid=os.getpid(),
                       machine=_machine(), process_start=process_start(os.getpid()) or "",
                       started=_iso(now), expires=_iso(now + timedelta(seconds=ttl_s)), ttl_s=ttl_s)


def _owner_is_gone(held: LeaseRecord) -> bool:
    """True only when the owner shares our process table and its process has provably ended."""
    machine = _machine()
    if not machine or held.machine != machine:
        return False
    start = process_start(held.pid)
    return start is None or (bool(held.process_start) and start != held.process_start)


def _machine() -> str:
    """Boot id + pid namespace ('' where /proc does not tell): equal values mean one process table."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot; None if it does not exist (or is a
    zombie), '' where /proc does not tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3, starttime 22
    return None if fields[0] == "Z" else fields[19]


def _ttl(record: LeaseRecord) -> timedelta:
    return timedelta(seconds=record.ttl_s)


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text)
