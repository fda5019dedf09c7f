#!/usr/bin/env bash
# Reproduce the bundled PushT model's report (docs/models/pusht.md): fidelity on held-out
# episodes, a 6,000-step stability rollout and inference speed. Needs the held-out store:
#   iws collect pusht --episodes 40 --steps 200 --out data/pusht_heldout.zarr --seed 1000
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-pusht}"
OUT="${2:-docs/models/pusht}"
EPISODES="${EPISODES:-30}"
.venv/bin/iws eval fidelity --model "$MODEL" --data data/pusht_heldout.zarr --episodes "$EPISODES" \
    --horizons 1,10,50,199 --object-mask pusht --threads 1 --no-progress --videos 4 --out "$OUT/fidelity"
.venv/bin/iws eval stability --model "$MODEL" --init "data/pusht_heldout.zarr#0:0" --steps 6000 \
    --object-mask pusht --probe-every 20 --threads 1 --no-progress --out "$OUT/stability"
