#!/usr/bin/env bash
# The sweep model's report (docs/models/sweep.md): fidelity on held-out play per horizon beside
# repeating the first frame (PSNR/SSIM per camera, in-goal error, mass conservation, cross-view
# consistency), a 2,000-step stability rollout, and the example job's preview (both cameras).
#
#   scripts/report_sweep_model.sh [MODEL] [OUTDIR]     # defaults: sweep (bundled), docs/models/sweep
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-sweep}"
OUT="${2:-docs/models/sweep}"
EPISODES="${EPISODES:-30}"
HELDOUT=data/sweep_heldout.zarr
if [ ! -e "$HELDOUT" ]; then  # seeds disjoint from the training data's (--seed 0)
    .venv/bin/iws collect sweep --episodes 40 --steps 200 --seed 1000 --out "$HELDOUT" --no-progress
fi
.venv/bin/iws eval fidelity --model "$MODEL" --data "$HELDOUT" --episodes "$EPISODES" \
    --horizons 1,10,50,199 --object-mask sweep --threads 1 --no-progress --videos 4 --out "$OUT/fidelity"
.venv/bin/iws eval stability --model "$MODEL" --init "$HELDOUT#0:0" --steps 2000 \
    --object-mask sweep --probe-every 20 --threads 1 --no-progress --out "$OUT/stability"
