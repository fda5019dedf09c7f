"""Inference-time re-anchoring: put the decoded frame, re-encoded, back into the latent loop.

A rollout stays in latent space: each step's predicted latent is the next step's context. Its
errors may accumulate off the encoder's manifold. Re-anchoring replaces, every EVERY steps,
the newest latent by encode(the frame just decoded from it) — optionally after snapping every
pixel to PushT's palette, which turns a blurred T back into crisp T-coloured pixels. It costs one
encoder pass (0.14 M parameters) per re-anchored step and needs no training; this scores whether
it pays, against the same checkpoint rolled out plainly, with `experiments.ablation_score`'s
measures and paired intervals:

    python -m experiments.reanchor --checkpoint pusht --control v15 \
        --variant snapped10=snapped:10 --variant snapped25=snapped:25 \
        --data data/pusht_ablation.zarr --episodes 24 --long-steps 2000 --long-seeds 3 \
        --threads 1 --reuse experiments/results/ablations_round12.json \
        --out experiments/results/reanchor

The control arm is the checkpoint rolled out as it is; with --reuse an arm is taken from an
earlier report that scored the same checkpoint under the same name, so a name must always mean
the same variant. Results on v1.5: docs/models/pusht.md, "Round 13" (no setting replicated on the
report episodes, so WorldModel does not re-anchor).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

import numpy as np
import torch

from experiments import ablation_score
from experiments.fidelity_diagnosis import snap_to_palette
from schemas import SpecError
from schemas.errors import UserError
from sim_model.world_model import StepResult, WorldModel

log = logging.getLogger("reanchor")

MODES = ("decoded", "snapped")


class ReanchoredWorldModel(WorldModel):
    """A WorldModel whose newest latent is re-encoded from its decoded frame every `every` steps."""

    mode: str = "decoded"
    every: int = 1

    def reset(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self._steps = 0
        super().reset(*args, **kwargs)

    @torch.inference_mode()
    def step(self, actions: np.ndarray | torch.Tensor) -> StepResult:
        result = super().step(actions)
        self._steps += 1
        if self._steps % self.every == 0:
            frames = result.frames if result.frames.ndim == 5 else result.frames[:, None]  # (B, V, H, W, 3)
            if self.mode == "snapped":
                frames = snap_to_palette(frames)
            self._z = self.encode(frames)
        return result


def parse_variant(text: str) -> tuple[str, str, int]:
    """'NAME=MODE:EVERY' -> (name, mode, every)."""
    name, sep, rest = text.partition("=")
    mode, sep2, every = rest.partition(":")
    if not (name and sep and sep2 and mode in MODES and every.isdigit() and int(every) >= 1):
        raise SpecError(f"--variant {text!r}: expected NAME=MODE:EVERY with MODE one of {MODES} and "
                        "EVERY a positive number of steps, e.g. snapped10=snapped:10.")
    return name, mode, int(every)


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, dict[str, tuple[str, int]]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory or bundled name")
    parser.add_argument("--control", default="plain", help="name of the plain (not re-anchored) arm")
    parser.add_argument("--variant", action="append", required=True, metavar="NAME=MODE:EVERY",
                        help=f"a re-anchored arm; MODE: {' or '.join(MODES)}")
    ours, rest = parser.parse_known_args(argv)
    variants = {name: (mode, every) for name, mode, every in map(parse_variant, ours.variant)}
    if ours.control in variants or len(variants) != len(ours.variant):
        raise SpecError("--control and every --variant need distinct names.")
    arms = [f"--arm={name}={ours.checkpoint}" for name in [ours.control, *variants]]
    return ablation_score.parse_args([*arms, *rest]), variants


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        args, variants = parse_args(argv)
        if args.threads:
            torch.set_num_threads(args.threads)

        def load(name: str, path: str) -> WorldModel:
            if name not in variants:
                return WorldModel.load(path, device=args.device)
            model = ReanchoredWorldModel.load(path, device=args.device)
            assert isinstance(model, ReanchoredWorldModel)  # load() builds its own class
            model.mode, model.every = variants[name]
            return model

        report = ablation_score.score_ablation(args, load)
    except (SpecError, UserError) as error:
        log.error("%s", error)
        return 2
    ablation_score.write_report(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
