#!/usr/bin/env bash
# The weights a tiny three-stage training run ends with, as digests: run it on two revisions to
# show that a change to the training code leaves training bit-for-bit unchanged.
#
#   scripts/training_digest.sh [WORKDIR]        (default: a fresh temporary directory)
#
# Only `iws` commands are used, so the script runs unchanged on older revisions: check one out
# with `git worktree add /tmp/before REV`, then `PYTHONPATH=/tmp/before scripts/training_digest.sh`
# runs that revision's code with this checkout's environment (.venv/bin on PATH); give both runs
# the same play data (copy WORKDIR/play.zarr into the second WORKDIR). One thread, a few minutes
# on one free core. The recipe turns on what the training code branches on: feedback (fed-back
# predictions), the object head (object_weight), the rollout buffer, weight averaging,
# validation, samples, checkpoints and the decoder fine-tune.
set -euo pipefail

WORK=${1:-$(mktemp -d)}
mkdir -p "$WORK"
IWS=${IWS:-iws}
export PYTHONHASHSEED=0

if [ ! -d "$WORK/play.zarr" ]; then
  "$IWS" collect pusht "$WORK/play.zarr" --episodes 6 --steps 24 --resolution 32 --seed 7 \
    --workers 1 --no-progress >/dev/null
fi

cat >"$WORK/recipe.json" <<'EOF'
{
 "preset": "tiny",
 "val_fraction": 0.2,
 "autoencoder": {"steps": 12, "batch_size": 4, "warmup": 2, "ema": 0.9, "val_every": 6,
                 "sample_every": 6, "checkpoint_every": 6},
 "dynamics": {"steps": 12, "batch_size": 4, "warmup": 2, "ema": 0.9, "val_every": 6,
              "sample_every": 6, "checkpoint_every": 6, "feedback_start": 0.0,
              "feedback_depth": 2, "object_weight": 1.0, "rollout_buffer": 8, "rollout_depth": 4},
 "decoder_finetune": {"steps": 4, "batch_size": 4, "val_every": 2, "checkpoint_every": 2}
}
EOF

rm -rf "$WORK/run"
for stage in autoencoder dynamics decoder-finetune; do
  "$IWS" train --stage "$stage" --data "$WORK/play.zarr" --out "$WORK/run" \
    --config "$WORK/recipe.json" --threads 1 --no-progress >/dev/null 2>&1
done

python - "$WORK/run" <<'EOF'
import hashlib
import sys
from pathlib import Path

from safetensors.numpy import load_file

run = Path(sys.argv[1])
for stage in ("autoencoder", "dynamics", "decoder-finetune"):
    tensors = load_file(run / stage / "state" / "weights.safetensors")
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].tobytes())
    print(f"{stage:17s} {len(tensors):4d} tensors  sha256 {digest.hexdigest()[:16]}")
EOF
