"""A zoo of lerobot's own policy families for checkpoint selection (issue 31): ACT, Diffusion
Policy and VQ-BeT trained by `lerobot-train` on real gym-pusht demonstrations, each saved at
several points of its training so that their scores spread from poor to good.

1. real demos: the pixel demonstrator in gym-pusht from seeded initial states, successful
   episodes cut at their first success (experiments/usefulness.py's `collect_real`), exported as
   LeRobot v3.0 with the camera under gym-pusht's `observation.image` (as docs/lerobot.md);
2. per family, `lerobot-train` on CPU with a small configuration (the ResNet-18 backbones start
   from scratch: nothing can be downloaded here), a checkpoint every steps / saves steps;
   a killed run resumes from its last checkpoint (`--resume=true`).

Every stage is skipped when its output is there, so the script rebuilds only what is missing.
The checkpoints stay out of git (runs/ is ignored); `--print-policies` lists the `--policy`
arguments of `iws eval ranking` for the zoo:

    python -m experiments.lerobot_zoo --work runs/zoo --demos 100 --families act,diffusion,vqbet
    iws eval ranking --model pusht --init data/pusht_heldout.zarr --ground-truth pusht \\
        $(python -m experiments.lerobot_zoo --work runs/zoo --print-policies) --out runs/ranking
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from experiments.policy_zoo import ZOO

log = logging.getLogger("lerobot_zoo")

# Small enough for one CPU core, large enough to learn PushT from 96x96 frames. lerobot 0.4.4's
# field names; every backbone from scratch (pretrained_backbone_weights=null).
FAMILIES: dict[str, list[str]] = {
    "act": ["--policy.pretrained_backbone_weights=null", "--policy.optimizer_lr=1e-4",
            "--policy.optimizer_lr_backbone=1e-4", "--policy.dim_model=128", "--policy.n_heads=4",
            "--policy.dim_feedforward=512", "--policy.n_encoder_layers=2", "--policy.n_decoder_layers=1",
            "--policy.chunk_size=16", "--policy.n_action_steps=8"],
    "diffusion": ["--policy.down_dims=[64,128,256]", "--policy.diffusion_step_embed_dim=64",
                  "--policy.horizon=16", "--policy.n_action_steps=8", "--policy.n_obs_steps=2",
                  "--policy.num_inference_steps=16", "--policy.crop_shape=[84,84]"],
    "vqbet": ["--policy.n_vqvae_training_steps=500", "--policy.gpt_n_layer=2", "--policy.gpt_n_head=4",
              "--policy.gpt_hidden_dim=128", "--policy.gpt_input_dim=128", "--policy.gpt_output_dim=128",
              "--policy.vqvae_embedding_dim=64", "--policy.n_obs_steps=2",
              "--policy.action_chunk_size=5", "--policy.n_action_pred_token=3"],
}
# ~20 CPU-minutes a family at one thread (ACT ~0.8 s a step, Diffusion ~1.2 s at batch 16).
STEPS = {"act": 1500, "diffusion": 1000, "vqbet": 1500}


def demos(work: Path, n: int, attempts: int, horizon: int) -> Path:
    """The real demonstrations as LeRobot v3.0 (collected and exported unless there)."""
    from experiments.usefulness import collect_real, exported

    store = collect_real(work / "real.zarr", n, attempts, horizon)
    return exported(store, work / "real_lerobot")


def checkpoints(run: Path) -> list[Path]:
    """A lerobot-train run's saved policies, by step."""
    return sorted(p for p in (run / "checkpoints").glob("[0-9]*/pretrained_model") if p.is_dir())


def train_family(family: str, dataset: Path, run: Path, steps: int, saves: int, threads: int,
                 batch_size: int) -> list[Path]:
    """lerobot-train of `family` to `steps`, a checkpoint every steps // saves; resumed if killed."""
    done = run / "checkpoints" / f"{steps:06d}" / "pretrained_model"
    if done.is_dir():
        return checkpoints(run)
    last = run / "checkpoints" / "last" / "pretrained_model" / "train_config.json"
    script = str(Path(sys.executable).with_name("lerobot-train"))
    if last.is_file():
        command = [script, f"--config_path={last}", "--resume=true"]
    else:
        command = [script, f"--dataset.repo_id=iws/{dataset.name}", f"--dataset.root={dataset}",
                   f"--policy.type={family}", f"--output_dir={run}", f"--steps={steps}",
                   f"--save_freq={max(1, steps // saves)}", f"--batch_size={batch_size}", "--num_workers=0",
                   "--log_freq=100", "--eval_freq=0", "--wandb.enable=false", "--policy.device=cpu",
                   "--policy.push_to_hub=false", "--seed=0", *FAMILIES[family]]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    log.info("%s: %s", family, " ".join(command))
    with (run.parent / f"{family}.log").open("a") as out:
        subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
    return checkpoints(run)


def policy_arguments(work: Path) -> list[str]:
    """`--policy` arguments of `iws eval ranking` for every checkpoint built and the scripted zoo."""
    args = []
    for family in FAMILIES:
        if checkpoints(work / family):
            args += ["--policy", f"{family}={work / family}/checkpoints/[0-9]*/pretrained_model"]
    for name in ZOO:
        args += ["--policy", f"experiments.policy_zoo:{name}"]
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs/zoo"))
    parser.add_argument("--demos", type=int, default=100, help="successful real demonstrations")
    parser.add_argument("--attempts", type=int, default=400, help="demonstrator attempts at most")
    parser.add_argument("--horizon", type=int, default=300)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--steps", type=int, help="training steps per family (default: STEPS)")
    parser.add_argument("--saves", type=int, default=5, help="checkpoints along each run")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--print-policies", action="store_true",
                        help="print the --policy arguments for `iws eval ranking` and exit")
    args = parser.parse_args()
    if args.print_policies:
        print(" ".join(policy_arguments(args.work)))  # a glob stays literal: it starts FAMILY=
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)
    dataset = demos(args.work, args.demos, args.attempts, args.horizon)
    built = {}
    for family in [f for f in args.families.split(",") if f]:
        if family not in FAMILIES:
            raise SystemExit(f"--families: unknown family {family!r}; known: {', '.join(FAMILIES)}")
        steps = args.steps or STEPS[family]
        built[family] = [str(p) for p in train_family(family, dataset, args.work / family, steps, args.saves,
                                                       args.threads, args.batch_size)]
        log.info("%s: %d checkpoints", family, len(built[family]))
    index = args.work / "zoo.json"  # merged: families may be trained by separate runs side by side
    known = json.loads(index.read_text()) if index.is_file() else {}
    index.write_text(json.dumps({**known, **built}, indent=1))


if __name__ == "__main__":
    main()
