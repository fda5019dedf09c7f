#!/usr/bin/env bash
# One arm of an equal-budget world-model ablation: continue the bundled PushT model's dynamics
# (`iws train --init-from pusht`) with a recipe from experiments/recipes/, for a fixed time at one
# thread, into runs/abl_<recipe>/. Score arms with experiments.ablation_score (docs/models/pusht.md).
#
#   scripts/ablation_arm.sh control 45 & scripts/ablation_arm.sh recipeA 45 &   # two arms side by side
set -euo pipefail
cd "$(dirname "$0")/.."
RECIPE="$1"
MINUTES="${2:-45}"
FROM="${FROM:-pusht}"
OUT="${OUT:-runs/abl_${RECIPE}}"
mkdir -p "$OUT"
exec "${PYTHON:-.venv/bin/python}" -m pipeline.cli train --stage dynamics --init-from "$FROM" \
    --config "experiments/recipes/${RECIPE}.json" --data "${DATA:-data/pusht_train.zarr}" --out "$OUT" \
    --threads 1 --no-progress --time-limit "$MINUTES"
