"""`iws train --stage {autoencoder,dynamics,decoder-finetune} --data STORE --out DIR`.

All stages share the run directory DIR; after `dynamics` (and again after `decoder-finetune`)
DIR/model is a complete checkpoint for WorldModel.load / `iws generate`. Rerunning a command
resumes from the stage's last checkpoint (kill it any time); a larger --steps continues a
finished stage, e.g. on a GPU: `--device cuda`. `--init-from pusht` continues the bundled
model in a fresh run directory (all weights, its normalisation and architecture); with
`dynamics: {fresh_dynamics: true}` in --config it keeps only that model's autoencoder and trains
the dynamics --config describes from scratch (an architecture arm on a frozen autoencoder).

`--workers N` trains the stage on N data-parallel Ray Train workers (gloo on CPU, NCCL with
--gpus-per-worker) on an embedded local Ray, or on a cluster with --address / RAY_ADDRESS. The
global batch stays the stage's batch_size (each worker draws batch_size / N), rank 0 writes the
checkpoints into --out (which every worker must see), and a lost worker restarts the group from
the last checkpoint. Without --workers the stage trains in this process.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("train", help="train a world-model stage from an episode store",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", required=True, choices=["autoencoder", "dynamics", "decoder-finetune"],
                        help="which stage to train (in this order)")
    parser.add_argument("--data", required=True, help="Zarr episode store to train on")
    parser.add_argument("--out", required=True, help="run directory shared by all stages")
    parser.add_argument("--config", help="YAML/JSON TrainConfig overriding the preset's settings")
    parser.add_argument("--preset", choices=["tiny", "small", "paper"],
                        help="model size (first stage only; default small)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--steps", type=int, help="total optimiser steps of this stage")
    parser.add_argument("--time-limit", type=float, metavar="MINUTES",
                        help="train for at most this long (learning rate annealed to fit), export the "
                        "stage's checkpoint; rerunning continues towards --steps")
    parser.add_argument("--init-from", metavar="CKPT",
                        help="start the stage from this complete checkpoint (directory or bundled name, "
                        "e.g. 'pusht') instead of the run's previous stage: continue training a model; "
                        "with `dynamics: {fresh_dynamics: true}` in --config, only its autoencoder, and "
                        "the dynamics --config describes trains from scratch")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice); with "
                        "--workers, per worker, and the Ray CPUs each worker takes (default 1)")
    parser.add_argument("--cache-mb", type=float, metavar="MIB",
                        help="stream frames from the store (local or s3://) through a cache of this many "
                        "MiB, and keep at most as much of encoded latents, instead of loading the whole "
                        "dataset into memory (per worker with --workers); default: load everything")
    parser.add_argument("--log", dest="metrics_logs", action="append", default=[],
                        choices=["csv", "tensorboard"],
                        help="also log losses and held-out metrics as <stage>/metrics.csv (step,metric,"
                        "value rows) or TensorBoard event files in <stage>/tensorboard/ (`tensorboard "
                        "--logdir OUT`; pip install 'iws[tensorboard]'); repeatable. metrics.jsonl is "
                        "always written")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--workers", type=int,
                        help="data-parallel Ray Train workers (default: train in this process)")
    parser.add_argument("--gpus-per-worker", type=float, default=0,
                        help="GPUs per worker with --workers (default 0: CPU workers)")
    parser.add_argument("--address", help="Ray cluster to train on with --workers (ray://HOST:10001 "
                        "or auto; default RAY_ADDRESS, else an embedded local Ray)")
    parser.add_argument("--data-shards", type=int, metavar="S",
                        help="with --workers: draw each global batch as S equal shards (default: the "
                        "stage's own, else --workers); any worker count dividing S trains the same")
    parser.add_argument("--storage", metavar="URI",
                        help="with --workers: also keep the stage's checkpoints here as Ray Train "
                        "checkpoints (a path or s3://bucket/prefix, one per run), for workers that "
                        "do not share --out")
    parser.add_argument("--max-failures", type=int, default=3,
                        help="with --workers: worker-group restarts from the last checkpoint (default 3)")
    parser.set_defaults(func=run)
    return parser


def submission_parser() -> argparse.ArgumentParser:
    """`iws train`'s parser on its own: `iws submit train` checks a submission's arguments with it
    (pipeline/train/submit.py)."""
    root = argparse.ArgumentParser(prog="iws submit", add_help=False)
    return register(root.add_subparsers(dest="command", required=True))


def run(args: argparse.Namespace) -> int:
    import logging

    import torch

    from schemas.errors import UserError
    from sim_model.train import train_stage

    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps must be at least 1, got {args.steps}.")
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be at least 1, got {args.threads}.")
    if args.cache_mb is not None and args.cache_mb <= 0:
        raise UserError(f"--cache-mb must be a positive size in MiB, got {args.cache_mb:g}.")
    if args.workers is None:
        for flag, value in (("--gpus-per-worker", args.gpus_per_worker), ("--address", args.address),
                            ("--data-shards", args.data_shards), ("--storage", args.storage)):
            if value:
                raise UserError(f"{flag} needs --workers N (Ray Train workers).")
    else:
        from pipeline.train.cluster import train_on_cluster

        if args.device != "cpu":
            raise UserError("with --workers the device follows --gpus-per-worker; drop --device.")
        path = train_on_cluster(args.stage, args.data, args.out, workers=args.workers,
                                gpus_per_worker=args.gpus_per_worker, threads=args.threads,
                                address=args.address, data_shards=args.data_shards,
                                max_failures=args.max_failures, storage=args.storage,
                                config_file=args.config,
                                preset=args.preset, steps=args.steps, progress=not args.no_progress,
                                time_limit_s=None if args.time_limit is None else args.time_limit * 60,
                                init_from=args.init_from, cache_mb=args.cache_mb,
                                metrics_logs=tuple(args.metrics_logs))
        logging.getLogger("iws.train").info("checkpoint: %s (WorldModel.load opens it)", path)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    path = train_stage(args.stage, args.data, args.out, config_file=args.config, preset=args.preset,
                       device=args.device, steps=args.steps, progress=not args.no_progress,
                       time_limit_s=None if args.time_limit is None else args.time_limit * 60,
                       init_from=args.init_from, cache_mb=args.cache_mb,
                       metrics_logs=tuple(args.metrics_logs))
    logging.getLogger("iws.train").info("checkpoint: %s (WorldModel.load opens it)", path)
    return 0
