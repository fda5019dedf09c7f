"""Training throughput on Ray Train: samples/s and scaling efficiency for 1..N data-parallel
workers at a fixed global batch, and where a step's time goes.

    python benchmarks/bench_train.py                                   # dynamics, small, 96x96
    python benchmarks/bench_train.py --stage autoencoder --workers 1 2 --write benchmarks/results/train.md

Each worker count trains the same stage for --steps steps through the code `iws train --workers N`
runs (sim_model/train with a Replica, on TorchTrainer with gloo, one torch thread and one Ray CPU
per worker). Per step, on rank 0: compute (drawing the shard's batch, forward and backward) and
all-reduce (the one flat gradient all-reduce, including any wait for a slower worker); the first
--skip steps are warm-up and not counted. "data" is timed apart on the same batch size: drawing
the indices and gathering those frames into tensors, the part of compute that is not the model.
samples/s = global batch / (compute + all-reduce); efficiency = samples/s(N) / (N x samples/s(1)).
Data is a synthetic store of random-walk frames (content does not change the cost).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

EPISODE_FRAMES = 50


def make_store(path: Path, episodes: int, resolution: int, length: int = EPISODE_FRAMES,
               half: int = 4) -> None:
    """A store of `episodes` x `length` frames: a bright square (2 x `half` pixels wide)
    random-walking on a dark floor."""
    from pipeline.pusht.features import pusht_features
    from schemas import EpisodeMeta
    from sim_model.data.episode import Episode
    from sim_model.data.store import EpisodeStore

    features = pusht_features(resolution)
    store = EpisodeStore.create(path, features)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:resolution, 0:resolution]
    for index in range(episodes):
        pos = np.clip(resolution / 2 + np.cumsum(rng.normal(0, 2, (length, 2)), 0), half,
                      resolution - half).astype(np.float32)
        frames = np.full((length, resolution, resolution, 3), 30, np.uint8)
        for t in range(length):
            frames[t][(abs(xx - pos[t, 0]) < half) & (abs(yy - pos[t, 1]) < half)] = (230, 180, 40)
        action = pos * 512 / resolution
        extras = {e.name: np.zeros((length, *e.shape), e.dtype) for e in features.extras}
        meta = EpisodeMeta(episode_id=f"bench-{index:04d}", length=length, source="scripted:bench",
                           fps=features.fps)
        store.append(Episode(frames={"top": frames}, action=action, meta=meta, state=action.copy(),
                             extras=extras))


def data_seconds(data_path: str, stage: str, batch: int, window: int, repeats: int = 20) -> float:
    """Seconds to draw one shard's indices and gather its frames into tensors."""
    import torch

    from sim_model.train.data import TrainingData
    from sim_model.train.decoder_loss import batch_images

    view, _ = TrainingData.from_store(data_path).split(0.05, 0)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for _ in range(repeats):
        idx = (view.frame_indices(rng, batch) if stage == "autoencoder"
               else view.window_indices(rng, batch, window))
        batch_images(view.data, idx, torch.device("cpu"))
    return (time.perf_counter() - started) / repeats


