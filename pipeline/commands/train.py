"""`iws train --stage {autoencoder,dynamics,decoder-finetune} --data STORE --out DIR`.

All stages share the run directory DIR; after `dynamics` (and again after `decoder-finetune`)
DIR/model is a complete checkpoint for WorldModel.load / `iws generate`. Rerunning a command
resumes from the stage's last checkpoint (kill it any time); a larger --steps continues a
finished stage, e.g. on a GPU: `--device cuda`. `--init-from pusht` continues the bundled
model in a fresh run directory (all weights, its normalisation and architecture).
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
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
                        "e.g. 'pusht') instead of the run's previous stage: continue training a model")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging

    import torch

    from pipeline.cli import UserError
    from sim_model.train import train_stage

    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps must be at least 1, got {args.steps}.")
    if args.threads:
        torch.set_num_threads(args.threads)
    path = train_stage(args.stage, args.data, args.out, config_file=args.config, preset=args.preset,
                       device=args.device, steps=args.steps, progress=not args.no_progress,
                       time_limit_s=None if args.time_limit is None else args.time_limit * 60,
                       init_from=args.init_from)
    logging.getLogger("iws.train").info("checkpoint: %s (WorldModel.load opens it)", path)
    return 0
