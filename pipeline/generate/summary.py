"""OUT/summary.md: what a finished job made, for a person: episodes, frames, wall time and
speed, scorer statistics when a scorer ran, the distribution of plausibility when the task's
checks ran, the model's checkpoint hash, where the datasets are, the preview, and the command
that opens the LeRobot copy in lerobot's viewer.

Every count comes from the run manifest written beside it, the score statistics from the
committed episodes' records; speed is this run's (a resumed run counts only the frames it made
itself).
"""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.generate.outputs import PREVIEW_FILE, SUMMARY_FILE, lerobot_repo_id
from schemas import EpisodeRecord, JobSpec, RunManifest
from sim_model import storage


@dataclass(frozen=True)
class RunStats:
    """What only the driver knows about this run, beside the manifest."""

    wall_s: float  # from the start of `run_job` to the end of the exports
    frames_made: int  # by this run (a resumed run skips committed episodes)
    resumed: int  # episodes already committed when this run began
    kept: int  # episodes the filter let into the datasets


def viz_command(job: str, lerobot_uri: str) -> str:
    """The shell command that opens episode 0 of the job's LeRobot copy in lerobot's viewer."""
    root = lerobot_uri
    fetch = ""
    if storage.is_remote(lerobot_uri):  # the viewer reads a local directory
        root = f"{job}-lerobot"
        fetch = f"aws s3 sync {shlex.quote(lerobot_uri)} {shlex.quote(root)} && "
    return (f"{fetch}lerobot-dataset-viz --repo-id {lerobot_repo_id(job)} --root {shlex.quote(root)} "
            "--episode-index 0")


def _scores(spec: JobSpec, records: Sequence[EpisodeRecord], kept: int) -> list[str]:
    if spec.filter is None or spec.filter.scorer is None:
        return []
    scores = [r.score for r in records if r.score is not None]
    successes = sum(bool(r.success) for r in records)
    n = len(records)
    lines = ["", "## Scores", "",
             f"Scorer `{spec.filter.scorer}`, filter mode `{spec.filter.mode}`: {kept} of {n} "
             "episodes in the datasets.", ""]
    if not scores:
        return lines + ["No episode was scored."]
    std = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return lines + [
        "| scored | mean | std | min | median | max | successes |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {len(scores)} | {statistics.fmean(scores):.4f} | {std:.4f} | {min(scores):.4f} | "
        f"{statistics.median(scores):.4f} | {max(scores):.4f} | {successes} ({successes / n:.0%}) |",
    ]


PLAUSIBILITY_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def _plausibility(spec: JobSpec, records: Sequence[EpisodeRecord]) -> list[str]:
    """The distribution of the episodes' plausibility (the task's object checks), when it ran."""
    values = sorted(r.plausibility for r in records if r.plausibility is not None)
    if not values:
        return []
    rule = spec.filter.plausibility if spec.filter is not None else None
    threshold = 0.0 if rule is None else rule.min
    below = sum(v < threshold for v in values)
    fate = "left out of the datasets" if rule is not None and rule.mode == "drop" else "flagged in the index"
    counts = [sum(lo <= v < hi or (hi == PLAUSIBILITY_BINS[-1] and v == hi) for v in values)
              for lo, hi in zip(PLAUSIBILITY_BINS, PLAUSIBILITY_BINS[1:], strict=False)]
    ranges = " | ".join(f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(PLAUSIBILITY_BINS, PLAUSIBILITY_BINS[1:], strict=False))
    tenth = values[int(0.1 * (len(values) - 1))]
    return ["", "## Plausibility", "",
            "The task's own object checks of each episode's frames, its worst probed frame (1: "
            f"every probe looks like the task's real frames): {below} of {len(values)} below "
            f"{threshold:g}, {fate}.", "",
            "| checked | mean | min | 10th pct | median | max |", "|---:|---:|---:|---:|---:|---:|",
            f"| {len(values)} | {statistics.fmean(values):.3f} | {values[0]:.3f} | {tenth:.3f} | "
            f"{statistics.median(values):.3f} | {values[-1]:.3f} |", "",
            f"| plausibility | {ranges} |", "|---|" + "---:|" * len(counts),
            "| episodes | " + " | ".join(str(c) for c in counts) + " |"]


def summary_markdown(spec: JobSpec, manifest: RunManifest, records: Sequence[EpisodeRecord],
                     stats: RunStats, *, preview: bool = True) -> str:
    """The summary of a finished job; `records`: its committed episodes."""
    n = manifest.episodes_committed
    if stats.frames_made:
        speed = f"{stats.frames_made} frames in this run, {stats.frames_made / max(stats.wall_s, 1e-9):.1f} frames/s"
    else:
        speed = "nothing left to make: every episode was committed by an earlier run"
    resumed = f"; {stats.resumed} were committed by an earlier run" if stats.resumed else ""
    rows = [
        ("episodes", f"{n} of {manifest.episodes_requested} requested{resumed}"),
        ("frames", f"{manifest.frames}"),
        ("wall time", f"{stats.wall_s:.1f} s"),
        ("speed", speed),
        ("model", f"`{spec.model}`, checkpoint hash `{manifest.model_hash}`"),
        ("started / finished", f"{manifest.started} / {manifest.finished}"),
    ]
    rows += [(f"dataset ({fmt})", f"`{uri}`") for fmt, uri in manifest.datasets.items()]
    if manifest.index is not None:
        rows.append(("episode index", f"`{manifest.index}` (Parquet, one row per episode)"))
    lines = [f"# {spec.name}", "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in rows]
    lines += _scores(spec, records, stats.kept)
    lines += _plausibility(spec, records)
    lines += ["", "## Preview", ""]
    lines.append(f"The first episodes, step by step: ![preview]({PREVIEW_FILE})" if preview else
                 "No preview: the datasets hold no episode.")
    if "lerobot" in manifest.datasets:
        lines += ["", "## Open the LeRobot copy", "", "```bash",
                  viz_command(spec.name, manifest.datasets["lerobot"]), "```"]
    return "\n".join(lines) + "\n"


def write_summary(spec: JobSpec, manifest: RunManifest, records: Sequence[EpisodeRecord], stats: RunStats,
                  *, preview: bool = True) -> str:
    """Write OUT/summary.md; returns its URI."""
    uri = storage.join(spec.output.path, SUMMARY_FILE)
    storage.write_atomic(uri, summary_markdown(spec, manifest, records, stats, preview=preview))
    return uri