def bench_worker(setup: dict[str, Any]) -> None:
    """One Ray Train worker: the stage as `iws train --workers N` trains it, then its timings."""
    import ray.train
    import torch

    from sim_model.train.config import TrainConfig
    from sim_model.train.parallel import Replica
    from sim_model.train.run import train_stage_worker

    torch.set_num_threads(1)
    context = ray.train.get_context()
    replica = Replica(context.get_world_rank(), context.get_world_size(), context.get_world_size())
    cfg = TrainConfig.model_validate(setup["config"])
    shard = cfg.stage(setup["stage"]).batch_size // replica.shards
    window = cfg.stage(setup["stage"]).window or 10
    data_s = data_seconds(setup["data"], setup["stage"], shard, window)
    train_stage_worker(setup["stage"], setup["data"], setup["out"], cfg, progress=False, replica=replica)
    skip = setup["skip"]
    if replica.is_chief:  # Ray Train keeps reported metrics only with a checkpoint: a file instead
        Path(setup["out"], "times.json").write_text(json.dumps({
            "compute_s": float(np.mean(replica.times.compute_s[skip:])),
            "all_reduce_s": float(np.mean(replica.times.all_reduce_s[skip:])),
            "data_s": data_s, "steps": len(replica.times.compute_s) - skip,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def run(workers: int, stage: str, data: str, out: Path, cfg: Any, skip: int) -> dict[str, float]:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    setup = {"stage": stage, "data": data, "out": str(out), "config": cfg.model_dump(mode="json"),
             "skip": skip}
    trainer = TorchTrainer(bench_worker, train_loop_config=setup,
                           scaling_config=ScalingConfig(num_workers=workers,
                                                        resources_per_worker={"CPU": 1}),
                           torch_config=TorchConfig(backend="gloo"),
                           run_config=RunConfig(name=f"bench-{workers}", storage_path=str(out / "ray")))
    trainer.fit()
    return json.loads((out / "times.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=["autoencoder", "dynamics"], default="dynamics")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--resolution", type=int, default=96)
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--batch", type=int, help="global batch (default: the preset's)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--skip", type=int, default=3, help="warm-up steps not counted")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--write", type=Path, help="append the table to this markdown file")
    args = parser.parse_args()

    import ray

    from sim_model.train.run import stage_config, train_stage

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = Path(tempfile.mkdtemp(prefix="bench_train_"))
    try:
        data = str(tmp / "data.zarr")
        make_store(Path(data), args.episodes, args.resolution)
        base = tmp / "base"
        quick = {"val_every": 10**6, "sample_every": 10**6, "checkpoint_every": 10**6, "val_batches": 1}
        config = tmp / "train.json"
        stage_key = args.stage.replace("-", "_")
        overrides = {**quick, "steps": args.steps, **({"batch_size": args.batch} if args.batch else {})}
        config.write_text(json.dumps(
            {"preset": args.preset, "autoencoder": {**quick, "steps": 1}, stage_key: overrides}))
        if args.stage == "dynamics":  # the stage starts from a (here barely trained) autoencoder
            train_stage("autoencoder", data, base, config_file=str(config), progress=False)
        cfg = stage_config(args.stage, base, config_file=str(config))
        batch = cfg.stage(args.stage).batch_size
        ray.init(address="local", num_cpus=max(args.workers), include_dashboard=False, logging_level="ERROR")
        rows = []
        for workers in args.workers:
            out = tmp / f"w{workers}"
            shutil.copytree(base, out)
            metrics = run(workers, args.stage, data, out, cfg, args.skip)
            step = metrics["compute_s"] + metrics["all_reduce_s"]
            rows.append({"workers": workers, "samples_s": batch / step, **metrics})
            print(rows[-1], flush=True)
        ray.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    single = next((r["samples_s"] for r in rows if r["workers"] == 1), None)
    load = os.getloadavg()
    lines = [f"\n## {time.strftime('%Y-%m-%d %H:%M')}: {args.stage}, preset {args.preset}, "
             f"{args.resolution}x{args.resolution}, global batch {batch}, {args.steps} steps "
             f"({args.skip} warm-up)\n",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores; load average after the runs "
             f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min).\n",
             "| workers | batch per worker | samples/s | efficiency | step ms | data ms | fwd+bwd ms | all-reduce ms | rank-0 peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        efficiency = "" if single is None else f"{r['samples_s'] / (r['workers'] * single):.2f}"
        lines.append(f"| {r['workers']} | {batch // r['workers']} | {r['samples_s']:.1f} | {efficiency} | "
                     f"{1e3 * (r['compute_s'] + r['all_reduce_s']):.0f} | {1e3 * r['data_s']:.1f} | "
                     f"{1e3 * (r['compute_s'] - r['data_s']):.0f} | {1e3 * r['all_reduce_s']:.1f} | {r['rss_mb']:.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.write:
        with open(args.write, "a") as handle:
            handle.write(table)


if __name__ == "__main__":
    main()
