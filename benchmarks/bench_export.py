"""Export speed and size: LeRobot v3.0 (AV1 / H.264, one writer or several), LeRobot v2.1
(H.264, per-episode files) and DP Zarr.

Collects gym-pusht episodes (scripted play, the real task's frames) at each resolution into an
EpisodeStore (cached between runs), then exports it and reports frames per wall-second, frames
per CPU-second (this process and its worker processes), bytes per frame on disk and, for the
lossy videos, the decoded pixels' error against the source.

    .venv/bin/python benchmarks/bench_export.py [--episodes 20 --steps 100 --resolutions 96 128]

Results and the single-writer decision: benchmarks/results/export.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its settings per video otherwise


def collect_source(root: Path, resolution: int, episodes: int, steps: int) -> Path:
    from pipeline.pusht.collect import CollectConfig, collect, open_output

    path = root / f"pusht_{resolution}_{episodes}x{steps}.zarr"
    if not path.exists():
        config = CollectConfig(episodes=episodes, steps=steps, resolution=resolution, seed=0)
        collect(config, open_output(config, path))
    return path


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _bytes(path: Path, pattern: str = "**/*") -> int:
    return sum(p.stat().st_size for p in path.glob(pattern) if p.is_file())


def pixel_error(source_path: Path, lerobot_root: Path, episodes: int = 3) -> tuple[float, float]:
    """Mean |error| (grey levels) and PSNR (dB) of decoded frames over the first episodes."""
    from sim_model.data.formats import open_dataset
    from sim_model.data.store import EpisodeStore

    source, decoded = EpisodeStore.open(source_path), open_dataset(lerobot_root)  # v2.1: converted
    diffs = [decoded.episode(i).frames["top"].astype(np.float64) - source.episode(i).frames["top"]
             for i in range(min(episodes, len(source)))]
    diff = np.concatenate([d.ravel() for d in diffs])
    return float(np.abs(diff).mean()), float(10 * np.log10(255**2 / np.mean(diff**2)))


def run_case(name: str, source: Path, out: Path, export) -> dict[str, float | str]:
    shutil.rmtree(out, ignore_errors=True)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    export(source, out)
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    from sim_model.data.store import EpisodeStore

    frames = EpisodeStore.open(source).n_frames
    row: dict[str, float | str] = {"case": name, "frames": frames, "wall_fps": frames / wall,
                                   "cpu_fps": frames / cpu, "bytes": _bytes(out) / frames}
    if (out / "videos").is_dir():
        row["video_bytes"] = _bytes(out / "videos") / frames
        row["err"], row["psnr"] = pixel_error(source, out)
    logging.info("%s: %s", name, row)
    return row


def cases(workers: list[int]) -> dict[str, object]:
    from sim_model.data.formats.lerobot_v21 import export_lerobot_v21
    from sim_model.data.formats.lerobot_writer import export_lerobot
    from sim_model.data.formats.zarr_dp_writer import export_zarr_dp

    out: dict[str, object] = {}
    for n in workers:
        out[f"lerobot AV1, {n} writer(s)"] = (
            lambda s, d, n=n: export_lerobot(s, d, repo_id="bench/x", workers=n))
    out["lerobot H.264, 1 writer"] = lambda s, d: export_lerobot(s, d, repo_id="bench/x",
                                                                   vcodec="h264")
    for n in workers:
        out[f"lerobot v2.1 H.264, {n} writer(s)"] = (
            lambda s, d, n=n: export_lerobot_v21(s, d, workers=n))
    out["zarr-dp (blosc-zstd3, 1 frame/chunk)"] = lambda s, d: export_zarr_dp(s, d)
    return out


def table(rows: list[dict[str, float | str]], resolution: int) -> str:
    lines = [f"| {resolution}x{resolution} | frames | frames/s (wall) | frames/CPU-s | bytes/frame "
             "(all files) | video bytes/frame | mean abs err | PSNR dB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        video = f"{r['video_bytes']:,.0f}" if "video_bytes" in r else "-"
        err = f"{r['err']:.2f}" if "err" in r else "lossless"
        psnr = f"{r['psnr']:.1f}" if "psnr" in r else "inf"
        lines.append(f"| {r['case']} | {r['frames']:,} | {r['wall_fps']:,.0f} | {r['cpu_fps']:,.0f} "
                     f"| {r['bytes']:,.0f} | {video} | {err} | {psnr} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--resolutions", type=int, nargs="+", default=[96, 128])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/iws_bench_export"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("libav", "root", "lerobot", "pipeline.pusht"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    import lerobot.datasets.lerobot_dataset  # noqa: F401  (import cost kept out of the timings)

    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("IWS_CACHE_DIR", str(args.workdir / "cache"))  # v2.1 read back via v3.0
    print(f"{args.episodes} gym-pusht episodes x {args.steps} steps per resolution, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    for resolution in args.resolutions:
        source = collect_source(args.workdir, resolution, args.episodes, args.steps)
        rows = [run_case(name, source, args.workdir / f"out_{resolution}", export)
                for name, export in cases(args.workers).items()]
        print(table(rows, resolution))
    print(f"load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
