"""The lease that makes one run at a time the owner of a job's output (OUT/lease.json)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LeaseRecord(BaseModel):
    """Who owns an output now and until when; written and renewed by workers/lease.py."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(description="Random id of the owning run; only its holder renews or releases the lease.")
    job: str = Field(description="Name of the job the owning run is running.")
    host: str = Field(description="Host name of the owning driver.")
    pid: int = Field(ge=0, description="Process id of the owning driver on `host`.")
    machine: str = Field(default="", description="Boot id and pid namespace of the owner's process table: "
                         "where this equals ours, `pid` can be checked from here ('' if unknown).")
    process_start: str = Field(default="", description="Start time of the owner process as the kernel "
                               "reports it, so a reused pid is not mistaken for the owner ('' if unknown).")
    started: str = Field(description="ISO-8601 UTC time the owning run took the lease.")
    expires: str = Field(description="ISO-8601 UTC time after which another run may take the output over.")
    ttl_s: float = Field(gt=0, description="Seconds each renewal extends the lease by.")
