#!/usr/bin/env bash
# A task model's report (docs/models/TASK.md): fidelity on held-out play per horizon beside
# repeating the first frame (PSNR/SSIM per camera and the task's own object metrics, from
# `--object-mask TASK`), and a 2,000-step stability rollout.
#
#   scripts/report_task_model.sh TASK [MODEL] [OUTDIR]   # defaults: the bundled TASK, docs/models/TASK
set -euo pipefail
cd "$(dirname "$0")/.."
TASK="${1:?usage: scripts/report_task_model.sh TASK [MODEL] [OUTDIR]}"
MODEL="${2:-$TASK}"
OUT="${3:-docs/models/$TASK}"
EPISODES="${EPISODES:-30}"
HELDOUT="data/${TASK}_heldout.zarr"
if [ ! -e "$HELDOUT" ]; then  # seeds disjoint from the training data's (--seed 0)
    .venv/bin/iws collect "$TASK" --episodes 40 --steps 200 --seed 1000 --out "$HELDOUT" --no-progress
fi
.venv/bin/iws eval fidelity --model "$MODEL" --data "$HELDOUT" --episodes "$EPISODES" \
    --horizons 1,10,50,199 --object-mask "$TASK" --threads 1 --no-progress --videos 4 --out "$OUT/fidelity"
.venv/bin/iws eval stability --model "$MODEL" --init "$HELDOUT#0:0" --steps 2000 \
    --object-mask "$TASK" --probe-every 20 --threads 1 --no-progress --out "$OUT/stability"
