#!/usr/bin/env bash
# Reproduce the bundled PushT model's report (docs/models/pusht.md): fidelity on both held-out
# sets, a 6,000-step stability rollout and inference speed. The stores come from
# scripts/collect_pusht_sets.sh (run first; it skips stores already there):
#   data/pusht_heldout.zarr          scripted play, seed 1000 (the report set; development)
#   data/pusht_contact_heldout.zarr  aimed strikes and levers, a generator no training used
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-pusht}"
OUT="${2:-docs/models/pusht}"
EPISODES="${EPISODES:-30}"
for store in data/pusht_heldout.zarr data/pusht_contact_heldout.zarr; do
    [ -e "$store" ] || { echo "missing $store: run scripts/collect_pusht_sets.sh first" >&2; exit 2; }
done
fidelity() {  # STORE OUT
    .venv/bin/iws eval fidelity --model "$MODEL" --data "$1" --episodes "$EPISODES" \
        --horizons 1,10,50,199 --object-mask pusht --threads 1 --no-progress --videos 4 --out "$2"
}
fidelity data/pusht_heldout.zarr "$OUT/fidelity"
fidelity data/pusht_contact_heldout.zarr "$OUT/fidelity_contact"
.venv/bin/iws eval stability --model "$MODEL" --init "data/pusht_heldout.zarr#0:0" --steps 6000 \
    --object-mask pusht --probe-every 20 --threads 1 --no-progress --out "$OUT/stability"
