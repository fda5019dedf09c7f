"""Exports to s3://: build the dataset on local disk, then upload it with its validity markers
(LeRobot's meta/info.json, the Zarr root's .zgroup/.zattrs) last, so that a reader never finds
half a dataset it would trust (workers.storage.publish_dir)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from schemas import SpecError
from workers import storage

log = logging.getLogger(__name__)


def export_to_remote(dest: str, *, overwrite: bool, write: Callable[[Path], object]) -> str:
    """Call write(local_dir) to build the export locally, then upload it to `dest`."""
    if storage.exists(dest) and not overwrite:
        raise SpecError(f"{dest} already exists; choose a new destination or pass --overwrite.")
    staged = storage.staging_dir(dest)  # a local path whose name is dest's last component
    try:
        write(Path(staged))
    except BaseException:
        storage.discard_staged(staged)
        raise
    storage.publish_dir(staged, dest, replace=True)
    log.info("uploaded the export to %s", dest)
    return dest
