"""Where a stage's losses and held-out metrics go: `metrics.jsonl` always (one JSON record per
logging step), and on request (`iws train --log csv --log tensorboard`) `metrics.csv`, one
`step,metric,value` row per number (a long table that any spreadsheet or pandas pivots, and
that new metrics never break), and TensorBoard event files in `tensorboard/`, one scalar per
number tagged `<stage>/<metric>` (`tensorboard --logdir OUT`). Rank 0 alone writes them."""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from schemas.errors import SpecError

FORMATS = ("csv", "tensorboard")
log = logging.getLogger(__name__)


class MetricsLog:
    def __init__(self, stage_dir: Path, stage: str, formats: Iterable[str] = (), *,
                 announce_of: int | None = None) -> None:
        """`announce_of`: the stage's step count, to log a progress line at every record (where
        a progress bar cannot draw: a Ray Train worker's output reaches the driver as lines)."""
        formats = tuple(formats)
        unknown = sorted(set(formats) - set(FORMATS))
        if unknown:
            raise SpecError(f"unknown metrics log {', '.join(unknown)}; choose from {', '.join(FORMATS)}.")
        self.stage_dir, self.stage, self.announce_of = stage_dir, stage, announce_of
        self.csv = stage_dir / "metrics.csv" if "csv" in formats else None
        self.board: Any = None
        if "tensorboard" in formats:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise SpecError("--log tensorboard needs the tensorboard package: pip install "
                                "'iws[tensorboard]' (or drop --log tensorboard).") from None
            self.board = SummaryWriter(str(stage_dir / "tensorboard"))

    def write(self, record: dict[str, Any]) -> None:
        """One logging step: {"step": N, name: number, ...}."""
        with open(self.stage_dir / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
        step = int(record["step"])
        numbers = {k: float(v) for k, v in record.items()
                   if k != "step" and isinstance(v, int | float) and math.isfinite(v)}
        if self.announce_of is not None:
            log.info("%s step %d/%d: %s", self.stage, step, self.announce_of,
                     ", ".join(f"{k} {v:.4g}" for k, v in numbers.items() if "loss" in k or "psnr" in k))
        if self.csv is not None:
            new = not self.csv.is_file()
            with open(self.csv, "a", newline="") as handle:
                writer = csv.writer(handle)
                if new:
                    writer.writerow(["step", "metric", "value"])
                writer.writerows([step, name, repr(value)] for name, value in numbers.items())
        if self.board is not None:
            for name, value in numbers.items():
                self.board.add_scalar(f"{self.stage}/{name}", value, step)
            self.board.flush()

    def close(self) -> None:
        if self.board is not None:
            self.board.close()
